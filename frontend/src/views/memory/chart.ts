// The memory curve of one device: allocated, reserved and fragmentation (reserved - allocated) over the span, steps
// as vertical lines, the peak marked, an op's allocations as points. The server reduces each curve to first / min /
// max / last per pixel; drawing those four points per pixel gives the exact step line at this width. Zooming
// fetches the zoomed window again at full resolution and splices it into the overview.
import { LineChart, ScatterChart, type LineSeriesOption, type ScatterSeriesOption } from "echarts/charts";
import { DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, MarkPointComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { h } from "../../dom";
import { bytes, sig } from "../../format";
import type { AllocationRow, MemoryCurve, MemoryPeak, MemoryStep, PixelSeries } from "./api";
import { TOOLTIP_STYLE } from "../../components/charts";
import { initChart } from "../../theme";

echarts.use([LineChart, ScatterChart, DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, MarkPointComponent, TooltipComponent, CanvasRenderer]);

type Point = [number, number];
const SERIES = [
  ["allocated", "Allocated", "#3b6ea5"],
  ["reserved", "Reserved", "#9aa5b1"],
  ["fragmentation", "Fragmentation (reserved − allocated)", "#d9822b"],
] as const;

/** The four points of each pixel (first, min, max, last, in the order that draws the step line), times in ms. */
export function pixelPoints(t_us: number[], s: PixelSeries, t0: number): Point[] {
  const out: Point[] = [];
  t_us.forEach((t, i) => {
    const x = (t - t0) / 1000;
    const first = s.first[i], lo = s.min[i], hi = s.max[i], last = s.last[i];
    if (first == null || lo == null || hi == null || last == null) return;
    const rising = last >= first;
    out.push([x, first], [x, rising ? lo : hi], [x, rising ? hi : lo], [x, last]);
  });
  return out;
}

interface TipParam {
  seriesName: string;
  value: Point;
  color: string;
}

/** One line per series at the pointer: its level at the end of the pixel, and the range within the pixel. */
function axisTooltip(params: TipParam[]): HTMLElement {
  const bySeries = new Map<string, { color: string; values: number[] }>();
  for (const p of params) {
    const entry = bySeries.get(p.seriesName) ?? { color: p.color, values: [] };
    entry.values.push(p.value[1]);
    bySeries.set(p.seriesName, entry);
  }
  const lines = [...bySeries].map(([name, { color, values }]) => {
    const lo = Math.min(...values), hi = Math.max(...values);
    const range = lo === hi ? "" : ` (${bytes(lo)} – ${bytes(hi)} within this pixel)`;
    return h("div", null, h("span", { class: "tt-dot", attrs: { style: `color:${color}` }, text: "● " }), `${name}: `, h("b", { text: bytes(values[values.length - 1]) }), range);
  });
  const t = params.length ? params[0].value[0] : 0;
  return h("div", null, h("div", { class: "tt-name", text: `${sig(t)} ms from the span start` }), ...lines);
}

export interface ChartData {
  t0: number; // span start, absolute trace µs (x = 0)
  overview: MemoryCurve;
  steps: MemoryStep[];
  peak: MemoryPeak | null;
}

export class MemoryChart {
  readonly el: HTMLElement;
  private box = h("div", { class: "chart-box memory-chart" });
  private caption = h("div", { class: "chart-caption" });
  private chart: echarts.ECharts;
  private observer: ResizeObserver;
  private data: ChartData | null = null;
  private detail: MemoryCurve | null = null;
  private marks: { label: string; points: Point[] } | null = null;
  private zoomTimer: number | undefined;

  /** `onZoom(range)` asks for the curve of a window (absolute µs), or null when zoomed out. */
  constructor(private onZoom: (range: [number, number] | null) => void) {
    this.el = h("div", { class: "memory-curve" }, this.box, this.caption);
    this.chart = initChart(this.box, "memory-chart");
    this.observer = new ResizeObserver(() => this.chart.resize());
    this.observer.observe(this.box);
    this.chart.on("datazoom", () => {
      window.clearTimeout(this.zoomTimer);
      this.zoomTimer = window.setTimeout(() => this.zoomed(), 250);
    });
  }

  /** Width in pixels the server should reduce a curve to. */
  get width(): number {
    return Math.max(200, Math.min(4000, Math.round(this.box.clientWidth || 1000)));
  }

  setData(data: ChartData): void {
    this.data = data;
    this.detail = null;
    this.marks = null;
    this.render(true);
  }

  /** The zoomed window's curve at full resolution (null: back to the overview). */
  setDetail(curve: MemoryCurve | null): void {
    this.detail = curve;
    this.render(false);
  }

  /** Zoom the x axis to a window (absolute µs; null: the whole span); the chart then asks for its detail. */
  zoomTo(range: [number, number] | null): void {
    const d = this.data;
    if (!d) return;
    const ms = (us: number) => (us - d.t0) / 1000;
    if (range) this.chart.dispatchAction({ type: "dataZoom", startValue: ms(range[0]), endValue: ms(range[1]) });
    else if (this.detail) this.chart.dispatchAction({ type: "dataZoom", start: 0, end: 100 });
  }

  /** Points of one op's allocations on the curve (null clears them). */
  setMarks(label: string | null, rows: AllocationRow[]): void {
    this.marks = label == null ? null : { label, points: rows.filter((r) => r.t_ms != null && r.allocated_after != null).map((r) => [r.t_ms as number, r.allocated_after as number]) };
    this.render(false);
  }

  private zoomed(): void {
    if (!this.data) return;
    const opt = this.chart.getOption() as { dataZoom?: { start?: number; end?: number }[] };
    const z = opt.dataZoom?.[0];
    const span = this.data.overview.end_us - this.data.overview.start_us;
    if (!z || ((z.start ?? 0) <= 0 && (z.end ?? 100) >= 100)) {
      this.onZoom(null);
      return;
    }
    const lo = this.data.overview.start_us + (span * (z.start ?? 0)) / 100;
    const hi = this.data.overview.start_us + (span * (z.end ?? 100)) / 100;
    this.onZoom([lo, hi]);
  }

  private points(name: "allocated" | "reserved" | "fragmentation"): Point[] {
    const d = this.data as ChartData;
    const all = pixelPoints(d.overview.t_us, d.overview[name], d.t0);
    if (!this.detail) return all;
    const lo = (this.detail.start_us - d.t0) / 1000;
    const hi = (this.detail.end_us - d.t0) / 1000;
    const inside = pixelPoints(this.detail.t_us, this.detail[name], d.t0);
    return [...all.filter((p) => p[0] < lo), ...inside, ...all.filter((p) => p[0] > hi)];
  }

  private render(reset: boolean): void {
    const d = this.data;
    if (!d) return;
    const xMax = (d.overview.end_us - d.t0) / 1000;
    // Only the curves this device has: the CPU allocator reports no reserve, so a CPU run has no Reserved or
    // Fragmentation curve (nor a legend entry for them).
    const present = SERIES.map(([key, name, color]) => ({ key, name, color, data: this.points(key) })).filter((c) => c.key === "allocated" || c.data.length);
    this.box.dataset.series = present.map((c) => c.name).join("|"); // the legend's entries, readable without the canvas
    const series: (LineSeriesOption | ScatterSeriesOption)[] = present.map(({ key, name, color, data }) => ({
      type: "line",
      name,
      data,
      showSymbol: false,
      sampling: undefined,
      lineStyle: { width: key === "allocated" ? 2 : 1.2, color },
      itemStyle: { color },
      emphasis: { disabled: true },
      ...(key === "allocated" ? this.allocatedMarks(d) : {}),
    })) as LineSeriesOption[];
    if (this.marks) {
      series.push({ type: "scatter", name: this.marks.label, data: this.marks.points, symbolSize: 7, itemStyle: { color: "#c23030" }, z: 5 });
    }
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 24, top: 36, bottom: 64, containLabel: true },
        legend: { top: 0, type: "scroll", selected: { [SERIES[2][1]]: false } },
        tooltip: { ...TOOLTIP_STYLE, trigger: "axis", axisPointer: { type: "line" }, formatter: (p: unknown) => axisTooltip(p as TipParam[]) },
        xAxis: { type: "value", name: "ms from span start", nameLocation: "middle", nameGap: 26, min: 0, max: Math.max(xMax, 0.001), axisLabel: { formatter: (v: number) => sig(v) } },
        yAxis: { type: "value", axisLabel: { formatter: (v: number) => bytes(v) } },
        dataZoom: [
          { type: "inside", xAxisIndex: 0, filterMode: "none" },
          { type: "slider", xAxisIndex: 0, filterMode: "none", height: 18, bottom: 8 },
        ],
        series,
      },
      { notMerge: reset, replaceMerge: ["series"] },
    );
    const shown = this.detail ?? d.overview;
    this.caption.textContent =
      `${shown.events.toLocaleString("en-US")} events in view, drawn as first/min/max/last per pixel at ${shown.width} px · ` +
      `scroll or drag the slider to zoom (the window is fetched again at full detail)` +
      (this.marks ? ` · red: ${this.marks.points.length.toLocaleString("en-US")} allocations of ${this.marks.label}` : "");
  }

  private allocatedMarks(d: ChartData): Record<string, unknown> {
    const steps = d.steps.map((s) => ({ xAxis: (s.ts - d.t0) / 1000, label: { formatter: s.name.replace("ProfilerStep", "step "), position: "insideEndTop", fontSize: 10 } }));
    const peak = d.peak
      ? { data: [{ coord: [(d.peak.ts - d.t0) / 1000, d.peak.allocated], value: "peak" }], symbolSize: 36, label: { fontSize: 10 }, itemStyle: { color: "#c23030" } }
      : undefined;
    return {
      markLine: steps.length ? { silent: true, symbol: "none", lineStyle: { type: "dashed", color: "#7b8794", width: 1 }, label: { color: "#616e7c", textBorderWidth: 0 }, data: steps } : undefined,
      markPoint: peak,
    };
  }

  destroy(): void {
    window.clearTimeout(this.zoomTimer);
    this.observer.disconnect();
    this.chart.dispose();
  }
}
