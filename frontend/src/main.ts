// Entry point. TensorBoard imports this module in the plugin iframe and calls render() with no arguments.
import tabulatorCss from "tabulator-tables/dist/css/tabulator_simple.min.css";
import { api, useDeviceOverride, type RunInfo, type RunsResponse, type Selection } from "./api";
import { Picker } from "./components/picker";
import {
  emptyState,
  errorState,
  loadingState,
  partialErrorsBanner,
  progressState,
  runErrorState,
} from "./components/states";
import { onLinkChange, readLink, writeLink, type Link } from "./deeplink";
import { fullTextOnHover, h, replace } from "./dom";
import { setExportContext } from "./export";
import { ALL_SPANS, ALL_WORKERS, loadPrefs, nav, savePrefs, Store, type AppState } from "./state";
import appCss from "./styles.css";
import { TABS, type TabDef, type TabView } from "./views";
import { DeviceBanner, deviceOverride } from "./components/devicePicker";
import { startTheme } from "./theme";

const STYLE_ID = "tb-gpuinsight-styles";
const LOADING_POLL_MS = 2000;
const DEFAULT_SCAN_S = 10;

function injectStyles(): void {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = tabulatorCss + "\n" + appCss;
  document.head.appendChild(style);
}

/** Statuses that change on their own ("waiting": the file is still being written); an "error" never does. */
function isBusy(status: string | undefined): status is "loading" | "pending" | "waiting" {
  return status === "loading" || status === "pending" || status === "waiting";
}

class App {
  private store: Store<AppState>;
  private runs: RunInfo[] = [];
  private runsLoaded = false;
  private scanIntervalS = DEFAULT_SCAN_S;
  /** Why the logdir yields no run (from /runs), shown in place of the tabs. */
  private logdirError = "";
  private timer: ReturnType<typeof setTimeout> | undefined;
  private fetching = false;

  private picker: Picker;
  private tabBar = h("nav", { class: "tabs", attrs: { role: "tablist", "aria-label": "Views" } });
  private notice = h("div", { class: "notice-host" });
  private banner = h("div", { class: "banner-host" });
  private deviceBanner = new DeviceBanner(() => {
    this.shownKey = ""; // the device override changed: every view fetches again
    this.show();
  });
  private content = h("div", { class: "content", attrs: { role: "tabpanel" } });

  private mounted: { key: string; tab: TabDef; view: TabView; host: HTMLElement } | null = null;
  private shownKey = "";
  /** The URL's link is being applied (a history move): write it back as is, without a new history entry. */
  private applyingLink = false;
  /** The first list of runs has been applied: from then on a user's change is a history entry. */
  private linkReady = false;
  /** A cross-tab move in progress: its first change is the history entry, the rest amend it. */
  private batch: "open" | "pushed" | null = null;

  constructor(private root: HTMLElement) {
    // A deep link in the URL wins over the remembered preferences.
    const prefs = loadPrefs();
    this.store = new Store<AppState>(App.fromLink(readLink(), {
      run: prefs.run,
      worker: prefs.worker,
      span: prefs.span || ALL_SPANS,
      tab: TABS.some((t) => t.id === prefs.tab) ? prefs.tab : TABS[0].id,
    }));
    this.picker = new Picker({
      onChange: (patch) => this.select(patch),
      onRefresh: () => void this.refresh(),
    });
  }

  /** `base` with the link's run, worker, span and tab where it names them. */
  private static fromLink(link: Link, base: AppState): AppState {
    return {
      run: link.run ?? base.run,
      worker: link.worker ?? base.worker,
      span: link.span ?? base.span,
      tab: link.tab && TABS.some((t) => t.id === link.tab) ? link.tab : base.tab,
    };
  }

  /** Back / forward (or an edited hash): show the view the link names. */
  private applyLink(link: Link): void {
    this.applyingLink = true;
    try {
      this.store.set(this.runsLoaded ? this.reconcile(App.fromLink(link, this.store.get())) : App.fromLink(link, this.store.get()));
    } finally {
      this.applyingLink = false;
    }
  }

  private writeLink(state: AppState, changed: ReadonlySet<keyof AppState>): void {
    const user = this.linkReady && !this.applyingLink;
    writeLink(
      { run: state.run, worker: state.worker, span: state.span, tab: state.tab },
      { push: user && this.batch !== "pushed", dropTabKeys: user && changed.has("tab") },
    );
    if (user && this.batch === "open") this.batch = "pushed";
  }

