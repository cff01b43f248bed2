// The critical path beside the execution graph: per step, its length against the step's wall time and the share
// of each cause; then every segment, longest first (the one that matters is on top; path order is one click away),
// in a sortable table: op or kernel, cause, duration, share of the step. Clicking a segment hands it to `onPick`
// (the tab selects its graph node).
import { FormatModule, InteractionModule, ResizeTableModule, SortModule, Tabulator, type RowComponent } from "tabulator-tables";
import { tabLink, writeTabLink } from "../../deeplink";
import { h, replace, select } from "../../dom";
import { pct, time } from "../../format";
import { CAUSE_COLORS, CAUSE_LABELS, type CriticalPath, type PathSegment, type PathStep } from "./api";

Tabulator.registerModule([FormatModule, InteractionModule, ResizeTableModule, SortModule]);

const ALL = "*";
type Order = "time" | "path";
const SORTS: Record<Order, { column: string; dir: "asc" | "desc" }[]> = {
  time: [{ column: "dur_us", dir: "desc" }],
  path: [{ column: "index", dir: "asc" }],
};

/** A bar of cause shares (each segment's width is its share of `total`). */
export function causeBar(causes: Record<string, number>, order: string[], whole: number): HTMLElement {
  // The causes split the step's wall time (idle included): a share is of their sum, so none passes 100 %.
  const total = Math.max(whole, Object.values(causes).reduce((a, b) => a + (b > 0 ? b : 0), 0));
  const parts = order
    .filter((c) => (causes[c] ?? 0) > 0 && total > 0)
    .map((c) =>
      h("span", {
        class: "cp-bar-part",
        title: `${CAUSE_LABELS[c] ?? c}: ${time(causes[c])} (${pct(causes[c] / total)})`,
        style: { width: `${(100 * causes[c]) / total}%`, background: CAUSE_COLORS[c] ?? "#9aa5b1" },
      }),
    );
  return h("div", { class: "cp-bar" }, ...parts);
}

function causeKey(order: string[]): HTMLElement {
  return h(
    "div",
    { class: "cp-key" },
    ...order.map((c) => h("span", { class: "cp-key-item" }, h("span", { class: "cp-dot", style: { background: CAUSE_COLORS[c] ?? "#9aa5b1" } }), CAUSE_LABELS[c] ?? c)),
  );
}

/** The largest cause as a share of the step (the causes split the wall time, so shares stay within 100 %). */
export function mostly(step: PathStep, top: string): string {
  const share = step.causes[top] / (step.wall_us || 1);
  const idle = step.causes.idle ?? 0;
  const traced = top === "idle" || idle <= 0 ? "" : ` (${pct(step.causes[top] / (step.path_us || 1))} of the ${time(step.path_us)} in traced work)`;
  return `Mostly ${CAUSE_LABELS[top] ?? top}: ${pct(Math.min(share, 1))} of the step${traced}.`;
}

function stepSummary(step: PathStep, order: string[]): HTMLElement {
  const top = order.filter((c) => (step.causes[c] ?? 0) > 0).sort((a, b) => step.causes[b] - step.causes[a])[0];
  return h(
    "div",
    { class: "cp-step" },
    h(
      "div",
      { class: "cp-step-head" },
      h("span", { class: "cp-step-name", text: step.step }),
      h("span", { class: "muted small", text: `path ${time(step.path_us)} of ${time(step.wall_us)} wall` }),
    ),
    causeBar(step.causes, order, step.wall_us),
    top ? h("div", { class: "muted small", text: mostly(step, top) }) : null,
  );
}

export class CriticalPathList {
  private table: Tabulator | null = null;
  private data: CriticalPath | null = null;
  private step = ALL;
  private order: Order = "time";
  private head = h("div", { class: "cp-head" });
  private tableHost = h("div", { class: "cp-table table-host" });

  constructor(
    host: HTMLElement,
    private onPick: (seg: PathSegment) => void,
  ) {
    replace(host, this.head, this.tableHost);
  }

  show(data: CriticalPath): void {
    this.data = data;
    // the step and the order survive a reload (the graph tab's deep link: `cp_step`, `cp_order`)
    const link = tabLink("graph");
    this.step = data.steps.length === 1 ? data.steps[0].step : data.steps.some((s) => s.step === link.cp_step) ? (link.cp_step as string) : ALL;
    if (link.cp_order === "path") this.order = "path";
    this.renderHead();
    this.renderTable();
  }

