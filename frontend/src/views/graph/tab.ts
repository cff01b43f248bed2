// Execution graph tab: the span's Execution Trace as a collapsed DAG (dagre layout, opened nodes as boxes),
// coloured by GPU time, CPU time or efficiency, with a legend and a minimap; beside it the critical path (a sortable
// list of segments: clicking one selects its node) and, in a multi-rank run, every rank's path side by side with a
// rank picker for the graph and path.
import { api, ApiError, isAbort, type Selection } from "../../api";
import { drawer as detailsDrawer } from "../../components/details";
import { criticalPathApi, type PathSegment } from "../criticalPath/api";
import { CriticalPathList } from "../criticalPath/list";
import { rankPaths } from "../criticalPath/ranks";
import { graphApi, type GraphView, type ViewQuery } from "./api";
import { GraphCanvas, type ColorBy, type LayoutKind } from "./canvas";
import { nodeDetails } from "./details";
import { graphLegend } from "./legend";
import { currentTheme, onThemeChange } from "./theme";
import { emptyState, inlineError, loadingState, requestErrorState } from "../../components/states";
import { debounce, field, h, replace, select, setOptions } from "../../dom";
import { graphPngButton } from "../../export";
import { count, pct } from "../../format";
import { ALL_SPANS, ALL_WORKERS } from "../../state";
import type { TabDef, TabView } from "../types";
import { tabLink, writeTabLink } from "../../deeplink";

const TAB_ID = "graph";
const COLLAPSES = ["annotation", "depth2", "depth3", "depth5"];
const BUILD_RETRY_MS = 1500; // while the server builds the graph (503), ask again this often

function noEtHint(reason: string | null): HTMLElement {
  return h(
    "div",
    null,
    reason ? h("div", { class: "small", text: reason }) : null,
    "Record one next to the profiler: ",
    h("code", { text: "et = torch.profiler.ExecutionTraceObserver(); et.register_callback('runs/my_run/{worker}.et.json')" }),
    " then ",
    h("code", { text: "et.start()" }),
    " / ",
    h("code", { text: "et.stop()" }),
    " around the profiled steps.",
  );
}

function button(text: string, title: string, onClick: () => void): HTMLButtonElement {
  return h("button", { class: "btn btn-small", text, title, attrs: { "aria-label": title }, on: { click: onClick } });
}

class ExecutionGraphView implements TabView {
  private query: ViewQuery = { collapse: "annotation", depth: 3, open: [], close: [], focus: null, focus_et: null };
  private controller = new AbortController();
  private pathController = new AbortController();
  private ranksController = new AbortController();
  private detailsController: AbortController | null = null;
  private canvas: GraphCanvas | null = null;
  private view: GraphView | null = null;
  private selected: number | null = null;
  private layout: LayoutKind = "rows";
  private colorBy: ColorBy = "gpu_us";
  /** The node of the deep link: its details open once the graph is shown. */
  private restoreNode = false;
  private collapseBy = "annotation";
  /** The node the user just expanded or collapsed: the next layout keeps it where it is on screen. */
  private anchor: number | null = null;
  /** The worker whose graph and path are shown (the header's, or picked here in a multi-rank run). */
  private rank = "";
  private workers: string[] = [];
  private summaryEl = h("div", { class: "graph-summary" });
  private chipsEl = h("div", { class: "graph-opened" });
  private statusEl = h("div", { class: "graph-status" });
  private resultsEl = h("ul", { class: "graph-results" });
  private canvasEl = h("div", { class: "graph-canvas", attrs: { "aria-label": "Execution graph" } });
  private stageEl = h("div", { class: "graph-stage" });
  private legendEl = h("div", { class: "graph-legend-host" });
  private minimapEl = h("div", { class: "graph-minimap", attrs: { "aria-label": "Minimap", title: "Click or drag to move the view" } });
  private pathEl = h("div", { class: "graph-path-list" });
  private ranksEl = h("div", { class: "graph-ranks" });
  private bodyEl = h("div", { class: "graph-body" });
  private rankSelect = select([], "", (v) => this.pickRank(v), { attrs: { "aria-label": "Rank" } });
  private rankField = field("Rank", this.rankSelect);
  private detailsBody = h("div", { class: "drawer-body" });
  private drawer = detailsDrawer("Node details", this.detailsBody, () => this.closeDetails());
  private list = new CriticalPathList(this.pathEl, (seg) => this.pickSegment(seg));
  private stopTheme = onThemeChange(() => this.renderLegend());
  private onResize = debounce(() => this.fitHeight(), 100);

