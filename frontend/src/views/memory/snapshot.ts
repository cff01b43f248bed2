// The Memory tab's snapshot panel: when the run holds a CUDA memory snapshot (torch.cuda.memory._dump_snapshot,
// *.pickle[.gz] beside its traces), the allocated / reserved timeline of its history with the peak marked, what is
// alive at the peak by source line (a click shows the stack), size classes, fragmentation and OOMs
// (/memory_snapshot). A run without a snapshot (no `files`) shows nothing; one the server refused shows the reason.
import { LineChart, type LineSeriesOption } from "echarts/charts";
import { GridComponent, LegendComponent, MarkPointComponent, TooltipComponent, DataZoomComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { ApiError, getJson } from "../../api";
import { inlineError } from "../../components/states";
import { h, replace } from "../../dom";
import { bytes, count } from "../../format";
import { initChart } from "../../theme";

echarts.use([LineChart, GridComponent, LegendComponent, MarkPointComponent, TooltipComponent, DataZoomComponent, CanvasRenderer]);

const RETRY_MS = 2000;
const MAX_TRIES = 300;

export interface FrameRow {
  frame: string;
  function: string;
  bytes: number;
  count: number;
  largest_bytes: number;
  stack: string[];
}

interface Fragmentation {
  allocated_bytes: number;
  reserved_bytes: number;
  free_bytes: number;
  segments: number;
  largest_free_block_bytes: number;
}

interface Oom {
  time_us: number | null;
  requested_bytes: number;
  device_free_bytes: number;
  allocated_bytes: number;
  reserved_bytes: number;
  stack: string[];
  alive: FrameRow[];
}

export interface SnapshotReport {
  file: string | null;
  files: string[];
  device: number | null;
  devices: number[];
  events: number;
  start_us: number | null;
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  reserved_at_peak_bytes: number;
  peak_time_us: number | null;
  allocated_at_dump_bytes: number;
  reserved_at_dump_bytes: number;
  before_history: { bytes: number; count: number; note: string };
  at_peak: FrameRow[];
  at_peak_by_size: { size_class: string; bytes: number; count: number }[];
  fragmentation: { at_peak: Fragmentation; at_dump: Fragmentation };
  ooms: Oom[];
  leak_suspects: FrameRow[];
  curve: { t_us: number[]; allocated: number[]; reserved: number[] };
  steps?: { name: string; t_us: number; dur_us: number }[];
  clock?: string;
  sources: { allocated: string; reserved: string };
}

/** The last three parts of a source path (Windows or POSIX), with its line. */
function shortFrame(frame: string): string {
  return frame.split(/[\\/]/).slice(-3).join("/");
}

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((done) => {
  const timer = window.setTimeout(done, ms);
  signal.addEventListener("abort", () => { window.clearTimeout(timer); done(); });
});

/** Fill `host` with the run's snapshot panel (nothing when the run has none); asks again while it is being read. */
export async function mountSnapshot(host: HTMLElement, run: string, signal: AbortSignal, onChart: (c: echarts.ECharts) => void): Promise<void> {
  for (let tries = 0; tries < MAX_TRIES && !signal.aborted; tries++) {
    try {
      const rep = await getJson<SnapshotReport>("memory_snapshot", { run }, signal);
      if (!signal.aborted) replace(host, ...(rep.files.length ? [snapshotPanel(rep, onChart)] : []));
      return;
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && err.stillLoading) {
        replace(host, h("section", { class: "panel" }, h("div", { class: "muted", text: "Reading the run's memory snapshot…" })));
        await sleep(RETRY_MS, signal);
        continue;
      }
      replace(host, h("section", { class: "panel" }, h("h2", { class: "panel-title", text: "Memory snapshot" }), inlineError(err instanceof Error ? err.message : String(err))));
      return;
    }
  }
}

function fact(label: string, value: string, tip = ""): HTMLElement {
  return h("div", { class: "memory-fact", attrs: { title: tip } }, h("span", { class: "muted small", text: label }), h("b", { text: value }));
}