  /** Mark the segments of one graph node (its ET id) as the picked rows. */
  markEt(etId: number | null): void {
    this.table?.getRows().forEach((row) => {
      const seg = row.getData() as PathSegment;
      row.getElement().classList.toggle("cp-picked", etId !== null && seg.et_id === etId);
    });
  }

  destroy(): void {
    this.table?.destroy();
    this.table = null;
  }

  private segments(): PathSegment[] {
    const segs = this.data?.segments ?? [];
    return this.step === ALL ? segs : segs.filter((s) => s.step === this.step);
  }

  private renderHead(): void {
    const d = this.data!;
    const steps = this.step === ALL ? d.steps : d.steps.filter((s) => s.step === this.step);
    const picker =
      d.steps.length > 1
        ? select(
            [[ALL, `All ${d.steps.length} steps`], ...d.steps.map((s) => [s.step, s.step] as [string, string])],
            this.step,
            (v) => {
              this.step = v;
              writeTabLink("graph", { cp_step: v === ALL ? null : v });
              this.renderHead();
              this.renderTable();
            },
            { attrs: { "aria-label": "Critical path step" } },
          )
        : null;
    replace(
      this.head,
      h("div", { class: "cp-title-row" }, h("h3", { class: "section-title", text: "Critical path" }), picker, this.orderToggle()),
      ...steps.slice(0, 3).map((s) => stepSummary(s, d.causes)),
      steps.length > 3 ? h("div", { class: "muted small", text: `… and ${steps.length - 3} more steps` }) : null,
      causeKey(d.causes.filter((c) => (d.totals[c] ?? 0) > 0)),
    );
  }

  /** Longest first or in path order (a header click sorts by any column too). */
  private orderToggle(): HTMLElement {
    const pick = (order: Order) => {
      this.order = order;
      writeTabLink("graph", { cp_order: order === "time" ? null : order });
      this.table?.setSort(SORTS[order]);
      this.renderHead();
    };
    const btn = (order: Order, text: string, title: string) =>
      h("button", { class: `btn btn-small${this.order === order ? " active" : ""}`, text, title, attrs: { "aria-pressed": String(this.order === order) }, on: { click: () => pick(order) } });
    return h("div", { class: "cp-order", attrs: { role: "group", "aria-label": "Segment order" } }, btn("time", "Longest first", "Segments by time, longest first"), btn("path", "Path order", "Segments in the order the path runs"));
  }

  private renderTable(): void {
    const rows = this.segments();
    if (this.table) {
      this.table.setData(rows);
      return;
    }
    const el = h("div");
    this.tableHost.appendChild(el);
    this.table = new Tabulator(el, {
      data: rows,
      layout: "fitColumns",
      height: "100%",
      index: "index",
      columnDefaults: { headerSortStartingDir: "desc", vertAlign: "middle" },
      initialSort: SORTS[this.order],
      placeholder: "No segment on the critical path.",
      columns: [
        { title: "#", field: "index", width: 44, sorter: "number", headerSortStartingDir: "asc", hozAlign: "right" },
        {
          title: "Op or kernel",
          field: "name",
          minWidth: 140,
          variableHeight: true,
          headerSortStartingDir: "asc",
          formatter: (cell) => {
            const seg = cell.getData() as PathSegment;
            // the readable name, wrapped in the cell (never cut): the raw name on hover
            return h("span", { class: "cp-name", title: `${seg.name}${seg.et_id === null ? " (no ET node: not in the graph)" : ""}`, text: seg.display_name ?? seg.name });
          },
        },
        {
          title: "Cause",
          field: "cause",
          width: 78,
          headerSortStartingDir: "asc",
          formatter: (cell) =>
            h("span", { class: "cp-cause", title: CAUSE_LABELS[cell.getValue()] ?? cell.getValue() }, h("span", { class: "cp-dot", style: { background: CAUSE_COLORS[cell.getValue()] ?? "#9aa5b1" } }), CAUSE_LABELS[cell.getValue()] ?? cell.getValue()),
        },
        { title: "Time", field: "dur_us", width: 62, sorter: "number", hozAlign: "right", formatter: (cell) => time(cell.getValue()) },
        { title: "Share", field: "share", width: 58, sorter: "number", hozAlign: "right", headerTooltip: "Share of the step's wall time", formatter: (cell) => pct(cell.getValue()) },
      ],
      rowFormatter: (row: RowComponent) => {
        const seg = row.getData() as PathSegment;
        row.getElement().classList.toggle("cp-no-et", seg.et_id === null);
      },
    });
    this.table.on("tableBuilt", () => {
      this.table?.on("rowClick", (_e: UIEvent, row: RowComponent) => this.onPick(row.getData() as PathSegment));
    });
  }
}
