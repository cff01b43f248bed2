// Memory tab: per device, the allocated / reserved curve of the span with its steps and peak, what was live at the
// peak (or never freed, or every allocation), and allocations by op; a click on an op shows its allocations on the
// curve. Everything comes from the span's [memory] events (recorded with profile_memory=True); a run's CUDA memory
// snapshot, when it holds one, has its own panel on top (memorySnapshot.ts).
import { isAbort, type Selection } from "../../api";
import { cellText, unknown } from "../../components/kernelTable";
import { memoryApi, type AllocationRow, type MemoryDevice, type MemorySummary, type OpMemoryRow, type Which } from "./api";
import { MemoryChart } from "./chart";
import { ShapesTable, type ShapesColumn } from "../../components/shapesTable";
import { emptyState, inlineError, loadingState, requestErrorState } from "../../components/states";
import { stepChip } from "../../components/stepChip";
import { field, h, replace, select } from "../../dom";
import { bytes, count, pct, time } from "../../format";
import { nav, scopeFor, type StepScope } from "../../state";
import { mountSnapshot } from "./snapshot";
import type { TabDef, TabView } from "../types";
import { tabLink, writeTabLink } from "../../deeplink";

const TAB_ID = "memory";

const PAGE = 100;
const MAX_MARKS = 5000;

function opCell(r: { op: string; module: string }): HTMLElement {
  return cellText(r.op, r.module ? `${r.op}\nmodule: ${r.module}` : r.op, "cell-text cell-name");
}

/** The last two levels of a module path (the whole path on hover). */
function moduleCell(r: { module: string }): HTMLElement {
  return cellText(r.module ? r.module.split("/").slice(-2).join("/") : "—", r.module);
}

const size = (v: number | null, why: string) => (v == null ? unknown(why) : cellText(bytes(v), `${count(v)} B`));

const ALLOC_COLUMNS: ShapesColumn<AllocationRow>[] = [
  { field: "t_ms", title: "t (ms)", tip: "When it was allocated, from the span start", right: true, width: 80, render: (r) => (r.t_ms == null ? unknown("allocated before the span started") : cellText(r.t_ms.toFixed(3))) },
  { field: "bytes", title: "Size", tip: "Bytes allocated", right: true, width: 96, render: (r) => size(r.bytes, "") },
  { field: "op", title: "Allocated by", tip: "The innermost op running on the allocating thread then (hover: module)", text: true, grow: 2, render: opCell },
  { field: "shape", title: "Input shapes", tip: "Input Dims of that op (record_shapes=True)", text: true, grow: 2, render: (r) => cellText(r.shape || "—", r.shape) },
  { field: "module", title: "Module", tip: "The nn.Module calls holding the op (with_stack=True) or its Module Hierarchy; hover for the whole path", text: true, grow: 2, render: moduleCell },
  { field: "lifetime_us", title: "Lifetime", tip: "Time until its free (— : not freed inside the span)", right: true, width: 96, render: (r) => (r.lifetime_us == null ? unknown(r.index < 0 ? "allocated before the span" : "not freed inside the span") : cellText(time(r.lifetime_us))) },
  { field: "addr", title: "Address", tip: "Address reported by the allocator", text: true, width: 130, render: (r) => cellText(r.addr || "—") },
];

