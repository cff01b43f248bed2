// Overview charts (ECharts): one stacked bar per step (GPU time by class, GPU idle by cause; click a bar to scope
// the other tabs to that step) and a trend across the spans of a worker.
import { BarChart, LineChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import type { OverviewCategory, OverviewHeadline, StepRow } from "../api";
import { h } from "../dom";
import { pct, time } from "../format";
import { TOOLTIP_STYLE } from "./roofline";
import { initChart } from "../theme";

echarts.use([BarChart, LineChart, GridComponent, TooltipComponent, LegendComponent, CanvasRenderer]);

/** Busy classes in blues/greens/purples, idle causes in warm colours and greys. */
export const CATEGORY_COLORS: Record<string, string> = {
  gemm: "#1f5f99",
  attention: "#6741d9",
  convolution: "#3b8bd4",
  elementwise: "#2f9e44",
  reduction: "#74b816",
  other_kernels: "#82c91e",
  communication: "#c2255c",
  memcpy: "#0ca678",
  memset: "#66d9e8",
  data_loading: "#f08c00",
  sync: "#e03131",
  launch_bound: "#f59f00",
  host_bound: "#ffa94d",
  idle_other: "#ced4da",
};

function axisTime(us: number): string {
  return us === 0 ? "0" : time(us);
}

/** A chart that owns its box and follows its size. */
export class ChartBox {
  readonly el: HTMLElement;
  protected chart: echarts.ECharts;
  private observer: ResizeObserver;

  constructor(cls: string) {
    this.el = h("div", { class: `chart-box ${cls}` });
    this.chart = initChart(this.el, cls);
    this.observer = new ResizeObserver(() => this.chart.resize());
    this.observer.observe(this.el);
  }

  destroy(): void {
    this.observer.disconnect();
    this.chart.dispose();
  }
}

export class StepChart extends ChartBox {
  constructor(private onStep: (index: number) => void) {
    super("ov-step-chart");
    this.chart.on("click", (p) => {
      if (typeof p.dataIndex === "number") this.onStep(p.dataIndex);
    });
  }

  setData(steps: StepRow[], categories: OverviewCategory[]): void {
    const used = categories.filter((c) => steps.some((s) => Number(s[`${c.key}_us`]) > 0));
    const labels = steps.map((s) => (steps.some((o) => o.span !== s.span) ? `${s.step} · ${shortSpan(s.span)}` : s.step));
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 70, right: 16, top: 48, bottom: 40 },
        legend: { top: 0, type: "scroll", textStyle: { fontSize: 11 } },
        tooltip: {
          ...TOOLTIP_STYLE,
          trigger: "axis",
          axisPointer: { type: "shadow" },
          valueFormatter: (v: unknown) => time(Number(v)),
        },
        xAxis: { type: "category", data: labels, axisLabel: { fontSize: 11 } },
        yAxis: { type: "value", axisLabel: { formatter: axisTime }, name: "wall time", nameTextStyle: { fontSize: 11 } },
        series: used.map((c) => ({
          name: c.label,
          type: "bar",
          stack: "step",
          barMaxWidth: 48,
          itemStyle: { color: CATEGORY_COLORS[c.key] ?? "#adb5bd" },
          emphasis: { focus: "series" },
          cursor: "pointer",
          data: steps.map((s) => Number(s[`${c.key}_us`]) || 0),
        })),
      },
      true,
    );
  }
}

function shortSpan(span: string): string {
  const parts = span.split(".");
  return parts.length > 2 ? parts[1].slice(-6) : span.slice(0, 12);
}

/** Mean step time (bars) and GPU busy % / MFU (lines) per span: did a change help over the run? */
export class TrendChart extends ChartBox {
  constructor() {
    super("ov-trend-chart");
  }

  setData(spans: (OverviewHeadline & { span: string })[]): void {
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 70, right: 60, top: 36, bottom: 40 },
        legend: { top: 0, textStyle: { fontSize: 11 } },
        tooltip: { ...TOOLTIP_STYLE, trigger: "axis" },
        xAxis: { type: "category", data: spans.map((s) => shortSpan(s.span)), axisLabel: { fontSize: 11 } },
        yAxis: [
          { type: "value", axisLabel: { formatter: axisTime }, name: "mean step", nameTextStyle: { fontSize: 11 } },
          { type: "value", min: 0, max: 1, axisLabel: { formatter: (v: number) => pct(v) } },
        ],
        series: [
          {
            name: "mean step time",
            type: "bar",
            barMaxWidth: 40,
            itemStyle: { color: "#9aa5b1" },
            tooltip: { valueFormatter: (v: unknown) => time(Number(v)) },
            data: spans.map((s) => s.step_time_us?.mean ?? null),
          },
          {
            name: "GPU busy",
            type: "line",
            yAxisIndex: 1,
            itemStyle: { color: "#1f5f99" },
            tooltip: { valueFormatter: (v: unknown) => pct(Number(v)) },
            data: spans.map((s) => s.gpu_busy_pct),
          },
          {
            name: "MFU",
            type: "line",
            yAxisIndex: 1,
            itemStyle: { color: "#c2255c" },
            tooltip: { valueFormatter: (v: unknown) => (v == null ? "—" : pct(Number(v))) },
            data: spans.map((s) => s.mfu),
          },
        ],
      },
      true,
    );
  }
}
