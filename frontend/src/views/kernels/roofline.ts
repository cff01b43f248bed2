// Log-log roofline chart (ECharts core, tree-shaken): one point per kernel, sized by its total time,
// under the memory roof (y = x * GB/s / 1000) and the compute roof (y = peak TFLOP/s).
import { LineChart, ScatterChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import type { Bound, RooflinePoint, RooflineResponse } from "../../api";
import { h, replace } from "../../dom";
import { gbps, pct, sig, time } from "../../format";
import { TOOLTIP_STYLE } from "../../components/charts";
import { initChart } from "../../theme";

echarts.use([ScatterChart, LineChart, GridComponent, TooltipComponent, LegendComponent, CanvasRenderer]);

export const COLORS: Record<NonNullable<Bound> | "roof" | "selected", string> = {
  compute: "#3b6ea5",
  memory: "#2a9d8f",
  communication: "#8e6bbf",
  unknown: "#9aa5b1",
  roof: "#52606d",
  selected: "#d9480f",
};
/** Points whose estimate is over the physical roof: drawn as warning triangles, in their own legend entry. */
const OVER_ROOF = { color: "#c92a2a", label: "Over the roof (estimate wrong)" } as const;

const SERIES: ReadonlyArray<readonly [NonNullable<Bound>, string]> = [
  ["compute", "Compute-bound (right of ridge)"],
  ["memory", "Memory-bound (left of ridge)"],
  ["unknown", "Unclassified"],
];

const MIN_SIZE = 5;
const MAX_SIZE = 34;
const MAX_TOOLTIP_NAME = 240;

interface Plotted {
  p: RooflinePoint;
  bound: Bound;
  size: number;
}

function pow10Floor(v: number): number {
  return Math.pow(10, Math.floor(Math.log10(v)));
}

function pow10Ceil(v: number): number {
  return Math.pow(10, Math.ceil(Math.log10(v)));
}

function axisLabel(v: number): string {
  if (v >= 1e6) return `${v / 1e6}M`;
  if (v >= 1e3) return `${v / 1e3}k`;
  return String(Number(v.toPrecision(3)));
}

/** A base-10 log axis of the roofline, named in the middle at `nameGap` px from the axis. */
function logAxis(name: string, nameGap: number, min: number, max: number) {
  return {
    type: "log",
    logBase: 10,
    min,
    max,
    name,
    nameLocation: "middle",
    nameGap,
    nameTextStyle: { color: "#52606d" },
    axisLabel: { formatter: axisLabel, color: "#616e7c" },
    axisLine: { lineStyle: { color: "#9aa5b1" } },
    splitLine: { show: true, lineStyle: { color: "#eef0f3" } },
  } as const;
}

function boundOf(p: RooflinePoint, ridge: number | null): NonNullable<Bound> {
  if (p.bound) return p.bound;
  if (ridge == null || p.intensity == null) return "unknown";
  return p.intensity >= ridge ? "compute" : "memory";
}

/** Tooltip content as DOM nodes filled with textContent: kernel names are never parsed as HTML. */
function tooltipNode(p: RooflinePoint, dram: number | null): HTMLElement {
  const name = p.name.length > MAX_TOOLTIP_NAME ? p.name.slice(0, MAX_TOOLTIP_NAME - 1) + "…" : p.name;
  const achievedGbps = p.gbps ?? (p.tflops != null && p.intensity ? (p.tflops * 1000) / p.intensity : null);
  const row = (k: string, v: string) => h("tr", null, h("td", { class: "tt-key", text: k }), h("td", { class: "tt-val", text: v }));
  return h(
    "div",
    { class: "tt" },
    h("div", { class: "tt-name", text: name }),
    h(
      "table",
      null,
      row("Time", `${time(p.total_us)} in ${p.count} call${p.count === 1 ? "" : "s"}`),
      row("TFLOP/s", sig(p.tflops)),
      row("GB/s", gbps(achievedGbps)),
      row("% of peak", pct(p.pct_peak)),
      dram != null && achievedGbps != null ? row("% of DRAM", pct(achievedGbps / dram)) : null,
      row("FLOP/byte", sig(p.intensity)),
      p.over_roof ? row("⚠ Over the roof", p.roof_cause || "the estimate implies more than the device can do") : null,
    ),
  );
}

export interface RooflineOptions {
  onSelect(name: string): void;
}

export class Roofline {
  readonly el: HTMLElement;
  private chartBox = h("div", { class: "chart-box" });
  private caption = h("div", { class: "chart-caption" });
  private chart: echarts.ECharts;
  private resizeObserver: ResizeObserver;
  private data: RooflineResponse | null = null;
  private plotted: Plotted[] = [];
  private selected: string | null = null;

  constructor(private opts: RooflineOptions) {
    this.el = h("div", { class: "roofline" }, this.chartBox, this.caption);
    this.chart = initChart(this.chartBox, "roofline");
    this.chart.on("click", (params) => {
      const item = params.data as { idx?: number } | undefined;
      if (item && typeof item.idx === "number") {
        const pt = this.plotted[item.idx];
        if (pt) this.opts.onSelect(pt.p.name);
      }
    });
    this.resizeObserver = new ResizeObserver(() => this.chart.resize());
    this.resizeObserver.observe(this.chartBox);
  }

  setData(data: RooflineResponse): void {
    this.data = data;
    const ridge = data.ridge;
    const usable = data.points.filter((p) => p.intensity != null && p.tflops != null && p.intensity > 0 && p.tflops > 0);
    const maxUs = Math.max(1e-9, ...usable.map((p) => p.total_us));
    this.plotted = usable.map((p) => ({
      p,
      bound: boundOf(p, ridge),
      size: MIN_SIZE + (MAX_SIZE - MIN_SIZE) * Math.sqrt(Math.max(0, p.total_us) / maxUs),
    }));
    const left = data.points.length - usable.length;
    const parts = [
      data.peak_tflops != null ? `${data.dtype} peak ${sig(data.peak_tflops)} TFLOP/s` : `no ${data.dtype} peak known`,
      data.dram_gbps != null ? `DRAM ${gbps(data.dram_gbps)}` : "no DRAM bandwidth known",
      data.ridge != null ? `ridge at ${sig(data.ridge)} FLOP/byte` : null,
      `${usable.length} kernel${usable.length === 1 ? "" : "s"} plotted, sized by total time`,
      left > 0 ? `${left} without both a FLOP and a byte estimate left out` : null,
    ].filter((x): x is string => x !== null);
    replace(this.caption, parts.join(" · "));
    this.draw();
  }

  select(name: string | null): void {
    this.selected = name;
    if (this.data) this.draw();
  }

  private draw(): void {
    const data = this.data;
    if (!data) return;
    const peak = data.peak_tflops;
    const bw = data.dram_gbps != null ? data.dram_gbps / 1000 : null; // TFLOP/s per FLOP/byte
    const xs = this.plotted.map((d) => d.p.intensity as number);
    const ys = this.plotted.map((d) => d.p.tflops as number);
    if (data.ridge != null) xs.push(data.ridge);
    if (peak != null) ys.push(peak);
    const xMin = pow10Floor(Math.min(...xs, 1) / 2);
    const xMax = pow10Ceil(Math.max(...xs, 10) * 2);
    const yMin = pow10Floor(Math.min(...ys, 1) / 2);
    const yMax = pow10Ceil(Math.max(...ys, 1) * 2);

    const roof: [number, number][] = [];
    if (bw != null && peak != null) {
      const ridge = peak / bw;
      roof.push([xMin, xMin * bw], [ridge, peak], [xMax, peak]);
    } else if (bw != null) {
      roof.push([xMin, xMin * bw], [xMax, xMax * bw]);
    } else if (peak != null) {
      roof.push([xMin, peak], [xMax, peak]);
    }
    // Clip the memory roof where it enters the plot from below.
    if (roof.length && bw != null && roof[0][1] < yMin) roof[0] = [yMin / bw, yMin];

    const series: echarts.EChartsCoreOption[] = SERIES.map(([bound, label]) => ({
      type: "scatter",
      name: label,
      color: COLORS[bound],
      itemStyle: { opacity: 0.75, borderColor: "#ffffff", borderWidth: 0.5 },
      emphasis: { itemStyle: { opacity: 1, borderColor: "#1f2933", borderWidth: 1 } },
      data: this.plotted
        .map((d, idx) => ({ d, idx }))
        .filter(({ d }) => d.bound === bound && !d.p.over_roof)
        .map(({ d, idx }) => ({ value: [d.p.intensity, d.p.tflops], symbolSize: d.size, idx })),
    }));
    series.push({
      type: "scatter",
      name: OVER_ROOF.label,
      color: OVER_ROOF.color,
      symbol: "triangle",
      itemStyle: { opacity: 0.85, borderColor: "#ffffff", borderWidth: 0.5 },
      data: this.plotted
        .map((d, idx) => ({ d, idx }))
        .filter(({ d }) => d.p.over_roof)
        .map(({ d, idx }) => ({ value: [d.p.intensity, d.p.tflops], symbolSize: d.size, idx })),
    });
    series.push({
      type: "line",
      name: "Roof",
      color: COLORS.roof,
      silent: true,
      symbol: "none",
      lineStyle: { width: 1.5, color: COLORS.roof },
      tooltip: { show: false },
      data: roof,
      z: 1,
    });
    const sel = this.selected == null ? -1 : this.plotted.findIndex((d) => d.p.name === this.selected);
    if (sel >= 0) {
      const d = this.plotted[sel];
      series.push({
        type: "scatter",
        name: "Selected",
        silent: true,
        tooltip: { show: false },
        itemStyle: { color: "rgba(0,0,0,0)", borderColor: COLORS.selected, borderWidth: 2.5 },
        data: [{ value: [d.p.intensity, d.p.tflops], symbolSize: d.size + 8 }],
        z: 5,
      });
    }

    const dram = data.dram_gbps;
    this.chart.setOption(
      {
        animation: false,
        textStyle: { fontFamily: "inherit" },
        grid: { left: 64, right: 24, top: 36, bottom: 52 },
        legend: {
          type: "scroll", // one line above the plot, never wrapped over it
          top: 4,
          right: 16,
          itemWidth: 12,
          itemHeight: 12,
          data: [...SERIES.map(([, label]) => label), ...(this.plotted.some((d) => d.p.over_roof) ? [OVER_ROOF.label] : []), "Roof"],
          textStyle: { color: "#52606d", fontSize: 12 },
        },
        tooltip: {
          ...TOOLTIP_STYLE,
          trigger: "item",
          formatter: (params: unknown) => {
            const item = (params as { data?: { idx?: number } }).data;
            const pt = item && typeof item.idx === "number" ? this.plotted[item.idx] : undefined;
            return pt ? tooltipNode(pt.p, dram) : "";
          },
        },
        xAxis: logAxis("Arithmetic intensity (FLOP/byte)", 30, xMin, xMax),
        yAxis: logAxis("Achieved TFLOP/s", 46, yMin, yMax),
        series,
      },
      { notMerge: true },
    );
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.chart.dispose();
  }
}