const OP_COLUMNS: ShapesColumn<OpMemoryRow>[] = [
  { field: "op", title: "Op", tip: "The op that allocated (innermost op on the thread; hover: module)", text: true, grow: 2, render: opCell },
  { field: "shape", title: "Input shapes", tip: "Input Dims of the op", text: true, grow: 2, render: (r) => cellText(r.shape || "—", r.shape) },
  { field: "module", title: "Module", tip: "The module that called the op, or the part its callers share", text: true, grow: 1, render: moduleCell },
  { field: "allocations", title: "Allocs", tip: "Number of allocations", right: true, width: 70, render: (r) => cellText(count(r.allocations)) },
  { field: "bytes", title: "Bytes", tip: "Bytes allocated in all (hover: largest)", right: true, width: 96, render: (r) => cellText(bytes(r.bytes), `largest ${bytes(r.max_bytes)}`) },
  { field: "live_at_peak_bytes", title: "At peak", tip: "Bytes of its allocations live at the peak", right: true, width: 90, render: (r) => size(r.live_at_peak_bytes, "the trace has no addresses") },
  { field: "never_freed", title: "Not freed", tip: "Allocations not freed inside the span (hover: bytes)", right: true, width: 80, render: (r) => (r.never_freed == null ? unknown("the trace has no addresses") : cellText(count(r.never_freed), bytes(r.never_freed_bytes))) },
  { field: "mean_lifetime_us", title: "Mean life", tip: "Mean time from allocation to free (hover: longest)", right: true, width: 90, render: (r) => (r.mean_lifetime_us == null ? unknown("none freed inside the span") : cellText(time(r.mean_lifetime_us), `longest ${time(r.max_lifetime_us)}`)) },
];

const WHICH: ReadonlyArray<readonly [Which, string]> = [
  ["live_at_peak", "Live at the peak"],
  ["never_freed", "Never freed in the span"],
  ["all", "All allocations"],
];

function panel(title: string, ...body: (Node | null)[]): HTMLElement {
  return h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: title })), ...body);
}

function deviceFacts(d: MemoryDevice, t0: number): HTMLElement {
  const pk = d.peak;
  const fact = (label: string, value: string, tip = "") => h("div", { class: "memory-fact", attrs: { title: tip } }, h("span", { class: "muted small", text: label }), h("b", { text: value }));
  return h(
    "div",
    { class: "memory-facts" },
    fact("Peak allocated", pk ? `${bytes(pk.allocated)} at ${((pk.ts - t0) / 1000).toFixed(3)} ms` : "—", d.allocated_source),
    ofDevice(d),
    fact("Reserved at peak", bytes(pk?.reserved ?? null), d.reserved_source),
    fact("Peak reserved", bytes(d.peak_reserved), d.reserved_source),
    fact("Live at peak", pk && pk.before_span != null ? `${count(pk.live_count)} allocations, ${bytes(pk.live_bytes)}` : "—", d.live_source),
    fact("Allocated before the span", pk?.before_span != null ? bytes(pk.before_span) : "—", "part of the peak allocated before the span started (level before its first event, less frees of unknown addresses)"),
    fact("Never freed in the span", d.never_freed != null ? `${count(d.never_freed)} (${bytes(d.never_freed_bytes)})` : "—", d.live_source),
    fact("Events", `${count(d.allocations)} allocs / ${count(d.frees)} frees`),
  );
}

/** The peak reserved as a share of the memory of the device the run is rated as (the picked one, if any). */
function ofDevice(d: MemoryDevice): HTMLElement | null {
  const gb = d.rated_as?.memory_gb;
  if (!d.rated_as || !gb || d.peak_reserved == null) return null;
  const tip = `Peak reserved against the ${gb} GB of ${d.rated_as.name} (the device the run is rated as: pick another in the header)`;
  return h("div", { class: "memory-fact", attrs: { title: tip } }, h("span", { class: "muted small", text: `Of ${d.rated_as.name}` }), h("b", { text: `${pct(d.peak_reserved / (gb * 2 ** 30))} of ${gb} GB` }));
}

class MemoryView implements TabView {
  private controller = new AbortController();
  private summary: MemorySummary | null = null;
  private device = "";
  private which: Which = "live_at_peak";
  private chart: MemoryChart | null = null;
  private allocs: ShapesTable<AllocationRow> | null = null;
  private ops: ShapesTable<OpMemoryRow> | null = null;
  private curveRequest = 0;
  private scopeChip = h("span", { class: "chips" });
  private snapshotHost = h("div", { class: "memory-snapshot-host" });
  private snapshotChart: { dispose(): void } | null = null;
  private unsubscribeNav: () => void;