  constructor(
    private host: HTMLElement,
    private sel: Selection,
  ) {
    this.drawer.classList.add("graph-drawer"); // beside the canvas at every width: a sheet would cover the graph
    // colour, layout, collapse, rank and the selected node survive a reload (the deep link)
    const link = tabLink(TAB_ID);
    if (link.color === "cpu_us" || link.color === "efficiency") this.colorBy = link.color;
    if (link.layout === "layered") this.layout = "layered";
    if (COLLAPSES.includes(link.collapse ?? "")) {
      this.collapseBy = link.collapse as string;
      this.query = this.collapseBy === "annotation" ? this.query : { ...this.query, collapse: "depth", depth: Number(this.collapseBy.slice(5)) };
    }
    const node = Number(link.node);
    if (link.node && Number.isInteger(node)) {
      this.query = { ...this.query, focus: node };
      this.selected = node;
      this.restoreNode = true;
    }
    replace(this.host, this.buildLayout(), this.drawer);
    window.addEventListener("resize", this.onResize);
    this.start();
  }

  update(sel: Selection): void {
    this.sel = sel;
    this.query = { ...this.query, open: [], close: [], focus: null, focus_et: null };
    this.selected = null;
    this.anchor = null;
    this.closeDetails();
    this.start();
  }

  destroy(): void {
    this.controller.abort();
    this.pathController.abort();
    this.ranksController.abort();
    this.detailsController?.abort();
    this.canvas?.destroy();
    this.list.destroy();
    this.stopTheme();
    window.removeEventListener("resize", this.onResize);
    replace(this.host);
  }

  /** The selection the graph and path requests use: the picked rank, with the header's span when it is the
   * header's worker (span names are per worker), else that rank's spans. */
  private target(): Selection {
    const same = this.rank === this.sel.worker;
    return { run: this.sel.run, worker: this.rank, span: same ? this.sel.span : ALL_SPANS };
  }

  private async start(): Promise<void> {
    this.rank = this.sel.worker;
    this.rankField.hidden = true;
    replace(this.ranksEl);
    try {
      const runs = await api.runs();
      this.workers = runs.runs.find((r) => r.run === this.sel.run)?.workers.map((w) => w.worker) ?? [];
    } catch {
      this.workers = []; // no rank picker; the header's worker still works
    }
    const linked = tabLink(TAB_ID).rank;
    if (linked && this.workers.includes(linked)) this.rank = linked;
    if (this.rank === ALL_WORKERS || !this.workers.includes(this.rank)) this.rank = this.workers[0] ?? this.sel.worker;
    if (this.workers.length > 1) {
      setOptions(this.rankSelect, this.workers.map((w) => [w, w] as const), this.rank);
      this.rankField.hidden = false;
      this.loadRanks();
    }
    this.load();
    this.loadPath();
  }

  private pickRank(worker: string): void {
    if (worker === this.rank) return;
    this.rank = worker;
    writeTabLink(TAB_ID, { rank: worker, node: null });
    this.rankSelect.value = worker;
    this.query = { ...this.query, open: [], close: [], focus: null, focus_et: null };
    this.selected = null;
    this.anchor = null;
    this.closeDetails();
    this.load();
    this.loadPath();
    this.loadRanks();
  }

