// Diff tab: two selections (run / worker / span, or all spans of a worker) compared kernel by kernel or op by op:
// a summary strip, kernel time per class as a chart, and a table of rows with both sides' figures and the deltas.
// B starts as the server's most comparable selection (or none, with a prompt); when kernel names barely match
// (another vendor), a banner offers "Op + shapes"; a side that stays unreadable stops the retries with its reason.
import {
  api,
  ApiError,
  DTYPES,
  fetchDiff,
  isAbort,
  type DiffBy,
  type DiffMatch,
  type DiffResponse,
  type DiffRow,
  type DiffSort,
  type DiffStatus,
  type DiffSummary,
  type Dtype,
  type RunInfo,
  type Selection,
} from "../../api";
import { figure } from "../../components/deviceCard";
import { DiffChart } from "./chart";
import { DiffDetails } from "./details";
import { deltaClass, signedPct, signedTime } from "./format";
import { DiffSide, reconcileSide, sameSelection } from "./side";
import { suggestB } from "./suggest";
import { DiffTable, type DiffPageRequest } from "./table";
import { verdictPanel } from "./verdict";
import { emptyState, errorState, inlineError, loadingState, requestErrorState } from "../../components/states";
import { debounce, field, h, replace, select } from "../../dom";
import { count, time } from "../../format";
import { tabLink, writeTabLink } from "../../deeplink";
import { Store } from "../../state";
import { mountSnapshotDiff } from "../memory/snapshot";
import type { TabDef, TabView } from "../types";

const PAGE_SIZE = 100;
const RETRY_MS = 2000;
/** A side still unreadable after this many tries (30 s), or one whose file is broken, stops the retries. */
const MAX_TRIES = 15;

interface DiffState {
  a: Selection;
  b: Selection;
  /** A no longer follows the header's selection. */
  pinned: boolean;
  match: DiffMatch;
  by: DiffBy;
  dtype: Dtype;
  filter: string;
  status: DiffStatus | "";
}

/** What the summary depends on: a change of any of these fetches everything again. */
const RELOAD_ALL: ReadonlyArray<keyof DiffState> = ["a", "b", "match", "by", "dtype"];

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(new DOMException("aborted", "AbortError"));
      },
      { once: true },
    );
  });
}

/** Call `fn` while it answers 503 (a side is still being read), every 2 s, telling `onWait` why; give up with the
 * server's reason when a file is broken ("waiting": it failed to parse) or after MAX_TRIES. */
async function retrying<T>(fn: () => Promise<T>, signal: AbortSignal, onWait: (why: string) => void): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 503 || signal.aborted) throw err;
      if (/ is waiting\b|: .*(error|failed)/i.test(err.message) || tries >= MAX_TRIES) {
        throw new ApiError(`${err.message} (gave up after ${tries} ${tries === 1 ? "try" : "tries"})`, err.status);
      }
      onWait(err.message);
      await sleep(RETRY_MS, signal);
    }
  }
}

function plural(n: number | null, one: string, many = one + "s"): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}

function sameDevices(a: readonly string[], b: readonly string[]): boolean {
  const sa = [...new Set(a)].sort();
  const sb = [...new Set(b)].sort();
  return sa.length === sb.length && sa.every((x, i) => x === sb[i]);
}

function devicesText(devices: readonly string[]): string {
  if (!devices.length) return "no GPU";
  const counts = new Map<string, number>();
  for (const d of devices) counts.set(d, (counts.get(d) ?? 0) + 1);
  return [...counts].map(([d, n]) => (n > 1 ? `${n} × ${d}` : d)).join(", ");
}

/** The sides kept in the deep link: B always (`gi.diff.b_run`, `b_worker`, `b_span`), A when pinned (it follows
 * the header otherwise): a reload compares the same two. */
function writeSides(s: DiffState): void {
  const side = (p: string, sel: Selection | null) => ({ [`${p}_run`]: sel?.run ?? null, [`${p}_worker`]: sel?.worker ?? null, [`${p}_span`]: sel?.span ?? null });
  writeTabLink("diff", { ...side("b", s.b), ...side("a", s.pinned ? s.a : null) });
}

/** The table's options kept in the deep link beside the sides (defaults left out). */
function writeOptions(s: DiffState): void {
  writeTabLink("diff", { match: s.match === "normalized" ? null : s.match, by: s.by === "kernel" ? null : s.by, dtype: s.dtype === "auto" ? null : s.dtype, filter: s.filter || null, status: s.status || null });
}

