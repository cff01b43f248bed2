// Tensor shapes tab: ops grouped by input shapes (Kineto trace) as a flat list (leaf ops by default: each device
// microsecond once) or as the op tree (total and self device time), the shape distribution of a selected op
// (chart), and the tensors of the span's tensor.trace joined to its ops.
import { isAbort, type Selection } from "../../api";
import { cellText, pctBar, unknown } from "../../components/kernelTable";
import { shapesApi, type OpShapeRow, type OpShapesResponse, type OpView, type TensorRow, type TensorsResponse } from "./api";
import { ShapeChart } from "./chart";
import { ShapesTable, type ShapesColumn } from "../../components/shapesTable";
import { ShapesTree } from "./tree";
import { emptyState, inlineError } from "../../components/states";
import { debounce, h, replace } from "../../dom";
import { bytes, count, flop, pct, sig, time } from "../../format";
import { timelineButton } from "../../nav";
import { tabLink, writeTabLink } from "../../deeplink";
import type { TabDef, TabView } from "../types";

const PAGE = 100;
const VIEWS: { id: OpView; label: string; tip: string }[] = [
  { id: "leaf", label: "Leaf ops", tip: "Ops that launch their kernels themselves: each device microsecond counted once" },
  { id: "all", label: "All ops", tip: "Every op group: a parent's device time includes its child ops', so sums count it several times" },
  { id: "tree", label: "Tree", tip: "Ops nested parent -> children, with total and self device time" },
];

function types(row: OpShapeRow): string {
  return Array.isArray(row.input_types) ? row.input_types.filter((t) => t).join(", ") : "";
}

const OP_COLUMNS: ShapesColumn<OpShapeRow>[] = [
  { field: "op", title: "Op", tip: "Op name as recorded in the trace", text: true, grow: 2, render: (r) =>
      cellText(r.source ? `${r.op} · from ${r.source}` : r.op, r.source ? `${r.op}: replayed kernels, from ${r.source}` : r.op, "cell-text cell-name") },
  { field: "shape", title: "Input shapes", tip: "Input Dims of the op, one [..] per input (- for a non-tensor input)", text: true, grow: 3, render: (r) => cellText(r.shape, r.shape) },
  { field: "dtype", title: "dtype", tip: "Input types of the op (hover for all)", text: true, width: 90, render: (r) => (r.dtype ? cellText(r.dtype, types(r)) : cellText(types(r) || "—", types(r))) },
  { field: "calls", title: "Calls", tip: "Number of calls with these shapes", right: true, width: 70, render: (r) => cellText(count(r.calls)) },
  { field: "cpu_us", title: "CPU time", tip: "Total wall time of the op on the CPU (hover: mean)", right: true, width: 90, render: (r) => cellText(time(r.cpu_us), `mean ${time(r.mean_cpu_us)}`) },
  { field: "device_us", title: "Device", tip: "Total device time: GPU time of the kernels the op and its child ops launched", right: true, width: 96, render: (r) => (r.device_us == null ? unknown("no GPU kernel launched by this op") : cellText(time(r.device_us), `${count(r.kernels)} ${r.kernels === 1 ? "kernel" : "kernels"}`)) },
  { field: "self_us", title: "Self", tip: "Self device time: GPU time of the kernels the op launched itself (child ops excluded); self times add up to the device time once", right: true, width: 86, render: (r) => (r.self_us == null ? unknown("no GPU kernel launched by this op") : cellText(time(r.self_us))) },
  { field: "flops", title: "FLOPs", tip: "Estimated FLOPs of all calls, from the shapes", right: true, width: 100, render: (r) => (r.flops == null ? unknown(r.flops_reason || "no FLOP formula for this op") : cellText(flop(r.flops))) },
  { field: "tflops", title: "TFLOP/s", tip: "FLOPs / device time", right: true, width: 86, render: (r) => (r.tflops == null ? unknown(r.flops == null ? r.flops_reason || "FLOPs unknown" : "no device time") : cellText(sig(r.tflops))) },
  { field: "pct_peak", title: "% of peak", tip: "Achieved TFLOP/s as a share of the device's datasheet peak for the dtype", width: 116, render: (r) => (r.pct_peak == null ? unknown("no device time, FLOPs or peak") : pctBar(r.pct_peak, "pbar-compute", `${pct(r.pct_peak)} of ${r.dtype ?? ""} peak`)) },
];

function location(r: TensorRow): string {
  return r.line == null ? r.file : `${r.file}:${r.line}`;
}