function snapshotPanel(rep: SnapshotReport, onChart: (c: echarts.ECharts) => void): HTMLElement {
  const t0 = rep.start_us ?? 0;
  const ms = (t: number | null) => (t == null ? "—" : `${((t - t0) / 1000).toFixed(3)} ms`);
  const fp = rep.fragmentation.at_peak, fd = rep.fragmentation.at_dump;
  const facts = h(
    "div",
    { class: "memory-facts" },
    fact("Peak allocated", `${bytes(rep.peak_allocated_bytes)} at ${ms(rep.peak_time_us)}`, rep.sources.allocated),
    fact("Reserved at peak", bytes(rep.reserved_at_peak_bytes), rep.sources.reserved),
    fact("Peak reserved", bytes(rep.peak_reserved_bytes), rep.sources.reserved),
    fact("Free in segments at peak", `${bytes(fp.free_bytes)} (largest block ${bytes(fp.largest_free_block_bytes)})`, "reserved − allocated at the peak; the largest contiguous free range of any segment"),
    fact("Free in segments at dump", `${bytes(fd.free_bytes)} (largest block ${bytes(fd.largest_free_block_bytes)})`, "from the segments' blocks at the dump"),
    fact("Before the history", `${count(rep.before_history.count)} blocks, ${bytes(rep.before_history.bytes)}`, rep.before_history.note),
    fact("History", `${count(rep.events)} events`, `device ${rep.device} of ${rep.devices.join(", ")}`),
  );
  const chartBox = h("div", { class: "chart-box snapshot-chart" });
  const stack = h("pre", { class: "snapshot-stack muted small", text: "Click a row to see the stack of its largest allocation." });
  const panel = h(
    "section",
    { class: "panel memory-snapshot" },
    h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: `Memory snapshot · ${rep.file}` })),
    facts,
    chartBox,
    rep.clock ? h("div", { class: "chart-caption snapshot-clock", text: `Profiler steps: ${rep.clock}.` }) : null,
    h("h3", { class: "small", text: "Alive at the peak, by source line (the first frame of your code)" }),
    frameTable(rep.at_peak, stack, "snapshot-at-peak"),
    stack,
    sizeTable(rep.at_peak_by_size),
    ...rep.ooms.map((o, i) => oomBlock(o, i, ms, stack)),
    rep.leak_suspects.length ? h("h3", { class: "small", text: "Never freed in the history (leak suspects)" }) : null,
    rep.leak_suspects.length ? frameTable(rep.leak_suspects, stack, "snapshot-leaks") : null,
  );
  requestAnimationFrame(() => onChart(drawCurve(chartBox, rep)));
  return panel;
}

function frameTable(rows: FrameRow[], stack: HTMLElement, cls: string): HTMLElement {
  const head = ["Source line", "Function", "Bytes", "Allocations", "Largest"];
  const tr = (r: FrameRow) => {
    const row = h(
      "tr",
      { class: "snapshot-row", attrs: { title: r.frame }, on: { click: () => { stack.textContent = [`${r.frame} ${r.function}`, ...r.stack.map((s) => `  ${s}`)].join("\n"); } } },
      h("td", { class: "cell-name", text: shortFrame(r.frame) }),
      h("td", { class: "cell-name", text: r.function }),
      h("td", { text: bytes(r.bytes) }),
      h("td", { text: count(r.count) }),
      h("td", { text: bytes(r.largest_bytes) }),
    );
    return row;
  };
  return h("table", { class: `ranks-table snapshot-table ${cls}` }, h("thead", null, h("tr", null, ...head.map((t) => h("th", { text: t })))), h("tbody", null, ...rows.map(tr)));
}

function sizeTable(rows: SnapshotReport["at_peak_by_size"]): HTMLElement {
  return h(
    "table",
    { class: "ranks-table snapshot-sizes" },
    h("thead", null, h("tr", null, ...["Size class (alive at the peak)", "Bytes", "Allocations"].map((t) => h("th", { text: t })))),
    h("tbody", null, ...rows.map((r) => h("tr", null, h("td", { class: "cell-name", text: r.size_class }), h("td", { text: bytes(r.bytes) }), h("td", { text: count(r.count) })))),
  );
}

function oomBlock(o: Oom, i: number, ms: (t: number | null) => string, stack: HTMLElement): HTMLElement {
  return h(
    "div",
    { class: "snapshot-oom" },
    h("h3", { class: "small error-text", text: `OOM ${i + 1} at ${ms(o.time_us)}: requested ${bytes(o.requested_bytes)}, CUDA had ${bytes(o.device_free_bytes)} free; allocated ${bytes(o.allocated_bytes)}, reserved ${bytes(o.reserved_bytes)}` }),
    h("pre", { class: "muted small", text: o.stack.slice(0, 6).join("\n") }),
    frameTable(o.alive, stack, "snapshot-oom-alive"),
  );
}

