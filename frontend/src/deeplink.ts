// Deep links: what the plugin shows lives in TensorBoard's URL hash (the parent page's, since the plugin runs in a
// same-origin iframe; the iframe's own when the parent is unreachable), next to TensorBoard's own entries:
//   #gpuinsight&gi.run=bert&gi.worker=node0&gi.span=all&gi.tab=kernels&gi.kernels.filter=gemm&gi.kernels.sel=...
// Shell keys (run, worker, span, tab) have no dot; a tab's own keys are "<tab id>.<key>" and are dropped when the
// tab changes. A copied URL opens the same view; a tab or selection change is a history entry, so the browser's
// back and forward buttons move between them.
const PREFIX = "gi.";

export type Link = Readonly<Record<string, string>>;

/** The window whose location carries the link. */
function hashWindow(): Window {
  try {
    if (window.parent !== window && window.parent.location.href) return window.parent;
  } catch {
    // cross-origin parent: keep the link in the iframe's own URL
  }
  return window;
}

function decode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v; // a hand-edited, malformed escape: take it as typed
  }
}

/** TensorBoard's entries of the hash (kept as they are) and the plugin's (decoded, without the prefix). */
function parse(hash: string): { others: string[]; link: Record<string, string> } {
  const others: string[] = [];
  const link: Record<string, string> = {};
  for (const part of hash.replace(/^#/, "").split("&")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    const key = eq < 0 ? part : decode(part.slice(0, eq));
    if (eq > 0 && key.startsWith(PREFIX)) link[key.slice(PREFIX.length)] = decode(part.slice(eq + 1));
    else others.push(part);
  }
  return { others, link };
}

/** The plugin's entries of the current URL hash. */
export function readLink(): Link {
  return parse(hashWindow().location.hash).link;
}

/** A tab's own entries ("<tab>.<key>"), keyed without the tab prefix. */
export function tabLink(tab: string): Link {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(readLink())) if (k.startsWith(`${tab}.`)) out[k.slice(tab.length + 1)] = v;
  return out;
}

export interface WriteOptions {
  /** A new history entry (back returns to the previous view) rather than replacing the current one. */
  push?: boolean;
  /** Drop every tab's own entries first (the tab changed). */
  dropTabKeys?: boolean;
}

/** Merge `patch` into the link (null or "" removes a key) and write it to the URL if it changed. */
export function writeLink(patch: Readonly<Record<string, string | null | undefined>>, opts: WriteOptions = {}): void {
  const win = hashWindow();
  const { others, link } = parse(win.location.hash);
  const next: Record<string, string> = {};
  for (const [k, v] of Object.entries(link)) if (!(opts.dropTabKeys && k.includes("."))) next[k] = v;
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || v === undefined || v === "") delete next[k];
    else next[k] = v;
  }
  const entries = Object.entries(next).map(([k, v]) => `${PREFIX}${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  const hash = "#" + [...others, ...entries].join("&");
  current = JSON.stringify(next);
  if (hash === win.location.hash || (hash === "#" && !win.location.hash)) return;
  const url = win.location.href.replace(/#.*$/, "") + hash;
  if (opts.push) win.history.pushState(win.history.state, "", url);
  else win.history.replaceState(win.history.state, "", url);
}

/** Write a tab's own entries (keys without the tab prefix); a replace, not a history entry, unless `push`. */
export function writeTabLink(tab: string, patch: Readonly<Record<string, string | null | undefined>>, push = false): void {
  writeLink(Object.fromEntries(Object.entries(patch).map(([k, v]) => [`${tab}.${k}`, v])), { push });
}

// The link last written or moved to: popstate and hashchange both fire for one move, and a move back to where the
// plugin already is needs no action.
let current = "";
const listeners = new Set<(link: Link) => void>();
let listening = false;

function moved(): void {
  const link = readLink();
  const now = JSON.stringify(link);
  if (now === current) return;
  current = now;
  for (const fn of [...listeners]) fn(link);
}

/** Call `fn` with the new link when the user moves through history (back / forward) or edits the hash. */
export function onLinkChange(fn: (link: Link) => void): () => void {
  if (!listening) {
    const win = hashWindow();
    current = JSON.stringify(readLink());
    win.addEventListener("popstate", moved);
    win.addEventListener("hashchange", moved);
    listening = true;
  }
  listeners.add(fn);
  return () => listeners.delete(fn);
}