  private buildLayout(): HTMLElement {
    const search = h("input", { attrs: { type: "search", placeholder: "Search op name…", "aria-label": "Search op name" } });
    const runSearch = debounce((q: string) => this.search(q), 300);
    search.addEventListener("input", () => runSearch(search.value.trim()));
    const controls = h(
      "div",
      { class: "controls graph-controls" },
      h("div", { class: "graph-search" }, field("Search", search), this.resultsEl),
      field(
        "Colour by",
        select(
          [
            ["gpu_us", "GPU time"],
            ["cpu_us", "CPU time"],
            ["efficiency", "efficiency"],
          ],
          this.colorBy,
          (v) => {
            this.colorBy = v as ColorBy;
            writeTabLink(TAB_ID, { color: v === "gpu_us" ? null : v });
            this.canvas?.setColor(this.colorBy);
            this.renderLegend();
          },
          { attrs: { "aria-label": "Colour by" } },
        ),
      ),
      field(
        "Layout",
        select(
          [
            ["rows", "rows (program order)"],
            ["layered", "layered (data flow)"],
          ],
          this.layout,
          (v) => {
            this.layout = v as LayoutKind;
            writeTabLink(TAB_ID, { layout: v === "rows" ? null : v });
            this.canvas?.setLayout(this.layout);
          },
          { attrs: { "aria-label": "Layout", title: "Rows: ops in program order, wrapped to the window. Layered: ops in columns by data dependency." } },
        ),
      ),
      field(
        "Collapse",
        select(
          [
            ["annotation", "by annotation"],
            ["depth2", "to depth 2"],
            ["depth3", "to depth 3"],
            ["depth5", "to depth 5"],
          ],
          this.collapseBy,
          (v) => this.setCollapse(v),
          { attrs: { "aria-label": "Collapse" } },
        ),
      ),
      this.rankField,
      h(
        "div",
        { class: "graph-zoom" },
        button("Fit", "Zoom to fit", () => this.canvas?.zoomToFit()),
        button("Selection", "Zoom to selection", () => this.canvas?.zoomToSelection()),
        button("−", "Zoom out", () => this.canvas?.zoomBy(1 / 1.4)),
        button("+", "Zoom in", () => this.canvas?.zoomBy(1.4)),
        button("Reset", "Reset the view (collapse what you expanded)", () => this.reset()),
        graphPngButton(() => this.canvas?.cy ?? null, "execution-graph"),
      ),
    );
    replace(this.stageEl, this.canvasEl, this.legendEl, this.minimapEl);
    replace(this.bodyEl, this.stageEl, h("aside", { class: "graph-side" }, this.pathEl, this.ranksEl));
    return h("div", { class: "graph-main" }, this.summaryEl, controls, this.chipsEl, this.statusEl, this.bodyEl);
  }

  private ensureCanvas(): GraphCanvas {
    if (!this.canvas) {
      replace(this.stageEl, this.canvasEl, this.legendEl, this.minimapEl);
      this.fitHeight();
      this.canvas = new GraphCanvas(
        this.canvasEl,
        this.minimapEl,
        (id) => this.openDetails(id),
        (id) => this.expand(id),
      );
      this.canvas.setLayout(this.layout);
      if (this.colorBy !== "gpu_us") this.canvas.setColor(this.colorBy);
    }
    return this.canvas;
  }

  private dropCanvas(state: HTMLElement): void {
    this.canvas?.destroy();
    this.canvas = null;
    this.view = null;
    replace(this.stageEl, state);
    replace(this.chipsEl);
  }

  /** The graph and its side panel take the rest of the window's height (at least 360 px). */
  private fitHeight(): void {
    const top = this.bodyEl.getBoundingClientRect().top + window.scrollY;
    this.bodyEl.style.height = `${Math.max(360, window.innerHeight - top - 8)}px`;
    this.canvas?.resize();
  }

  private async load(): Promise<void> {
    this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    if (!this.canvas) replace(this.stageEl, loadingState("Reading the Execution Trace and linking it to the Kineto trace…"));
    else replace(this.statusEl, loadingState("Updating the graph…"));
    try {
      const view = await graphApi.view(this.target(), this.query, controller.signal);
      if (!controller.signal.aborted) this.show(view);
    } catch (err) {
      if (isAbort(err) || controller.signal.aborted) return;
      if (err instanceof ApiError && err.stillLoading) {
        // an analysis worker is building the graph: say so, and ask again (a new load or destroy() aborts this)
        const building = loadingState("Building the execution graph in an analysis worker…");
        replace(this.canvas ? this.statusEl : this.stageEl, building);
        setTimeout(() => { if (!controller.signal.aborted) void this.load(); }, BUILD_RETRY_MS);
        return;
      }
      replace(this.statusEl);
      this.dropCanvas(requestErrorState("The execution graph could not be built", err, () => this.load()));
    }
  }

