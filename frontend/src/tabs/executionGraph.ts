// Execution graph tab: the span's Execution Trace as a collapsed DAG (laid out by the server), coloured by GPU time,
// CPU time or efficiency, with the critical path in red, search by op name, and node details in a drawer.
import { isAbort, type Selection } from "../api";
import { figure } from "../components/deviceCard";
import { drawer as detailsDrawer } from "../components/details";
import { graphApi, type Cause, type GraphView, type ViewQuery } from "../components/graphApi";
import { GraphCanvas, type ColorBy } from "../components/graphCanvas";
import { nodeDetails } from "../components/graphDetails";
import { emptyState, inlineError, loadingState, requestErrorState } from "../components/states";
import { debounce, field, h, replace, select } from "../dom";
import { count, pct, time } from "../format";
import type { TabDef, TabView } from "./types";

const CAUSE_LABELS: Record<Cause, string> = {
  cpu_op: "CPU op",
  gpu_kernel: "GPU kernel",
  launch_gap: "launch gap",
  host_gap: "host gap",
};

function noEtHint(): HTMLElement {
  return h(
    "div",
    null,
    "Record one next to the profiler: ",
    h("code", { text: "et = torch.profiler.ExecutionTraceObserver(); et.register_callback('runs/my_run/{worker}.et.json')" }),
    " then ",
    h("code", { text: "et.start()" }),
    " / ",
    h("code", { text: "et.stop()" }),
    " around the profiled steps.",
  );
}

class ExecutionGraphView implements TabView {
  private query: ViewQuery = { collapse: "annotation", depth: 3, open: [], close: [], focus: null };
  private controller = new AbortController();
  private detailsController: AbortController | null = null;
  private canvas: GraphCanvas | null = null;
  private selected: number | null = null;
  private summaryEl = h("section", { class: "ke-top graph-summary" });
  private chipsEl = h("span", { class: "chips graph-opened" });
  private statusEl = h("div", { class: "table-status" });
  private resultsEl = h("ul", { class: "graph-results" });
  private canvasEl = h("div", { class: "graph-canvas", style: { height: "68vh" }, attrs: { "aria-label": "Execution graph" } });
  private bodyEl = h("div", { class: "drawer-body" });
  private drawer = detailsDrawer("Node details", this.bodyEl, () => this.closeDetails());
  private main = h("div", { class: "graph-main" });

  constructor(
    private host: HTMLElement,
    private sel: Selection,
  ) {
    replace(this.host, this.main, this.drawer);
    this.load();
  }

  update(sel: Selection): void {
    this.sel = sel;
    this.query = { ...this.query, open: [], close: [], focus: null };
    this.selected = null;
    this.closeDetails();
    this.canvas?.destroy();
    this.canvas = null;
    this.load();
  }

  destroy(): void {
    this.controller.abort();
    this.detailsController?.abort();
    this.canvas?.destroy();
    replace(this.host);
  }

  private async load(): Promise<void> {
    this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    if (!this.canvas) replace(this.main, loadingState("Reading the Execution Trace and linking it to the Kineto trace…"));
    else replace(this.statusEl, loadingState("Updating the graph…"));
    try {
      const view = await graphApi.view(this.sel, this.query, controller.signal);
      if (!controller.signal.aborted) this.show(view);
    } catch (err) {
      if (isAbort(err) || controller.signal.aborted) return;
      const message = err instanceof Error ? err.message : String(err);
      this.canvas?.destroy();
      this.canvas = null;
      if (/no Execution Trace/.test(message)) {
        replace(this.main, emptyState("This span has no Execution Trace", noEtHint()));
      } else {
        replace(this.main, requestErrorState("The execution graph could not be built", err, () => this.load()));
      }
    }
  }

  private show(view: GraphView): void {
    if (!view.nodes.length) {
      replace(this.main, emptyState("This Execution Trace has no nodes"));
      return;
    }
    if (!this.canvas) this.buildLayout();
    this.renderSummary(view);
    this.renderOpened(view);
    replace(
      this.statusEl,
      view.capped
        ? inlineError(`Showing ${count(view.nodes.length)} nodes: expanding further would pass ${count(view.max_visible)}. Collapse something first.`)
        : h("span", { class: "muted small", text: `${count(view.nodes.length)} nodes shown · double-click a node with a thick border to expand it` }),
    );
    this.canvas!.show(view, this.selected);
  }