function linkedOptions(): Partial<DiffState> {
  const p = tabLink("diff");
  const out: Partial<DiffState> = {};
  if (p.match === "exact") out.match = "exact";
  if (p.by === "op") out.by = "op";
  if (p.dtype && (DTYPES as readonly string[]).includes(p.dtype)) out.dtype = p.dtype as Dtype;
  if (p.filter) out.filter = p.filter;
  if (p.status === "both" || p.status === "added" || p.status === "removed") out.status = p.status;
  return out;
}

function linkedSides(header: Selection): { a: Selection | null; b: Selection | null } {
  const p = tabLink("diff");
  const side = (x: string): Selection | null =>
    p[`${x}_run`] ? { ...header, run: p[`${x}_run`], worker: p[`${x}_worker`] ?? header.worker, span: p[`${x}_span`] ?? "all" } : null;
  return { a: side("a"), b: side("b") };
}

class DiffView implements TabView {
  private store: Store<DiffState>;
  private header: Selection;
  private runs: RunInfo[] = [];
  private controller = new AbortController();
  private loadController: AbortController | null = null;
  private unsubscribe: () => void;

  private sideA: DiffSide;
  private sideB: DiffSide;
  private pinBox = h("input", { attrs: { type: "checkbox", "aria-label": "Pin A" } });
  /** The selects of the controls strip: kept showing the state when it changes from elsewhere (a banner's button). */
  private selects: Partial<Record<"match" | "by" | "dtype" | "status", HTMLSelectElement>> = {};
  private hint = h("div", { class: "diff-hint muted small" });
  /** Why nothing was picked as B ("" when B was suggested or chosen). */
  private noB = "";
  private bNote = h("div", { class: "diff-b-note muted small" });
  private result = h("div", { class: "diff-result" });
  private tableStatus = h("div", { class: "table-status" });
  private table: DiffTable | null = null;
  private chart: DiffChart | null = null;
  private details: DiffDetails;
  private summary: DiffSummary | null = null;
  /** The first page, fetched with the summary: the table's first request uses it instead of asking again. */
  private prefetched: { key: string; res: DiffResponse } | null = null;

  constructor(
    private host: HTMLElement,
    sel: Selection,
  ) {
    this.header = sel;
    this.store = new Store<DiffState>({
      a: sel,
      b: sel,
      pinned: false,
      match: "normalized",
      by: "kernel",
      dtype: "auto",
      filter: "",
      status: "",
      ...linkedOptions(), // a reload keeps the table's options
    });
    this.details = new DiffDetails(() => this.closeDetails());
    this.sideA = new DiffSide("Baseline", "A", sel, (a) => this.store.set({ a, pinned: true }),
      h("label", { class: "diff-pin", title: "Keep A when the header's selection changes" }, this.pinBox, h("span", { text: "Pin A" })));
    this.sideB = new DiffSide("Compare", "B", sel, (b) => {
      this.noB = ""; // chosen by hand: no longer the suggestion
      replace(this.bNote);
      this.store.set({ b });
    });
    this.pinBox.addEventListener("change", () => {
      const pinned = this.pinBox.checked;
      this.store.set(pinned ? { pinned } : { pinned, a: reconcileSide(this.runs, this.header) });
    });
    this.unsubscribe = this.store.subscribe((state, changed) => this.onChange(state, changed));
    this.build();
    void this.start();
  }

  private build(): void {
    const s = this.store.get();
    const filterBox = h("input", {
      class: "search",
      attrs: { type: "search", placeholder: "Filter names…", "aria-label": "Filter names", spellcheck: "false" },
    });
    filterBox.value = s.filter;
    const setFilter = debounce((v: string) => this.store.set({ filter: v.trim() }), 300);
    filterBox.addEventListener("input", () => setFilter(filterBox.value));

    const swap = h("button", {
      class: "btn diff-swap",
      text: "⇄ Swap",
      title: "Swap A and B (pins A)",
      attrs: { type: "button", "aria-label": "Swap A and B" },
      on: { click: () => this.swap() },
    });
    const controls = h(
      "div",
      { class: "controls diff-controls" },
      field(
        "Match",
        (this.selects.match = select(
          [
            ["normalized", "Normalized names"],
            ["exact", "Exact names"],
          ],
          s.match,
          (v) => this.store.set({ match: v as DiffMatch }),
          { title: "Normalized: template arguments, anonymous namespaces and launch-specific suffixes removed before matching" },
        )),
      ),
      field(
        "Rows per",
        (this.selects.by = select(
          [
            ["kernel", "Kernel"],
            ["op", "Op + shapes"],
          ],
          s.by,
          (v) => this.store.set({ by: v as DiffBy }),
          { title: "One row per kernel, or per launching op and its input shapes" },
        )),
      ),
      field(
        "dtype",
        (this.selects.dtype = select(
          DTYPES.map((d) => [d, d === "auto" ? "auto (per kernel)" : d] as const),
          s.dtype,
          (v) => this.store.set({ dtype: v as Dtype }),
          { title: "Which datasheet peak each kernel is rated against, on both sides" },
        )),
      ),
      field("Filter", filterBox),
      field(
        "Status",
        (this.selects.status = select(
          [
            ["", "All rows"],
            ["both", "On both sides"],
            ["added", "Added (only in B)"],
            ["removed", "Removed (only in A)"],
          ],
          s.status,
          (v) => this.store.set({ status: v as DiffStatus | "" }),
        )),
      ),
    );
    replace(
      this.host,
      h(
        "div",
        { class: "diff" },
        h(
          "section",
          { class: "panel diff-pick" },
          h("div", { class: "diff-sides" }, this.sideA.el, swap, this.sideB.el),
          this.bNote,
          this.hint,
          controls,
        ),
        this.result,
      ),
      this.details.el,
    );
    this.renderHint();
  }