  private show(view: GraphView): void {
    replace(this.statusEl);
    if (!view.available) {
      replace(this.summaryEl);
      this.dropCanvas(emptyState("This span has no Execution Trace", noEtHint(view.reason)));
      return;
    }
    if (!view.nodes.length) {
      this.dropCanvas(emptyState("This Execution Trace has no nodes"));
      return;
    }
    this.view = view;
    this.renderSummary(view);
    this.renderOpened(view);
    this.fitHeight();
    const canvas = this.ensureCanvas();
    if (view.focus !== undefined && view.focus !== null) this.selected = view.focus;
    canvas.show(view, this.selected, this.anchor);
    this.anchor = null;
    if (this.selected !== null) canvas.select(this.selected);
    if (this.restoreNode && this.selected !== null) void this.openDetails(this.selected);
    this.restoreNode = false;
    this.renderLegend();
    if (view.capped) {
      replace(this.statusEl, inlineError(`Showing ${count(view.nodes.length)} nodes: expanding further would pass ${count(view.max_visible)}. Collapse something first.`));
    }
  }

  private renderLegend(): void {
    if (!this.canvas) return;
    replace(this.legendEl, graphLegend(this.canvas.color, this.canvas.maxValue(), currentTheme()));
  }

  private renderSummary(view: GraphView): void {
    const link = view.link;
    const linkText =
      link.method === "none" ? "not linked to the Kineto trace" : `${pct(link.rate)} linked to Kineto (${count(link.linked)} of ${count(link.linkable)} by ${link.method})`;
    const text = `${count(view.nodes.length)} of ${count(view.node_count)} nodes shown · double-click a node with a thick border to expand it · ET schema ${view.schema} · ${count(view.unit_count)} top-level ops · ${count(view.data_edge_count)} data edges · ${linkText}`;
    replace(this.summaryEl, view.warning ? inlineError(view.warning) : null, h("span", { class: "muted small", text, title: text }));
  }

  /** The opened nodes as chips on one scrolling line (they never push the graph down). */
  private renderOpened(view: GraphView): void {
    const opened = view.expanded.filter((e) => e.depth > 0);
    const chips = opened.map((e) =>
      h(
        "span",
        { class: "chip", title: `${e.label} — expanded: click × to collapse` },
        h("span", { text: e.label.length > 32 ? e.label.slice(0, 31) + "…" : e.label }),
        h("button", { class: "chip-x", text: "×", attrs: { "aria-label": `Collapse ${e.label}` }, on: { click: () => this.collapse(e.id) } }),
      ),
    );
    replace(
      this.chipsEl,
      opened.length ? h("span", { class: "muted small graph-opened-label", text: `${opened.length} expanded:` }) : null,
      h("div", { class: "graph-chips" }, ...chips),
    );
  }

