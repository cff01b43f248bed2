// Kernel time per class on both sides of a diff, with the change: ECharts grouped horizontal bars.
import { BarChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import type { DiffClassRow } from "../../api";
import { h } from "../../dom";
import { pct, time } from "../../format";
import { signedTime } from "./format";
import { TOOLTIP_STYLE } from "../../components/charts";
import { initChart } from "../../theme";

echarts.use([BarChart, GridComponent, TooltipComponent, LegendComponent, CanvasRenderer]);

export const DIFF_COLORS = { a: "#9aa5b1", b: "#3b6ea5", faster: "#2f9e44", slower: "#c92a2a" };

const ROW_PX = 40;
const CHROME_PX = 70;

function axisTime(us: number): string {
  return us === 0 ? "0" : time(us);
}

/** Tooltip content as DOM nodes filled with textContent. */
function tooltipNode(c: DiffClassRow): HTMLElement {
  const row = (k: string, v: string, cls = "tt-val") => h("tr", null, h("td", { class: "tt-key", text: k }), h("td", { class: cls, text: v }));
  const kind = c.delta_us == null || c.delta_us === 0 ? "" : c.delta_us < 0 ? " delta-faster" : " delta-slower";
  return h(
    "div",
    { class: "tt" },
    h("div", { class: "tt-title", text: String(c.class) }),
    h(
      "table",
      null,
      row("A (baseline)", time(c.time_us_a)),
      row("B (compare)", time(c.time_us_b)),
      row("Δ B − A", signedTime(c.delta_us), "tt-val" + kind),
      row("Share of change", pct(c.share_of_change)),
    ),
  );
}

export class DiffChart {
  readonly el: HTMLElement;
  private chartBox = h("div", { class: "chart-box diff-chart-box" });
  private chart: echarts.ECharts;
  private resizeObserver: ResizeObserver;
  private classes: DiffClassRow[] = [];

  constructor() {
    this.el = h("div", { class: "diff-chart" }, this.chartBox);
    this.chart = initChart(this.chartBox, "diff-chart");
    this.resizeObserver = new ResizeObserver(() => this.chart.resize());
    this.resizeObserver.observe(this.chartBox);
  }

  setData(classes: DiffClassRow[], nameA: string, nameB: string): void {
    // Biggest class (on either side) at the top: ECharts draws the first category at the bottom.
    this.classes = [...classes].sort(
      (x, y) => Math.max(x.time_us_a ?? 0, x.time_us_b ?? 0) - Math.max(y.time_us_a ?? 0, y.time_us_b ?? 0),
    );
    this.chartBox.style.height = `${CHROME_PX + ROW_PX * Math.max(1, this.classes.length)}px`;
    this.chart.resize();
    const cats = this.classes.map((c) => String(c.class));
    const value = (v: number | null) => (v == null ? null : v);
    const bar = { type: "bar" as const, barGap: "10%", barCategoryGap: "28%", emphasis: { focus: "none" as const } };
    this.chart.setOption(
      {
        animation: false,
        textStyle: { fontFamily: "inherit" },
        grid: { left: 8, right: 28, top: 32, bottom: 28, containLabel: true },
        legend: {
          type: "scroll", // one line above the plot, never wrapped over it
          top: 0,
          left: 0,
          itemWidth: 12,
          itemHeight: 12,
          textStyle: { color: "#52606d", fontSize: 12 },
          data: [
            { name: "A", itemStyle: { color: DIFF_COLORS.a } },
            { name: "B", itemStyle: { color: DIFF_COLORS.b } },
            { name: "Δ B − A", itemStyle: { color: DIFF_COLORS.slower } },
          ],
          formatter: (n: string) => (n === "A" ? `A: ${nameA}` : n === "B" ? `B: ${nameB}` : "Δ B − A (green faster, red slower)"),
        },
        tooltip: {
          ...TOOLTIP_STYLE,
          trigger: "axis",
          axisPointer: { type: "shadow" },
          formatter: (params: unknown) => {
            const first = Array.isArray(params) ? params[0] : params;
            const idx = (first as { dataIndex?: number } | undefined)?.dataIndex;
            const c = typeof idx === "number" ? this.classes[idx] : undefined;
            return c ? tooltipNode(c) : "";
          },
        },
        xAxis: {
          type: "value",
          axisLabel: { formatter: axisTime, color: "#616e7c" },
          axisLine: { show: true, lineStyle: { color: "#9aa5b1" } },
          splitLine: { lineStyle: { color: "#eef0f3" } },
          name: "Kernel time per span",
          nameLocation: "middle",
          nameGap: 24,
          nameTextStyle: { color: "#52606d" },
        },
        yAxis: {
          type: "category",
          data: cats,
          axisTick: { show: false },
          axisLine: { lineStyle: { color: "#9aa5b1" } },
          axisLabel: { color: "#1f2933", fontSize: 12 },
        },
        series: [
          { ...bar, name: "A", color: DIFF_COLORS.a, data: this.classes.map((c) => value(c.time_us_a)) },
          { ...bar, name: "B", color: DIFF_COLORS.b, data: this.classes.map((c) => value(c.time_us_b)) },
          {
            ...bar,
            name: "Δ B − A",
            color: DIFF_COLORS.slower,
            data: this.classes.map((c) => ({
              value: value(c.delta_us),
              itemStyle: { color: (c.delta_us ?? 0) < 0 ? DIFF_COLORS.faster : DIFF_COLORS.slower, opacity: 0.85 },
            })),
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