  /** List the runs, choose the default sides, and compare. */
  private async start(): Promise<void> {
    replace(this.result, loadingState("Looking for runs…"));
    if (!(await this.loadRuns())) return;
    const link = linkedSides(this.header);
    const a = reconcileSide(this.runs, link.a ?? this.header);
    const b = link.b ? reconcileSide(this.runs, link.b) : await this.suggested(a);
    if (this.controller.signal.aborted) return;
    const before = this.store.get();
    this.store.set({ a, b, ...(link.a ? { pinned: true } : {}) }); // compares through onChange when a side changed
    if (this.store.get() === before) {
      this.renderSides();
      void this.load();
    }
  }

  /** The server's most comparable B for A, or A itself (nothing picked: the result area asks for a B). */
  private async suggested(a: Selection): Promise<Selection> {
    let pick: { b: Selection | null; why: string };
    try {
      pick = await suggestB(a, this.controller.signal);
    } catch (err) {
      pick = { b: null, why: `no suggestion (${message(err)})` };
    }
    this.noB = pick.b ? "" : pick.why;
    replace(this.bNote, pick.b ? `B: ${pick.why}.` : "");
    return pick.b ? reconcileSide(this.runs, pick.b) : a;
  }

  private async loadRuns(): Promise<boolean> {
    const signal = this.controller.signal;
    try {
      const res = await api.runs(signal);
      if (signal.aborted) return false;
      this.runs = Array.isArray(res.runs) ? res.runs : [];
      return true;
    } catch (err) {
      if (signal.aborted || isAbort(err)) return false;
      replace(this.result, errorState("Could not list the runs", message(err), () => void this.start()));
      return false;
    }
  }

  private renderSides(): void {
    const s = this.store.get();
    this.sideA.set(this.runs, s.a);
    this.sideB.set(this.runs, s.b);
    this.pinBox.checked = s.pinned;
  }

  private renderHint(): void {
    const pinned = this.store.get().pinned;
    replace(
      this.hint,
      pinned
        ? "A is pinned: it stays as chosen here when the header's run / worker / span changes. Untick “Pin A” to follow the header again."
        : "A follows the header's run / worker / span. Changing A here, or swapping, pins it.",
    );
  }

  private swap(): void {
    const { a, b } = this.store.get();
    this.store.set({ a: b, b: a, pinned: true });
  }

  private key(s: DiffState, req: DiffPageRequest): string {
    return JSON.stringify([s.a, s.b, s.match, s.by, s.dtype, s.filter, s.status, req]);
  }

  private firstPage(): DiffPageRequest {
    return { sort: "impact", order: "desc", offset: 0, limit: PAGE_SIZE };
  }

  /** Compare the two sides again: summary, chart and a fresh table. */
  private async load(): Promise<void> {
    this.loadController?.abort();
    this.teardownResult();
    const s = this.store.get();
    if (sameSelection(s.a, s.b)) {
      const why = this.noB ? `Nothing comparable was found: ${this.noB}. ` : "A and B are the same run, worker and span. ";
      replace(
        this.result,
        emptyState(
          "Pick B to compare with",
          `${why}Choose a run, worker or span for B above: two runs, two spans of one run, or one span against all spans of its worker.`,
        ),
      );
      return;
    }
    const controller = new AbortController();
    this.loadController = controller;
    const signal = controller.signal;
    const abortAll = () => controller.abort();
    this.controller.signal.addEventListener("abort", abortAll);
    replace(this.result, loadingState("Comparing A with B…"));
    const req = this.firstPage();
    try {
      const res = await retrying(
        () => fetchDiff(s.a, s.b, { match: s.match, by: s.by, dtype: s.dtype, filter: s.filter, status: s.status, ...req }, signal),
        signal,
        (why) => replace(this.result, loadingState(`${why}. A side is still being read; trying again in ${RETRY_MS / 1000} s…`)),
      );
      if (signal.aborted) return;
      this.prefetched = { key: this.key(s, req), res };
      this.show(res);
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      replace(this.result, requestErrorState("Could not compare these selections", err, () => void this.load()));
    } finally {
      this.controller.signal.removeEventListener("abort", abortAll);
    }
  }