  private async loadPath(): Promise<void> {
    this.pathController.abort();
    const controller = new AbortController();
    this.pathController = controller;
    replace(this.pathEl, loadingState("Computing the critical path…"));
    try {
      const data = await criticalPathApi.path(this.target(), controller.signal);
      if (controller.signal.aborted) return;
      if (!data.available) {
        replace(this.pathEl, emptyState("No critical path", data.reason ?? undefined));
        return;
      }
      this.list.destroy();
      this.list = new CriticalPathList(this.pathEl, (seg) => this.pickSegment(seg));
      this.list.show(data);
    } catch (err) {
      if (!isAbort(err) && !controller.signal.aborted) replace(this.pathEl, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private async loadRanks(): Promise<void> {
    this.ranksController.abort();
    const controller = new AbortController();
    this.ranksController = controller;
    try {
      const data = await criticalPathApi.ranks(this.sel.run, ALL_SPANS, controller.signal);
      if (controller.signal.aborted) return;
      const order = ["cpu_op", "kernel", "launch", "sync_wait", "communication", "idle"];
      const wasOpen = this.ranksEl.querySelector("details")?.open ?? false;
      if (data.ranks.length > 1) replace(this.ranksEl, rankPaths(data, order, this.rank, (w) => this.pickRank(w), wasOpen));
    } catch (err) {
      if (!isAbort(err) && !controller.signal.aborted) replace(this.ranksEl, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  /** A critical-path segment picked in the list: reveal and select the graph node of its op. */
  private pickSegment(seg: PathSegment): void {
    if (seg.et_id === null) {
      replace(this.statusEl, h("span", { class: "muted small", text: `"${seg.name}" has no Execution Trace node (a ${seg.kind} the trace does not link to an op), so it is not in the graph.` }));
      return;
    }
    if (!this.view) return;
    this.list.markEt(seg.et_id);
    this.query = { ...this.query, focus: null, focus_et: seg.et_id };
    this.anchor = null;
    this.load().then(() => {
      this.query.focus_et = null;
      if (this.view && (this.view.focus === null || this.view.focus === undefined)) {
        replace(this.statusEl, inlineError(`The Execution Trace has no node with id ${seg.et_id}.`));
      }
    });
  }

  private async search(q: string): Promise<void> {
    if (!q) {
      replace(this.resultsEl);
      this.canvas?.highlight([]);
      return;
    }
    try {
      const { matches } = await graphApi.search(this.target(), q, this.controller.signal);
      this.canvas?.highlight(matches.map((m) => m.id));
      replace(
        this.resultsEl,
        ...(matches.length
          ? matches.slice(0, 12).map((m) =>
              h("li", null, h("button", { class: "btn btn-small", text: `${m.name} #${m.et_id}`, title: m.path.join(" › "), on: { click: () => this.reveal(m.id) } })),
            )
          : [h("li", { class: "muted small", text: `No op named like "${q}".` })]),
      );
    } catch (err) {
      if (!isAbort(err)) replace(this.resultsEl, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private setCollapse(v: string): void {
    this.collapseBy = v;
    writeTabLink(TAB_ID, { collapse: v === "annotation" ? null : v });
    this.query = v === "annotation" ? { ...this.query, collapse: "annotation" } : { ...this.query, collapse: "depth", depth: Number(v.slice(5)) };
    this.query.open = [];
    this.query.close = [];
    this.anchor = null;
    this.load();
  }

  private reset(): void {
    this.query = { ...this.query, open: [], close: [], focus: null, focus_et: null };
    this.anchor = null;
    this.load();
  }

  private expand(id: number): void {
    this.query.open = [...this.query.open.filter((x) => x !== id), id].slice(-150);
    this.query.close = this.query.close.filter((x) => x !== id);
    this.anchor = id;
    this.load();
  }

  private collapse(id: number): void {
    this.query.close = [...this.query.close.filter((x) => x !== id), id].slice(-150);
    this.query.open = this.query.open.filter((x) => x !== id);
    this.query.focus = null;
    this.anchor = id;
    this.load();
  }

  private reveal(id: number): void {
    replace(this.resultsEl);
    this.query.focus = id;
    this.selected = id;
    this.anchor = null;
    this.load().then(() => this.openDetails(id));
  }

  private async openDetails(id: number): Promise<void> {
    this.selected = id;
    writeTabLink(TAB_ID, { node: String(id) });
    this.canvas?.select(id, false);
    const node = this.view?.nodes.find((n) => n.id === id);
    this.list.markEt(node?.et_id ?? null);
    this.detailsController?.abort();
    const controller = new AbortController();
    this.detailsController = controller;
    this.drawer.hidden = false;
    replace(this.detailsBody, loadingState("Loading the node…"));
    try {
      const d = await graphApi.node(this.target(), id, controller.signal);
      if (controller.signal.aborted) return;
      replace(
        this.detailsBody,
        nodeDetails(
          d,
          {
            onExpand: (n) => this.expand(n),
            onCollapse: (n) => this.collapse(n),
            onReveal: (n) => this.reveal(n),
          },
          this.target().span,
        ),
      );
    } catch (err) {
      if (!isAbort(err)) replace(this.detailsBody, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private closeDetails(): void {
    if (!this.drawer.hidden) writeTabLink(TAB_ID, { node: null });
    this.detailsController?.abort();
    this.drawer.hidden = true;
  }
}

export const executionGraphTab: TabDef = {
  id: TAB_ID,
  label: "Execution graph",
  mount: (host, sel) => new ExecutionGraphView(host, sel),
};