  constructor(private host: HTMLElement, private sel: Selection) {
    this.unsubscribeNav = nav.subscribe((_, changed) => {
      if (changed.has("scope")) this.showScope();
    });
    void this.load();
  }

  /** The Overview's step scope when it is a step of the span shown. */
  private get scope(): StepScope | null {
    return this.summary ? scopeFor({ ...this.sel, span: this.summary.span }) : null;
  }

  /** Zoom the curve to the scoped step (memory times are trace µs, as the step's), or out once it is cleared. */
  private showScope(): void {
    const scope = this.scope;
    replace(this.scopeChip, stepChip(scope, "The Overview's step: the curve zoomed to its time range"));
    this.chart?.zoomTo(scope ? [scope.t0, scope.t1] : null);
  }

  private async load(): Promise<void> {
    replace(this.host, loadingState("Loading memory events…"));
    this.snapshotChart?.dispose();
    replace(this.snapshotHost);
    void mountSnapshot(this.snapshotHost, this.sel.run, this.controller.signal, (c) => (this.snapshotChart = c));
    try {
      this.summary = await memoryApi.summary(this.sel, this.controller.signal);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(this.host, requestErrorState("Memory view unavailable", err, () => void this.load()), this.snapshotHost);
      return;
    }
    if (!this.summary.has_memory) {
      replace(this.host, emptyState("No memory events in this span", this.summary.message ?? "record with profile_memory=True"), this.snapshotHost);
      return;
    }
    const devices = this.summary.devices.map((d) => d.device);
    const link = tabLink(TAB_ID); // the device, the allocations shown and the zoom survive a reload
    this.device = devices.includes(link.device ?? "") ? (link.device as string) : (devices.find((d) => d !== "cpu") ?? devices[0]);
    if (WHICH.some(([w]) => w === link.which)) this.which = link.which as Which;
    this.build();
  }

  private build(): void {
    const s = this.summary as MemorySummary;
    const d = s.devices.find((x) => x.device === this.device) as MemoryDevice;
    this.teardownParts();
    const devices = s.devices.map((x) => [x.device, x.device === "cpu" ? "CPU" : x.device] as const);
    const deviceSel = select(devices, this.device, (v) => {
      this.device = v;
      writeTabLink(TAB_ID, { device: v, z0: null, z1: null });
      this.build();
    }, { attrs: { "aria-label": "Memory device" } });
    const whichSel = select(WHICH, this.which, (v) => {
      this.which = v as Which;
      writeTabLink(TAB_ID, { which: v });
      void this.allocs?.reload();
    }, { attrs: { "aria-label": "Allocations shown" } });
    const spanNote = s.spans.length > 1 ? h("div", { class: "muted small", text: `Memory is shown per span: this is ${s.span}; pick a span in the header for another.` }) : null;
    const chartStatus = h("div", { class: "chart-status" });
    const allocStatus = h("div", { class: "table-status" });
    const opsStatus = h("div", { class: "table-status" });
    const allocHost = h("div", { class: "table-host memory-allocs" });
    const opsHost = h("div", { class: "table-host memory-ops" });
    this.chart = new MemoryChart((range) => void this.zoom(range, chartStatus));
    replace(
      this.host,
      h(
        "div",
        { class: "memory" },
        this.snapshotHost,
        panel("Memory over time", h("div", { class: "controls" }, field("Device", deviceSel), this.scopeChip), spanNote, deviceFacts(d, s.start_us), chartStatus, this.chart.el),
        panel("Allocations", h("div", { class: "controls" }, field("Show", whichSel)), allocStatus, allocHost),
        panel("Allocations by op", h("div", { class: "muted small", text: "Click an op to see its allocations on the curve." }), opsStatus, opsHost),
      ),
    );
    void this.loadCurve(chartStatus);
    this.allocs = new ShapesTable<AllocationRow>(allocHost, {
      columns: ALLOC_COLUMNS,
      sort: "bytes",
      order: "desc",
      pageSize: PAGE,
      noun: "allocations",
      onError: (m) => replace(allocStatus, inlineError(m)),
      fetchPage: async (sort, order, offset, limit) => {
        const res = await memoryApi.allocations(this.sel, this.device, this.which, null, { sort, order, offset, limit }, this.controller.signal);
        replace(allocStatus, h("span", { class: "muted", text: `${count(res.total)} rows · ${bytes(res.bytes)} in all` + (this.which === "live_at_peak" ? " (the peak)" : "") }));
        return res;
      },
    });
    this.ops = new ShapesTable<OpMemoryRow>(opsHost, {
      columns: OP_COLUMNS,
      sort: "bytes",
      order: "desc",
      pageSize: PAGE,
      noun: "ops",
      key: (r) => String(r.op_index),
      onClick: (r) => void this.showOp(r, chartStatus),
      onError: (m) => replace(opsStatus, inlineError(m)),
      fetchPage: async (sort, order, offset, limit) => {
        const res = await memoryApi.ops(this.sel, this.device, { sort, order, offset, limit }, this.controller.signal);
        replace(opsStatus, h("span", { class: "muted", text: `${count(res.total)} ops (name + input shapes) allocated on ${this.device}` }));
        return res;
      },
    });
  }

