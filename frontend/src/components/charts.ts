// What every ECharts chart shares: the tooltip's look and a box that owns its chart and follows its size.
import type * as echarts from "echarts/core";
import { h } from "../dom";
import { initChart } from "../theme";

/** The look of every chart tooltip (content is built as DOM nodes by each chart's formatter, never as HTML text). */
export const TOOLTIP_STYLE = {
  confine: true,
  backgroundColor: "#ffffff",
  borderColor: "#cbd2d9",
  textStyle: { color: "#1f2933", fontSize: 12 },
  extraCssText: "max-width: 460px; white-space: normal; box-shadow: 0 2px 8px rgba(31,41,51,0.15);",
} as const;

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