  start(): void {
    replace(
      this.root,
      h(
        "div",
        { class: "gi-app" },
        h(
          "header",
          { class: "app-header" },
          h("div", { class: "brand" }, h("span", { class: "brand-mark", attrs: { "aria-hidden": "true" } }), h("span", { text: "GPU Insight" })),
          this.picker.el,
        ),
        this.tabBar,
        this.notice,
        this.banner,
        this.deviceBanner.el,
        this.content,
      ),
    );
    this.renderTabs();
    replace(this.content, loadingState("Looking for runs…"));
    // A tab asked for another tab (a step click in the Overview, an evidence link): switch span, then tab.
    nav.subscribe((n, changed) => {
      if (!changed.has("request") || !n.request) return;
      // One history entry for the whole move (worker, span and tab may all change).
      this.batch = "open";
      try {
        if (n.request.worker) this.select({ worker: n.request.worker });
        if (n.request.span) this.select({ span: n.request.span });
        this.store.set({ tab: n.request.tab });
      } finally {
        this.batch = null;
      }
    });
    onLinkChange((link) => this.applyLink(link));
    this.store.subscribe((state, changed) => {
      savePrefs({ run: state.run, worker: state.worker, span: state.span, tab: state.tab });
      this.writeLink(state, changed);
      if (changed.has("tab")) this.renderTabs();
      this.picker.update(this.runs, state);
      this.show();
    });
    void this.refresh();
  }

  /** Apply a picker change, then make the rest of the selection valid for it. */
  private select(patch: Partial<AppState>): void {
    const next = { ...this.store.get(), ...patch };
    if (patch.run !== undefined) {
      next.worker = null;
      next.span = ALL_SPANS;
    }
    if (patch.worker !== undefined) next.span = ALL_SPANS;
    this.store.set(this.reconcile(next));
  }

  /** Fix a selection that names a run, worker or span that is not (or no longer) there. */
  private reconcile(state: AppState): AppState {
    const next = { ...state };
    let run = this.runs.find((r) => r.run === next.run);
    if (!run) {
      run = this.runs[0];
      next.run = run?.run ?? null;
    }
    const workers = run?.workers ?? [];
    if (next.worker === ALL_WORKERS && workers.length > 1) return { ...next, span: ALL_SPANS };
    let worker = workers.find((w) => w.worker === next.worker);
    if (!worker) {
      worker = workers[0];
      next.worker = worker?.worker ?? null;
    }
    if (next.span !== ALL_SPANS && !worker?.spans.some((s) => s.span === next.span)) next.span = ALL_SPANS;
    return next;
  }

  private async refresh(): Promise<void> {
    if (this.fetching) return;
    this.fetching = true;
    clearTimeout(this.timer);
    try {
      const res: RunsResponse = await api.runs();
      this.runs = Array.isArray(res.runs) ? res.runs : [];
      this.logdirError = typeof res.logdir_error === "string" ? res.logdir_error : "";
      if (typeof res.scan_interval_s === "number" && res.scan_interval_s > 0) this.scanIntervalS = res.scan_interval_s;
      this.runsLoaded = true;
      replace(this.notice);
      const state = this.store.get();
      const next = this.reconcile(state);
      this.picker.update(this.runs, next);
      this.store.set(next); // re-renders through the subscription when the selection changed
      if (!this.linkReady) writeLink({ run: next.run, worker: next.worker, span: next.span, tab: next.tab });
      this.linkReady = true;
      this.show();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (!this.runsLoaded) {
        this.shownKey = "";
        this.unmount();
        replace(this.content, errorState("Could not list the runs", message, () => void this.refresh()));
      } else {
        replace(this.notice, h("div", { class: "banner banner-warn", attrs: { role: "alert" }, text: `Lost contact with the server: ${message}. Retrying…` }));
      }
    } finally {
      this.fetching = false;
      this.schedule();
    }
  }

  /** Poll fast while the shown run is being read, otherwise at the server's scan interval for new runs and spans. */
  private schedule(): void {
    clearTimeout(this.timer);
    const run = this.currentRun();
    const span = this.currentSpan();
    const busy = isBusy(run?.status) || isBusy(span?.status) || !this.runsLoaded;
    const ms = busy ? LOADING_POLL_MS : this.scanIntervalS * 1000;
    this.timer = setTimeout(() => void this.refresh(), ms);
  }

  private currentRun(): RunInfo | undefined {
    return this.runs.find((r) => r.run === this.store.get().run);
  }

  private currentSpan() {
    const state = this.store.get();
    if (state.span === ALL_SPANS) return undefined;
    return this.currentRun()
      ?.workers.find((w) => w.worker === state.worker)
      ?.spans.find((s) => s.span === state.span);
  }