function basename(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

const TENSOR_COLUMNS: ShapesColumn<TensorRow>[] = [
  { field: "t_ms", title: "t (ms)", tip: "Time since the first record", right: true, width: 80, render: (r) => cellText(sig(r.t_ms), String(r.ts)) },
  { field: "kind", title: "Kind", tip: "call: an argument; ret: a returned tensor", text: true, width: 64, render: (r) => cellText(r.kind) },
  { field: "name", title: "Name", tip: "Caller's variable name, else the parameter name", text: true, width: 120, render: (r) => cellText(r.name, r.name) },
  { field: "shape", title: "Shape", tip: "Tensor shape", text: true, width: 130, render: (r) => cellText(r.shape, r.shape) },
  { field: "bytes", title: "Bytes", tip: "numel × element size", right: true, width: 86, render: (r) => cellText(bytes(r.bytes), `${count(r.bytes)} B · data pointer ${r.ptr}`) },
  { field: "function", title: "Function", tip: "The torch function or module called", text: true, grow: 2, render: (r) => cellText(r.function, r.function, "cell-text cell-name") },
  { field: "file", title: "Source", tip: "Call site in your code (hover for the full path)", text: true, grow: 2, render: (r) => cellText(`${basename(r.file)}${r.line == null ? "" : ":" + r.line}`, location(r)) },
  { field: "op", title: "Op", tip: "Kineto op joined by time (hover: its input shapes)", text: true, grow: 1, render: (r) => (r.op ? cellText(r.op, r.op_shape) : unknown("no profiled op at this time")) },
  { field: "producer", title: "Made by", tip: "The call that returned this data pointer last (joined by data pointer)", text: true, grow: 2, render: (r) => (r.producer ? cellText(r.producer, r.producer) : unknown("no earlier call returned this pointer")) },
];

const TAB_ID = "shapes";

function filterBox(label: string, onChange: (v: string) => void, value = ""): HTMLInputElement {
  const box = h("input", { class: "search", attrs: { type: "search", placeholder: label, title: label, "aria-label": label, spellcheck: "false" } }) as HTMLInputElement;
  box.value = value;
  const set = debounce((v: string) => onChange(v.trim()), 300);
  box.addEventListener("input", () => set(box.value));
  return box;
}

function panel(title: string, ...body: (Node | null)[]): HTMLElement {
  return h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: title })), ...body);
}

class TensorShapesView implements TabView {
  private controller = new AbortController();
  private opFilter = "";
  private opView: OpView = "leaf";
  private tensorFilter = "";
  private ops: ShapesTable<OpShapeRow> | null = null;
  private tree: ShapesTree | null = null;
  private viewButtons = h("div", { class: "view-switch", attrs: { role: "group", "aria-label": "Op view" } });
  private tensors: ShapesTable<TensorRow> | null = null;
  private chart: ShapeChart | null = null;
  private opsStatus = h("div", { class: "table-status" });
  private opsHost = h("div", { class: "table-host shapes-ops" });
  private chartStatus = h("div", { class: "chart-status" });
  private chartHost = h("div", { class: "shapes-chart-host" });
  private tensorStatus = h("div", { class: "table-status" });
  private tensorHost = h("div", { class: "table-host shapes-tensors" });

  constructor(private host: HTMLElement, private sel: Selection) {
    // the op view and both filters survive a reload (the deep link)
    const link = tabLink(TAB_ID);
    if (VIEWS.some((v) => v.id === link.view)) this.opView = link.view as OpView;
    this.opFilter = link.ops ?? "";
    this.tensorFilter = link.tensors ?? "";
    this.build();
  }

  private build(): void {
    const opBox = filterBox("Filter ops or shapes…", (v) => {
      this.opFilter = v;
      writeTabLink(TAB_ID, { ops: v || null });
      if (this.opView === "tree") void this.showTree();
      else void this.ops?.reload();
    }, this.opFilter);
    this.renderViewButtons();
    const tensorBox = filterBox("Filter names, functions, files…", (v) => {
      this.tensorFilter = v;
      writeTabLink(TAB_ID, { tensors: v || null });
      void this.tensors?.reload();
    }, this.tensorFilter);
    replace(
      this.host,
      h(
        "div",
        { class: "shapes" },
        panel("Ops by input shapes", h("div", { class: "controls" }, this.viewButtons, opBox), this.opsStatus, this.opsHost),
        panel("Shape distribution", this.chartStatus, this.chartHost),
        panel("Tensors (tensor.trace)", h("div", { class: "controls" }, tensorBox), this.tensorStatus, this.tensorHost),
      ),
    );
    replace(this.chartStatus, h("span", { class: "muted small", text: "Click an op row to see the distribution of its input shapes." }));
    this.showOps();
    this.tensors = new ShapesTable<TensorRow>(this.tensorHost, {
      columns: TENSOR_COLUMNS,
      sort: "t_ms",
      order: "asc",
      pageSize: PAGE,
      noun: "tensors",
      onError: (m) => replace(this.tensorStatus, inlineError(m)),
      fetchPage: async (sort, order, offset, limit) => {
        const res = await shapesApi.tensors(this.sel, { filter: this.tensorFilter, sort, order, offset, limit }, this.controller.signal);
        this.tensorsLoaded(res);
        return res;
      },
    });
  }

  private renderViewButtons(): void {
    replace(
      this.viewButtons,
      ...VIEWS.map((v) => {
        const b = h("button", { class: "btn btn-small", text: v.label, attrs: { type: "button", title: v.tip, "aria-pressed": String(v.id === this.opView), "data-view": v.id } });
        b.addEventListener("click", () => this.setView(v.id));
        return b;
      }),
    );
  }