  private show(res: DiffResponse): void {
    const sum = res.summary;
    this.summary = sum;
    const noKernels = !res.classes.length && !res.total && !this.store.get().filter && !this.store.get().status;
    if (noKernels) {
      replace(
        this.result,
        verdictPanel(res.verdict, res.attribution),
        emptyState(
          "No GPU kernels on either side",
          "Neither selection has a GPU kernel to compare: were both profiled with ProfilerActivity.CUDA (or a ROCm build)?",
        ),
      );
      return;
    }
    this.chart = new DiffChart();
    const tableHost = h("div", { class: "table-host" });
    replace(
      this.result,
      sum.suggest ? this.suggestBanner(sum.suggest.why) : null,
      sameDevices(sum.devices_a, sum.devices_b)
        ? null
        : h(
            "div",
            { class: "banner banner-warn diff-device-warn", attrs: { role: "note" } },
            h("strong", { text: "Different devices. " }),
            `A runs on ${devicesText(sum.devices_a)}, B on ${devicesText(sum.devices_b)}: the change includes the hardware, and % of peak is rated against each side's own datasheet.`,
          ),
      this.summaryStrip(sum),
      verdictPanel(res.verdict, res.attribution),
      this.snapshots(),
      h(
        "section",
        { class: "panel" },
        h(
          "div",
          { class: "panel-head" },
          h("h2", { class: "panel-title", text: "Kernel time by class" }),
          h("span", { class: "muted small", text: "per span · hover a class for its share of the change" }),
        ),
        res.classes.length ? this.chart.el : h("div", { class: "muted", text: "No kernel time on either side." }),
      ),
      h(
        "section",
        { class: "panel" },
        h(
          "div",
          { class: "panel-head" },
          h("h2", { class: "panel-title", text: sum.by === "op" ? "Ops + shapes" : "Kernels" }),
          h("span", { class: "muted small", text: "click a row for both sides' figures" }),
        ),
        this.tableStatus,
        tableHost,
      ),
    );
    this.chart.setData(res.classes, sum.name_a, sum.name_b);
    this.table = new DiffTable(tableHost, {
      pageSize: PAGE_SIZE,
      by: sum.by,
      noise: (sum.spans_a ?? 1) > 1 || (sum.spans_b ?? 1) > 1,
      fetchPage: (req) => this.fetchPage(req),
      onLoaded: (page, sort) => this.showTableStatus(page, sort),
      onSelect: (row) => this.openDetails(row),
      onError: (msg) => replace(this.tableStatus, inlineError(msg)),
    });
  }

  /** Both runs' memory snapshots compared, when each holds one (filled once the server answers). */
  private snapshots(): HTMLElement | null {
    const { a, b } = this.store.get();
    const host = h("div", { class: "snapshot-diff-host" });
    if (a.run === b.run || !this.loadController) return null;
    void mountSnapshotDiff(host, a.run, b.run, this.loadController.signal);
    return host;
  }

    private suggestBanner(why: string): HTMLElement {
    return h(
      "div",
      { class: "banner banner-info diff-suggest", attrs: { role: "note" } },
      h("span", { text: `${why[0].toUpperCase()}${why.slice(1)}. ` }),
      h("button", {
        class: "btn btn-small",
        text: "Compare by op + shapes",
        attrs: { type: "button" },
        on: { click: () => this.store.set({ by: "op" }) },
      }),
    );
  }

  private fetchPage(req: DiffPageRequest): Promise<DiffResponse> {
    const s = this.store.get();
    const key = this.key(s, req);
    if (this.prefetched && this.prefetched.key === key) {
      const res = this.prefetched.res;
      this.prefetched = null;
      return Promise.resolve(res);
    }
    this.prefetched = null;
    const signal = this.loadController?.signal ?? this.controller.signal;
    return retrying(
      () => fetchDiff(s.a, s.b, { match: s.match, by: s.by, dtype: s.dtype, filter: s.filter, status: s.status, ...req }, signal),
      signal,
      (why) => replace(this.tableStatus, h("span", { class: "muted", text: `${why}. Trying again in ${RETRY_MS / 1000} s…` })),
    );
  }

