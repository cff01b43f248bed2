// Loading, empty, error and progress states. Each returns a detached element for the caller to place.
import { canRetry, type FileError, type Progress } from "../api";
import { h } from "../dom";
import { bytes, count } from "../format";

export function loadingState(message: string): HTMLElement {
  return h(
    "div",
    { class: "state state-loading", attrs: { role: "status", "aria-live": "polite" } },
    h("span", { class: "spinner", attrs: { "aria-hidden": "true" } }),
    h("span", { class: "state-text", text: message }),
  );
}

export function emptyState(title: string, hint?: string | Node): HTMLElement {
  return h(
    "div",
    { class: "state state-empty" },
    h("div", { class: "state-title", text: title }),
    hint ? h("div", { class: "state-hint" }, hint) : null,
  );
}

export function errorState(title: string, message: string, retry?: () => void): HTMLElement {
  return h(
    "div",
    { class: "state state-error", attrs: { role: "alert" } },
    h("div", { class: "state-title", text: title }),
    h("div", { class: "state-message", text: message }),
    retry ? h("button", { class: "btn", text: "Retry", on: { click: retry } }) : null,
  );
}

/** `errorState` for a failed request: no Retry button when the server said the trace cannot be analysed (422). */
export function requestErrorState(title: string, err: unknown, retry: () => void): HTMLElement {
  return errorState(title, err instanceof Error ? err.message : String(err), canRetry(err) ? retry : undefined);
}

/** An inline, one-line error for a part of a view (a chart, the details panel). */
export function inlineError(message: string): HTMLElement {
  return h("div", { class: "inline-error", attrs: { role: "alert" }, text: message });
}

function bar(label: string, done: number, total: number, text: string): HTMLElement {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  return h(
    "div",
    { class: "progress-row" },
    h("span", { class: "progress-label", text: label }),
    h(
      "div",
      {
        class: "progress-track",
        attrs: {
          role: "progressbar",
          "aria-label": label,
          "aria-valuemin": "0",
          "aria-valuemax": String(total),
          "aria-valuenow": String(done),
        },
      },
      h("div", { class: "progress-fill", style: { width: `${(frac * 100).toFixed(1)}%` } }),
    ),
    h("span", { class: "progress-text", text }),
  );
}

/** A run being read: files and bytes done so far. The caller polls and replaces it. */
export function progressState(
  run: string,
  status: "loading" | "pending" | "waiting",
  progress: Progress | null | undefined,
): HTMLElement {
  const p = progress ?? { files_done: 0, files_total: 0, bytes_done: 0, bytes_total: 0 };
  const title =
    status === "pending"
      ? `Run "${run}" is queued for reading`
      : status === "waiting"
        ? `Waiting for "${run}" to be completely written…`
        : `Reading run "${run}"…`;
  return h(
    "div",
    { class: "state state-progress", attrs: { role: "status", "aria-live": "polite" } },
    h("div", { class: "state-title" }, h("span", { class: "spinner", attrs: { "aria-hidden": "true" } }), title),
    bar("Files", p.files_done, p.files_total, `${count(p.files_done)} / ${count(p.files_total)}`),
    bar("Bytes", p.bytes_done, p.bytes_total, `${bytes(p.bytes_done)} / ${bytes(p.bytes_total)}`),
    h("div", { class: "state-hint", text: "This page checks again every 2 s; results appear when the run is read." }),
  );
}

/** The files of a run that could not be read, one line each. */
export function fileErrorList(errors: readonly FileError[]): HTMLElement {
  return h(
    "ul",
    { class: "file-errors" },
    ...errors.map((e) =>
      h("li", null, h("code", { class: "file-name", text: e.file }), h("span", { class: "file-reason", text: e.reason })),
    ),
  );
}

export function runErrorState(run: string, errors: readonly FileError[]): HTMLElement {
  return h(
    "div",
    { class: "state state-error", attrs: { role: "alert" } },
    h("div", { class: "state-title", text: `Run "${run}" could not be read` }),
    errors.length
      ? fileErrorList(errors)
      : h("div", { class: "state-message", text: "The server gave no reason." }),
  );
}

/** A collapsible warning for a run that is usable but has some unreadable files. */
export function partialErrorsBanner(errors: readonly FileError[]): HTMLElement {
  const n = errors.length;
  return h(
    "details",
    { class: "banner banner-warn" },
    h("summary", { text: `${n} file${n === 1 ? "" : "s"} of this run could not be read and ${n === 1 ? "is" : "are"} left out` }),
    fileErrorList(errors),
  );
}