  private async loadCurve(status: HTMLElement): Promise<void> {
    const s = this.summary as MemorySummary;
    const d = s.devices.find((x) => x.device === this.device) as MemoryDevice;
    try {
      const overview = await memoryApi.curve(this.sel, this.device, this.chart?.width ?? 1000, null, this.controller.signal);
      this.chart?.setData({ t0: s.start_us, overview, steps: s.steps, peak: d.peak });
      this.showScope();
      const link = tabLink(TAB_ID);
      const z0 = Number(link.z0), z1 = Number(link.z1);
      if (!this.scope && link.z0 && Number.isFinite(z0) && Number.isFinite(z1) && z1 > z0) this.chart?.zoomTo([z0, z1]);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(status, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private async zoom(range: [number, number] | null, status: HTMLElement): Promise<void> {
    const ticket = ++this.curveRequest;
    writeTabLink(TAB_ID, { z0: range ? range[0].toFixed(3) : null, z1: range ? range[1].toFixed(3) : null });
    if (!range) {
      this.chart?.setDetail(null);
      return;
    }
    try {
      const detail = await memoryApi.curve(this.sel, this.device, this.chart?.width ?? 1000, range, this.controller.signal);
      if (ticket === this.curveRequest) this.chart?.setDetail(detail);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(status, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private async showOp(r: OpMemoryRow, status: HTMLElement): Promise<void> {
    this.ops?.select(String(r.op_index));
    try {
      const page = await memoryApi.allocations(this.sel, this.device, "all", r.op_index, { sort: "t_ms", order: "asc", offset: 0, limit: MAX_MARKS }, this.controller.signal);
      this.chart?.setMarks(r.shape ? `${r.op} (${r.shape})` : r.op, page.rows);
      replace(status, page.total > MAX_MARKS ? h("span", { class: "muted", text: `first ${count(MAX_MARKS)} of ${count(page.total)} allocations shown` }) : null);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(status, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private teardownParts(): void {
    this.chart?.destroy();
    this.allocs?.destroy();
    this.ops?.destroy();
    this.chart = null;
    this.allocs = this.ops = null;
  }

  update(sel: Selection): void {
    this.controller.abort();
    this.teardownParts();
    this.sel = sel;
    this.controller = new AbortController();
    void this.load();
  }

  destroy(): void {
    this.unsubscribeNav();
    this.controller.abort();
    this.snapshotChart?.dispose();
    this.teardownParts();
    replace(this.host);
  }
}

export const memoryTab: TabDef = {
  id: TAB_ID,
  label: "Memory",
  mount: (host, sel) => new MemoryView(host, sel),
};