  private summaryStrip(sum: DiffSummary): HTMLElement {
    const side = (letter: "A" | "B", name: string, us: number | null, spans: number | null, devices: string[]) => {
      const el = figure(`${letter} · ${letter === "A" ? "baseline" : "compare"}`, time(us), `${plural(spans, "span")} · ${devicesText(devices)}`, name);
      el.classList.add(`diff-fig-${letter.toLowerCase()}`);
      el.insertBefore(h("div", { class: "figure-sub diff-fig-name", text: name }), el.children[1]);
      return el;
    };
    const change = figure("Change (B − A)", signedTime(sum.delta_us), `${signedPct(sum.delta_pct)} of A's kernel time`);
    change.querySelector(".figure-value")?.setAttribute("class", "figure-value " + deltaClass(sum.delta_us, sum.time_us_a));
    change.classList.add("diff-fig-change");
    const rows = figure(
      "Unmatched",
      `${count(sum.added)} added · ${count(sum.removed)} removed`,
      sum.within_noise ? `${plural(sum.within_noise, "row")} within noise` : "added: only in B · removed: only in A",
    );
    return h("div", { class: "figures diff-figures" }, side("A", sum.name_a, sum.time_us_a, sum.spans_a, sum.devices_a), side("B", sum.name_b, sum.time_us_b, sum.spans_b, sum.devices_b), change, rows);
  }

  private showTableStatus(res: DiffResponse, sort: DiffSort): void {
    const s = this.store.get();
    const parts: (string | Node)[] = [`${plural(res.total, "row")}`];
    if (s.filter) parts.push(`matching “${s.filter}”`);
    if (s.status) parts.push(`status ${s.status}`);
    parts.push(s.match === "normalized" ? "matched by normalized name" : "matched by exact name");
    const text = parts.join(" · ");
    replace(
      this.tableStatus,
      h("span", { class: "muted", text: text + (sort === "impact" ? " · sorted by impact (|Δ time|)" : "") }),
      sort === "impact"
        ? null
        : h("button", {
            class: "btn btn-small diff-impact",
            text: "Sort by impact",
            title: "Back to the default order: largest |Δ time| first",
            attrs: { type: "button" },
            on: { click: () => void this.table?.sortByImpact() },
          }),
    );
  }

  private openDetails(row: DiffRow): void {
    const sum = this.summary;
    this.details.open(row, sum?.name_a ?? "A", sum?.name_b ?? "B", this.store.get().by === "op");
  }

  private closeDetails(): void {
    this.details.close();
    this.table?.select(null);
  }

  private onChange(state: DiffState, changed: ReadonlySet<keyof DiffState>): void {
    for (const [key, el] of Object.entries(this.selects) as [keyof typeof this.selects, HTMLSelectElement][]) {
      if (changed.has(key)) el.value = state[key];
    }
    if (changed.has("pinned")) this.renderHint();
    if (changed.has("a") || changed.has("b") || changed.has("pinned")) {
      this.renderSides();
      writeSides(state);
    }
    if ((["match", "by", "dtype", "filter", "status"] as const).some((k) => changed.has(k))) writeOptions(state);
    if (RELOAD_ALL.some((k) => changed.has(k))) {
      void this.load();
      return;
    }
    if ((changed.has("filter") || changed.has("status")) && this.table) {
      this.closeDetails();
      void this.table.reload();
    }
  }

  /** The header's selection changed: A follows it unless pinned. */
  update(sel: Selection): void {
    this.header = sel;
    void this.loadRuns().then((ok) => {
      if (!ok) return;
      const s = this.store.get();
      const a = s.pinned ? reconcileSide(this.runs, s.a) : reconcileSide(this.runs, sel);
      const b = reconcileSide(this.runs, s.b);
      if (sameSelection(a, s.a) && sameSelection(b, s.b)) {
        this.renderSides(); // new runs or spans in the lists
        return;
      }
      this.store.set({ a, b });
    });
  }

  private teardownResult(): void {
    this.table?.destroy();
    this.table = null;
    this.chart?.destroy();
    this.chart = null;
    this.prefetched = null;
    this.summary = null;
    this.details.close();
  }

  destroy(): void {
    this.controller.abort();
    this.loadController?.abort();
    this.teardownResult();
    this.unsubscribe();
    this.details.destroy();
    replace(this.host);
  }
}

export const diffTab: TabDef = {
  id: "diff",
  label: "Diff",
  mount: (host, sel) => new DiffView(host, sel),
};
