// Application state: a tiny observable store, plus the preferences kept across reloads of the plugin iframe.
import type { Dtype, Group, RunInfo, SpanInfo } from "./api";
import { readLink, writeLink } from "./deeplink";

export type Listener<T> = (state: T, changed: ReadonlySet<keyof T>) => void;

export class Store<T extends object> {
  private listeners = new Set<Listener<T>>();

  constructor(private state: T) {}

  get(): Readonly<T> {
    return this.state;
  }

  /** Merge `patch`; listeners hear about it only when some value really changed. */
  set(patch: Partial<T>): void {
    const changed = new Set<keyof T>();
    for (const key of Object.keys(patch) as (keyof T)[]) {
      if (!Object.is(this.state[key], patch[key])) changed.add(key);
    }
    if (changed.size === 0) return;
    this.state = { ...this.state, ...patch };
    for (const fn of [...this.listeners]) fn(this.state, changed);
  }

  subscribe(fn: Listener<T>): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

/** The header's choice: which run, worker and span (a span name, or "all") every tab looks at. */
export interface AppState {
  run: string | null;
  worker: string | null;
  span: string; // span name or ALL_SPANS
  tab: string;
}

export const ALL_SPANS = "all";
/** The worker choice "all ranks": every span of every worker of the run, analysed together. */
export const ALL_WORKERS = "*";

/** Worker options of a run: its workers, then "All ranks" when it has several. */
export function workerOptions(run: RunInfo | undefined): (readonly [string, string])[] {
  const workers = run?.workers ?? [];
  const options = workers.map((w) => [w.worker, w.worker] as const);
  return workers.length > 1 ? [...options, [ALL_WORKERS, `All ranks (${workers.length})`] as const] : options;
}

/** The spans a worker choice covers (every worker's for "All ranks"). */
export function spansOf(run: RunInfo | undefined, worker: string | null): SpanInfo[] {
  const workers = run?.workers ?? [];
  if (worker === ALL_WORKERS) return workers.flatMap((w) => w.spans);
  return workers.find((w) => w.worker === worker)?.spans ?? [];
}

/** Per-user view preferences, remembered in localStorage (best effort: storage may be unavailable). */
export interface Prefs {
  run: string | null;
  worker: string | null;
  span: string;
  tab: string;
  dtype: Dtype;
  group: Group;
  topN: number;
  /** The Kernel tab's device and summary cards: shown in full, or folded to one line (null: folded). */
  kernelCards: "open" | "closed" | null;
}

const PREFS_KEY = "tb_gpuinsight.prefs.v1";

export const DEFAULT_PREFS: Prefs = {
  run: null,
  worker: null,
  span: ALL_SPANS,
  tab: "overview",
  dtype: "auto",
  group: "name",
  topN: 100,
  kernelCards: null,
};

export function loadPrefs(): Prefs {
  try {
    const raw = window.localStorage.getItem(PREFS_KEY);
    if (!raw) return { ...DEFAULT_PREFS };
    const saved = JSON.parse(raw) as Partial<Prefs>;
    return { ...DEFAULT_PREFS, ...saved };
  } catch {
    return { ...DEFAULT_PREFS };
  }
}

export function savePrefs(patch: Partial<Prefs>): void {
  try {
    window.localStorage.setItem(PREFS_KEY, JSON.stringify({ ...loadPrefs(), ...patch }));
  } catch {
    // Storage blocked (private mode, sandbox): preferences simply are not remembered.
  }
}

/** One step of the Overview the other tabs are scoped to: its span and its time window (trace microseconds). */
export interface StepScope {
  run: string;
  worker: string;
  span: string;
  label: string;
  t0: number;
  t1: number;
}

/** A kernel-table filter another tab asks for (a recommendation's evidence link). */
export interface KernelFocus {
  filter: string;
  op: string;
}

/** Navigation shared between tabs: the step scope, a pending kernel focus, and a request to open a tab. */
export interface NavState {
  scope: StepScope | null;
  focus: KernelFocus | null;
  request: { tab: string; span: string | null; worker: string | null; seq: number } | null;
}

export const nav = new Store<NavState>({ scope: null, focus: null, request: null });

// The Overview's step scope survives a reload: a shell key of the deep link (`gi.scope`), kept across tabs.
function linkedScope(text: string | undefined): StepScope | null {
  try {
    const s = text ? (JSON.parse(text) as StepScope) : null;
    return s && typeof s.run === "string" && typeof s.span === "string" && Number.isFinite(s.t0) && Number.isFinite(s.t1) ? s : null;
  } catch {
    return null; // a hand-edited link: no scope
  }
}
nav.set({ scope: linkedScope(readLink().scope) });
nav.subscribe((s, changed) => {
  if (changed.has("scope")) writeLink({ scope: s.scope ? JSON.stringify(s.scope) : null });
});
let navSeq = 0;

/** Ask the shell to show `tab` (and, when given, switch the header to `worker`, then `span`). */
export function openTab(tab: string, span: string | null = null, worker: string | null = null): void {
  nav.set({ request: { tab, span, worker, seq: ++navSeq } });
}

/** The step scope when it applies to `sel` (same run, worker and span), else null. */
export function scopeFor(sel: { run: string; worker: string; span: string }): StepScope | null {
  const s = nav.get().scope;
  return s && s.run === sel.run && s.worker === sel.worker && s.span === sel.span ? s : null;
}