function drawCurve(box: HTMLElement, rep: SnapshotReport): echarts.ECharts {
  const chart = initChart(box, "memory-snapshot");
  const t0 = rep.curve.t_us[0] ?? 0;
  const x = rep.curve.t_us.map((t) => (t - t0) / 1000);
  const line = (name: string, values: number[], color: string): LineSeriesOption => ({
    name, type: "line", step: "end", showSymbol: false, color, data: values.map((v, i) => [x[i], v]),
  });
  const allocated = line("Allocated", rep.curve.allocated, "#3b6ea5");
  const peakX = rep.peak_time_us != null ? (rep.peak_time_us - t0) / 1000 : 0;
  allocated.markLine = {
    symbol: "none",
    silent: true,
    lineStyle: { type: "dashed", color: "#b0b7c3" },
    label: { formatter: "{b}", position: "insideEndTop", fontSize: 10 },
    data: (rep.steps ?? []).slice(0, 64).map((st) => ({ name: st.name.replace("ProfilerStep#", "step "), xAxis: (st.t_us - t0) / 1000 })),
  };
  allocated.markPoint = { symbol: "pin", symbolSize: 44, label: { formatter: "peak" }, data: [{ name: "peak", coord: [peakX, rep.peak_allocated_bytes], value: bytes(rep.peak_allocated_bytes) }] };
  chart.setOption({
    animation: false,
    legend: { top: 0 },
    grid: { left: 70, right: 24, top: 36, bottom: 56 },
    tooltip: { trigger: "axis", valueFormatter: (v: unknown) => bytes(Number(v)) },
    xAxis: { type: "value", name: "ms from the first event", nameLocation: "middle", nameGap: 26, min: 0 },
    yAxis: { type: "value", axisLabel: { formatter: (v: number) => bytes(v) } },
    dataZoom: [{ type: "inside" }],
    series: [allocated, line("Reserved", rep.curve.reserved, "#9aa5b1")],
  });
  new ResizeObserver(() => chart.resize()).observe(box);
  return chart;
}

interface SnapshotChange {
  a: string;
  b: string;
  message?: string;
  peak_allocated_bytes: { a: number; b: number; change: number };
  peak_reserved_bytes: { a: number; b: number; change: number };
  at_peak: { frame: string; function: string; a_bytes: number; b_bytes: number; change_bytes: number }[];
}

const signed = (v: number) => (v > 0 ? "+" : v < 0 ? "−" : "") + bytes(Math.abs(v));

/** The Diff tab's panel when both runs hold a memory snapshot: the peaks and the change per source line. */
export async function mountSnapshotDiff(host: HTMLElement, aRun: string, bRun: string, signal: AbortSignal, top = 15): Promise<void> {
  for (let tries = 0; tries < MAX_TRIES && !signal.aborted; tries++) {
    try {
      const res = await getJson<SnapshotChange>("memory_snapshot_compare", { a_run: aRun, b_run: bRun }, signal);
      if (signal.aborted || res.message) return replace(host);
      const pa = res.peak_allocated_bytes, pr = res.peak_reserved_bytes;
      const rows = res.at_peak.slice(0, top).map((r) =>
        h("tr", { attrs: { title: r.frame } }, h("td", { class: "cell-name", text: shortFrame(r.frame) }), h("td", { class: "cell-name", text: r.function }), h("td", { text: bytes(r.a_bytes) }), h("td", { text: bytes(r.b_bytes) }), h("td", { text: signed(r.change_bytes) })),
      );
      return replace(
        host,
        h(
          "section",
          { class: "panel snapshot-diff" },
          h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: `Memory snapshots · ${res.a} → ${res.b}` })),
          h("div", { class: "memory-facts" }, fact("Peak allocated", `${bytes(pa.a)} → ${bytes(pa.b)} (${signed(pa.change)})`), fact("Peak reserved", `${bytes(pr.a)} → ${bytes(pr.b)} (${signed(pr.change)})`)),
          h("table", { class: "ranks-table snapshot-table" }, h("thead", null, h("tr", null, ...["Source line", "Function", "A at peak", "B at peak", "Change"].map((t) => h("th", { text: t })))), h("tbody", null, ...rows)),
        ),
      );
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && err.stillLoading) {
        await sleep(RETRY_MS, signal);
        continue;
      }
      return replace(host, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }
}
