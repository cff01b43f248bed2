// "Open in Perfetto": ui.perfetto.dev's postMessage protocol. Open its window, PING until it answers PONG (it
// listens once loaded), then post {perfetto: {buffer, title}}. Offline, say so and offer the file instead.
export const PERFETTO_ORIGIN = "https://ui.perfetto.dev";
const PING_MS = 100;
const GIVE_UP_MS = 30_000;

export interface PerfettoMessage {
  perfetto: { buffer: ArrayBuffer; title: string; keepApiOpen: boolean };
}

/** The message Perfetto UI expects: the trace bytes (gzip is fine) and the title shown in its sidebar. */
export function perfettoMessage(buffer: ArrayBuffer, title: string): PerfettoMessage {
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength === 0) throw new Error("the trace is empty");
  return { perfetto: { buffer, title: title.slice(0, 200) || "trace", keepApiOpen: false } };
}

export type PerfettoStatus = (text: string, state: "busy" | "done" | "error" | "offline") => void;

/** Must be called from a click handler (browsers allow window.open only there). */
export function openInPerfetto(traceUrl: string, title: string, status: PerfettoStatus): void {
  if (!navigator.onLine) {
    status("Opening in Perfetto needs internet: download the trace and open it at ui.perfetto.dev.", "offline");
    return;
  }
  const win = window.open(PERFETTO_ORIGIN + "/#!/", "_blank");
  if (!win) {
    status("The browser blocked the Perfetto window: allow pop-ups for this page, or download the trace.", "error");
    return;
  }
  status("Fetching the augmented trace…", "busy");
  void fetch(traceUrl, { credentials: "same-origin" })
    .then((r) => {
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      return r.arrayBuffer();
    })
    .then((buffer) => sendWhenReady(win, perfettoMessage(buffer, title), status))
    .catch((err: unknown) => status(`Could not open in Perfetto: ${err instanceof Error ? err.message : String(err)}`, "error"));
}

function sendWhenReady(win: Window, message: PerfettoMessage, status: PerfettoStatus): void {
  status("Waiting for Perfetto UI to load…", "busy");
  const started = Date.now();
  const timer = setInterval(() => {
    if (win.closed || Date.now() - started > GIVE_UP_MS) {
      stop();
      status("Perfetto UI did not answer (closed or unreachable): download the trace instead.", "error");
      return;
    }
    win.postMessage("PING", PERFETTO_ORIGIN);
  }, PING_MS);
  const onMessage = (ev: MessageEvent) => {
    if (ev.source !== win || ev.data !== "PONG") return;
    stop();
    win.postMessage(message, PERFETTO_ORIGIN, [message.perfetto.buffer]);
    status("Sent to Perfetto UI.", "done");
  };
  const stop = () => {
    clearInterval(timer);
    window.removeEventListener("message", onMessage);
  };
  window.addEventListener("message", onMessage);
}
