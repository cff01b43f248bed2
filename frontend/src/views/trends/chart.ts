// The Trends view's chart: each run's median of the metric in recording order, with its noise band, the runs
// marked as a regression (red) or an improvement (green). ECharts line + error band.
import { LineChart } from "echarts/charts";
import { GridComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { h } from "../../dom";
import { initChart } from "../../theme";
import { TOOLTIP_STYLE } from "../../components/charts";
import type { TrendRun } from "./api";

echarts.use([LineChart, GridComponent, TooltipComponent, CanvasRenderer]);

const COLORS = { none: "#3b6ea5", regression: "#c92a2a", improvement: "#2f9e44", band: "#9aa5b1" };

function fmt(v: number | null): string {
  return v === null || !Number.isFinite(v) ? "—" : v.toPrecision(4);
}

function tooltipNode(r: TrendRun, unit: string): HTMLElement {
  const row = (k: string, v: string) => h("tr", null, h("td", { class: "tt-key", text: k }), h("td", { class: "tt-val", text: v }));
  return h(
    "div",
    { class: "tt" },
    h("div", { class: "tt-title", text: r.run }),
    h(
      "table",
      null,
      row("median", `${fmt(r.value)} ${unit}`),
      row("noise band", r.value_band === null ? "—" : `±${fmt(r.value_band)} ${unit}`),
      row("steps kept", `${r.steps - r.left_out} of ${r.steps}`),
      row("change", r.change),
    ),
  );
}

export class TrendChart {
  readonly el: HTMLElement;
  private box = h("div", { class: "chart-box trend-chart-box" });
  private chart: echarts.ECharts;
  private resizeObserver: ResizeObserver;

  constructor() {
    this.el = h("div", { class: "trend-chart" }, this.box);
    this.chart = initChart(this.box, "trend-chart");
    this.resizeObserver = new ResizeObserver(() => this.chart.resize());
    this.resizeObserver.observe(this.box);
  }

  setData(runs: TrendRun[], label: string, unit: string): void {
    const names = runs.map((r) => r.run);
    const low = runs.map((r) => (r.value === null ? null : r.value - (r.value_band ?? 0)));
    const width = runs.map((r) => (r.value === null ? null : 2 * (r.value_band ?? 0)));
    this.chart.setOption(
      {
        animation: false,
        textStyle: { fontFamily: "inherit" },
        grid: { left: 8, right: 24, top: 40, bottom: 8, containLabel: true },
        tooltip: {
          ...TOOLTIP_STYLE,
          trigger: "axis",
          formatter: (params: unknown) => {
            const first = Array.isArray(params) ? params[0] : params;
            const idx = (first as { dataIndex?: number } | undefined)?.dataIndex;
            return typeof idx === "number" && runs[idx] ? tooltipNode(runs[idx], unit) : "";
          },
        },
        xAxis: { type: "category", data: names, axisLabel: { color: "#616e7c", hideOverlap: true } },
        yAxis: {
          type: "value",
          name: `${label} (${unit})`,
          nameTextStyle: { color: "#52606d", align: "left" },
          axisLabel: { color: "#616e7c" },
          splitLine: { lineStyle: { color: "#eef0f3" } },
          scale: true,
        },
        series: [
          { type: "line", stack: "band", data: low, lineStyle: { opacity: 0 }, symbol: "none", silent: true },
          {
            type: "line",
            stack: "band",
            data: width,
            lineStyle: { opacity: 0 },
            symbol: "none",
            areaStyle: { color: COLORS.band, opacity: 0.25 },
            silent: true,
          },
          {
            type: "line",
            name: label,
            data: runs.map((r) => ({ value: r.value, itemStyle: { color: COLORS[r.change] } })),
            color: COLORS.none,
            symbolSize: (_: unknown, p: { dataIndex: number }) => (runs[p.dataIndex]?.change === "none" ? 6 : 11),
          },
        ],
      },
      { notMerge: true },
    );
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.chart.dispose();
  }
}