  private setView(view: OpView): void {
    if (view === this.opView) return;
    this.opView = view;
    writeTabLink(TAB_ID, { view: view === "leaf" ? null : view });
    this.renderViewButtons();
    this.showOps();
  }

  /** The op table of the current view: a server-paged flat table, or the whole tree. */
  private showOps(): void {
    this.ops?.destroy();
    this.tree?.destroy();
    this.ops = this.tree = null;
    replace(this.opsHost);
    if (this.opView === "tree") {
      void this.showTree();
      return;
    }
    const leafOnly = this.opView === "leaf";
    this.ops = new ShapesTable<OpShapeRow>(this.opsHost, {
      columns: OP_COLUMNS,
      sort: "device_us",
      order: "desc",
      pageSize: PAGE,
      noun: "ops",
      key: (r) => r.id,
      onClick: (r) => void this.showDistribution(r.op),
      onError: (m) => replace(this.opsStatus, inlineError(m)),
      fetchPage: async (sort, order, offset, limit) => {
        const res = await shapesApi.opShapes(this.sel, { filter: this.opFilter, sort, order, offset, limit }, leafOnly, this.controller.signal);
        this.opsLoaded(res);
        return res;
      },
    });
  }

  private async showTree(): Promise<void> {
    replace(this.opsStatus, h("span", { class: "muted", text: "Loading the op tree…" }));
    try {
      const res = await shapesApi.opTree(this.sel, this.opFilter, this.controller.signal);
      if (this.opView !== "tree") return;
      this.tree?.destroy();
      replace(this.opsHost);
      this.tree = new ShapesTree(this.opsHost, OP_COLUMNS, res.rows, (r) => void this.showDistribution(r.op));
      this.opsLoaded(res);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(this.opsStatus, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private opsLoaded(res: OpShapesResponse): void {
    if (!res.record_shapes) {
      replace(this.opsStatus, emptyState("No shapes recorded", res.message ?? "profile with record_shapes=True"));
      return;
    }
    const what = this.opView === "leaf" ? "leaf op groups" : "op groups";
    const groups = `${count(res.total)} ${res.total === 1 ? what.replace("groups", "group") : what} (name + input shapes + dtypes)${this.opFilter ? ` matching “${this.opFilter}”` : ""}`;
    const note =
      this.opView === "all"
        ? "total device time includes child ops: sums count it more than once"
        : this.opView === "tree"
          ? "total = self + children"
          : "each device microsecond counted once";
    const device = res.device_us > 0 ? `device time ${time(res.device_us)} · ${note}` : "no GPU kernel launched by these ops";
    replace(this.opsStatus, h("span", { class: "muted", text: `${groups} · ${device}` }));
  }

  private tensorsLoaded(res: TensorsResponse): void {
    if (!res.has_tensor_trace) {
      this.tensorHost.hidden = true;
      replace(this.tensorStatus, emptyState("No tensor.trace", res.message ?? ""));
      return;
    }
    this.tensorHost.hidden = false;
    const files = res.files.map((f) => `${f.file} (${count(f.records)} records)`).join(", ");
    const parts = [`${count(res.total)} records${this.tensorFilter ? ` matching “${this.tensorFilter}”` : ""}`, `${count(res.matched)} joined to a profiled op`, files];
    const errors = res.error_count
      ? h(
          "details",
          { class: "banner banner-warn" },
          h("summary", { text: `${count(res.error_count)} malformed line${res.error_count === 1 ? "" : "s"} skipped` }),
          h("ul", { class: "file-errors" }, ...res.errors.map((e) => h("li", null, h("code", { class: "file-name", text: `${e.file}:${e.line}` }), h("span", { class: "file-reason", text: e.reason })))),
        )
      : null;
    replace(this.tensorStatus, h("span", { class: "muted", text: parts.join(" · ") }), errors, res.message ? emptyState(res.message) : null);
  }

  private async showDistribution(op: string): Promise<void> {
    replace(this.chartStatus, h("span", { class: "muted small", text: `Loading the input shapes of ${op}…` }));
    try {
      const res = await shapesApi.distribution(this.sel, op, this.controller.signal);
      if (!this.chart) {
        this.chart = new ShapeChart();
        replace(this.chartHost, this.chart.el);
      }
      replace(this.chartStatus, timelineButton(op, this.sel.span, `Show ${op} on timeline`));
      this.chart.setData(res);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(this.chartStatus, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private teardown(): void {
    this.controller.abort();
    this.ops?.destroy();
    this.tree?.destroy();
    this.tensors?.destroy();
    this.chart?.destroy();
    this.ops = this.tensors = null;
    this.tree = null;
    this.chart = null;
  }

  update(sel: Selection): void {
    this.teardown();
    this.sel = sel;
    this.opFilter = this.tensorFilter = ""; // the rebuilt filter boxes start empty: so do the filters
    this.controller = new AbortController();
    this.build();
  }

  destroy(): void {
    this.teardown();
    replace(this.host);
  }
}

export const tensorShapesTab: TabDef = {
  id: TAB_ID,
  label: "Tensor shapes",
  mount: (host, sel) => new TensorShapesView(host, sel),
};
