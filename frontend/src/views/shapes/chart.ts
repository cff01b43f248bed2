// The shape distribution of one op: a horizontal bar per input-shape signature, length = calls.
import { BarChart } from "echarts/charts";
import { GridComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { h } from "../../dom";
import { count, pct, sig, time } from "../../format";
import type { DistributionResponse, ShapeShare } from "./api";
import { TOOLTIP_STYLE } from "../../components/charts";
import { initChart } from "../../theme";

echarts.use([BarChart, GridComponent, TooltipComponent, CanvasRenderer]);

const MAX_BARS = 30;
const MAX_LABEL = 48;

function shorten(text: string): string {
  return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text;
}

function tooltip(s: ShapeShare): HTMLElement {
  const line = (label: string, value: string) => h("div", null, h("b", { text: `${label}: ` }), value);
  return h(
    "div",
    null,
    h("div", { class: "tt-name", text: s.shape || "(no inputs)" }),
    line("calls", `${count(s.calls)} (${pct(s.share)})`),
    line("CPU time", time(s.cpu_us)),
    line("device time", time(s.device_us)),
    line("TFLOP/s", sig(s.tflops)),
    line("% of peak", pct(s.pct_peak)),
  );
}

export class ShapeChart {
  readonly el: HTMLElement;
  private box = h("div", { class: "chart-box shapes-chart" });
  private caption = h("div", { class: "chart-caption" });
  private chart: echarts.ECharts;
  private observer: ResizeObserver;

  constructor() {
    this.el = h("div", { class: "shape-distribution" }, this.box, this.caption);
    this.chart = initChart(this.box, "shapes-chart");
    this.observer = new ResizeObserver(() => this.chart.resize());
    this.observer.observe(this.box);
  }

  setData(data: DistributionResponse): void {
    const shown = data.shapes.slice(0, MAX_BARS).reverse(); // most calls at the top
    this.box.style.height = `${Math.max(140, 30 * shown.length + 60)}px`; // a bar's height, not a fixed box
    this.chart.resize();
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 24, top: 8, bottom: 36, containLabel: true },
        tooltip: { ...TOOLTIP_STYLE, trigger: "item", formatter: (p: { dataIndex: number }) => tooltip(shown[p.dataIndex]) },
        xAxis: { type: "value", name: "calls", nameLocation: "middle", nameGap: 24, minInterval: 1 },
        yAxis: { type: "category", data: shown.map((s) => shorten(s.shape || "(no inputs)")) },
        series: [{ type: "bar", data: shown.map((s) => s.calls), itemStyle: { color: "#3b6ea5" }, barMaxWidth: 22 }],
      },
      true,
    );
    const more = data.shapes.length - shown.length;
    this.caption.textContent =
      `${data.op}: ${count(data.shapes.length)} input-shape signature${data.shapes.length === 1 ? "" : "s"} over ` +
      `${count(data.total_calls)} calls` + (more > 0 ? ` (the ${MAX_BARS} most called shown)` : "");
  }

  destroy(): void {
    this.observer.disconnect();
    this.chart.dispose();
  }
}