  private renderTabs(): void {
    const active = this.store.get().tab;
    replace(
      this.tabBar,
      ...TABS.map((t) =>
        h("button", {
          class: "tab" + (t.id === active ? " active" : ""),
          text: t.label,
          attrs: { role: "tab", "aria-selected": String(t.id === active), type: "button" },
          on: { click: () => this.store.set({ tab: t.id }) },
        }),
      ),
    );
  }

  /** Decide what the content area shows for the current runs and selection; re-render only what changed. */
  private show(): void {
    if (!this.runsLoaded) return;
    const state = this.store.get();
    const run = this.currentRun();
    const span = this.currentSpan();

    replace(this.banner, run && run.status === "ready" && run.errors?.length ? partialErrorsBanner(run.errors) : null);

    if (!run) {
      const problem = this.logdirError;
      this.setStatic(
        `empty|${problem}`,
        emptyState(
          problem ? "The logdir holds no PyTorch profiler trace" : "No PyTorch profiler traces found under the logdir",
          h(
            "span",
            null,
            problem ? h("span", { class: "logdir-problem", attrs: { role: "alert" } }, h("code", { text: problem }), h("br")) : null,
            "Point TensorBoard at a folder holding ",
            h("code", { text: "*.pt.trace.json" }),
            " or ",
            h("code", { text: "*.pt.trace.json.gz" }),
            " files, as written by ",
            h("code", { text: "torch.profiler.tensorboard_trace_handler(dir)" }),
            `, for example `,
            h("code", { text: "tensorboard --logdir runs" }),
            `. The logdir is scanned again every ${this.scanIntervalS} s.`,
          ),
        ),
      );
      return;
    }
    if (isBusy(run.status)) {
      this.setStatic(null, progressState(run.run, run.status, run.progress));
      return;
    }
    if (run.status === "error") {
      this.setStatic(`error|${run.run}|${JSON.stringify(run.errors ?? [])}`, runErrorState(run.run, run.errors ?? []));
      return;
    }
    if (span && isBusy(span.status)) {
      this.setStatic(null, progressState(`${run.run} / ${span.span}`, span.status, run.progress));
      return;
    }
    if (span && span.status === "error") {
      const listed = (run.errors ?? []).filter((e) => e.file === span.span || e.file.endsWith("/" + span.span));
      const errs = listed.length || !span.reason ? listed : [{ file: span.span, reason: span.reason }];
      this.setStatic(`span-error|${span.span}|${span.reason ?? ""}`, runErrorState(span.span, errs));
      return;
    }
    if (!state.worker) {
      this.setStatic("no-worker", emptyState("This run has no worker", "No trace file of this run could be attributed to a worker."));
      return;
    }
    this.deviceBanner.show({ run: run.run, worker: state.worker, span: state.span });
    this.mountTab({ run: run.run, worker: state.worker, span: state.span }, state.tab);
  }

  /** Show a non-tab state; `key` (when not null) avoids rebuilding an unchanged one on every poll. */
  private setStatic(key: string | null, el: HTMLElement): void {
    if (key !== null && key === this.shownKey) return;
    this.unmount();
    this.shownKey = key ?? "";
    replace(this.content, el);
  }

  private mountTab(sel: Selection, tabId: string): void {
    const tab = TABS.find((t) => t.id === tabId) ?? TABS[0];
    // "All spans" shows new data when a span is added: include the span list in the key.
    const spans = this.currentRun()?.workers.find((w) => w.worker === sel.worker)?.spans ?? [];
    const version = sel.span === ALL_SPANS ? spans.map((s) => `${s.span}:${s.status}`).join(",") : "";
    const key = `tab|${tab.id}|${sel.run}|${sel.worker}|${sel.span}|${version}|${deviceOverride(sel.run) ?? ""}`;
    if (this.shownKey === key) return;
    this.shownKey = key;
    setExportContext([sel.run, sel.worker === ALL_WORKERS ? "all-ranks" : sel.worker, sel.span === ALL_SPANS ? null : sel.span]);
    if (this.mounted && this.mounted.tab === tab && this.content.contains(this.mounted.host)) {
      this.mounted.view.update(sel);
      this.mounted.key = key;
      return;
    }
    this.unmount();
    const host = h("div", { class: "tab-host" });
    replace(this.content, host);
    this.mounted = { key, tab, view: tab.mount(host, sel), host };
  }

  private unmount(): void {
    if (!this.mounted) return;
    this.mounted.view.destroy();
    this.mounted = null;
  }
}

let app: App | null = null;

/** Build the plugin UI into document.body. */
export function render(): void {
  useDeviceOverride(deviceOverride);
  injectStyles();
  startTheme();
  document.body.classList.add("gi-body");
  fullTextOnHover(document.body);
  if (app) return;
  app = new App(document.body);
  app.start();
}