  private buildLayout(): void {
    const search = h("input", { attrs: { type: "search", placeholder: "Search op name…", "aria-label": "Search op name" } });
    const runSearch = debounce((q: string) => this.search(q), 300);
    search.addEventListener("input", () => runSearch(search.value.trim()));
    const controls = h(
      "div",
      { class: "controls" },
      field("Search", search),
      field(
        "Colour by",
        select(
          [
            ["gpu_us", "GPU time"],
            ["cpu_us", "CPU time"],
            ["efficiency", "efficiency"],
          ],
          "gpu_us",
          (v) => this.canvas?.setColor(v as ColorBy),
          { attrs: { "aria-label": "Colour by" } },
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
          "annotation",
          (v) => this.setCollapse(v),
          { attrs: { "aria-label": "Collapse" } },
        ),
      ),
      h("button", { class: "btn", text: "Reset view", on: { click: () => this.reset() } }),
    );
    replace(this.main, this.summaryEl, controls, this.resultsEl, this.chipsEl, this.statusEl, this.canvasEl);
    this.canvas = new GraphCanvas(
      this.canvasEl,
      (id) => this.openDetails(id),
      (id) => this.expand(id),
    );
  }

  private renderSummary(view: GraphView): void {
    const cp = view.critical_path;
    const link = view.link;
    const linkText = link.method === "none" ? "not linked" : pct(link.rate);
    const linkSub = link.method === "none" ? "no Kineto cpu op matched" : `${count(link.linked)} of ${count(link.linkable)} by ${link.method}${link.offset ? ` (offset ${link.offset})` : ""}`;
    const figures = h(
      "div",
      { class: "figures" },
      figure("Execution Trace", `schema ${view.schema}`, `${count(view.node_count)} nodes · ${count(view.unit_count)} top-level ops · ${count(view.data_edge_count)} data edges`),
      figure("Linked to Kineto", linkText, linkSub),
      cp.timed
        ? figure("Critical path", time(cp.length_us), `${count(cp.ops)} ops · step ${time(cp.step_us)}`)
        : figure("Critical path", `${count(cp.ops)} ops`, "untimed: no Kineto link, each op counts 1"),
    );
    const causes = (Object.keys(CAUSE_LABELS) as Cause[])
      .filter((c) => cp.causes[c].us > 0)
      .map((c) => figure(CAUSE_LABELS[c], pct(cp.causes[c].share), cp.timed ? time(cp.causes[c].us) : `${count(cp.causes[c].us)} ops`));
    replace(
      this.summaryEl,
      view.warning ? inlineError(view.warning) : null,
      figures,
      h("div", { class: "figures graph-causes", title: "Share of the critical path by cause" }, ...causes),
    );
  }

  private renderOpened(view: GraphView): void {
    const chips = view.expanded
      .filter((e) => e.depth > 0)
      .map((e) =>
        h(
          "span",
          { class: "chip", title: "Expanded: click × to collapse" },
          h("span", { text: e.label.length > 40 ? e.label.slice(0, 39) + "…" : e.label }),
          h("button", { class: "chip-x", text: "×", attrs: { "aria-label": `Collapse ${e.label}` }, on: { click: () => this.collapse(e.id) } }),
        ),
      );
    replace(this.chipsEl, ...chips);
  }

  private async search(q: string): Promise<void> {
    if (!q) {
      replace(this.resultsEl);
      this.canvas?.highlight([]);
      return;
    }
    try {
      const { matches } = await graphApi.search(this.sel, q, this.controller.signal);
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
    this.query = v === "annotation" ? { ...this.query, collapse: "annotation" } : { ...this.query, collapse: "depth", depth: Number(v.slice(5)) };
    this.query.open = [];
    this.query.close = [];
    this.load();
  }

  private reset(): void {
    this.query = { ...this.query, open: [], close: [], focus: null };
    this.load();
  }

  private expand(id: number): void {
    this.query.open = [...this.query.open.filter((x) => x !== id), id].slice(-150);
    this.query.close = this.query.close.filter((x) => x !== id);
    this.load();
  }

  private collapse(id: number): void {
    this.query.close = [...this.query.close.filter((x) => x !== id), id].slice(-150);
    this.query.open = this.query.open.filter((x) => x !== id);
    if (this.query.focus !== null) this.query.focus = null;
    this.load();
  }

  private reveal(id: number): void {
    this.query.focus = id;
    this.selected = id;
    this.load().then(() => this.openDetails(id));
  }

  private async openDetails(id: number): Promise<void> {
    this.selected = id;
    this.detailsController?.abort();
    const controller = new AbortController();
    this.detailsController = controller;
    this.drawer.hidden = false;
    replace(this.bodyEl, loadingState("Loading the node…"));
    try {
      const d = await graphApi.node(this.sel, id, controller.signal);
      if (controller.signal.aborted) return;
      replace(
        this.bodyEl,
        nodeDetails(d, {
          onExpand: (n) => this.expand(n),
          onCollapse: (n) => this.collapse(n),
          onReveal: (n) => this.reveal(n),
        }, this.sel.span),
      );
    } catch (err) {
      if (!isAbort(err)) replace(this.bodyEl, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private closeDetails(): void {
    this.detailsController?.abort();
    this.drawer.hidden = true;
  }
}

export const executionGraphTab: TabDef = {
  id: "graph",
  label: "Execution graph",
  mount: (host, sel) => new ExecutionGraphView(host, sel),
};
