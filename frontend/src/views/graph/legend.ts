// The colour legend of the Execution graph, one per "colour by" mode: the fill ramp with its ends, the "no data"
// fill, and what the borders mean.
import { h } from "../../dom";
import { time } from "../../format";
import { CRITICAL, ramp, unknownFill, type ColorBy } from "./canvas";
import type { Theme } from "./theme";

const TITLES: Record<ColorBy, string> = {
  gpu_us: "GPU time (log scale)",
  cpu_us: "CPU time (log scale)",
  efficiency: "Efficiency (time-weighted)",
};

function swatch(cls: string, title: string, style: Partial<Record<"background" | "color", string>> = {}): HTMLElement {
  return h("span", { class: "graph-legend-item" }, h("span", { class: `graph-swatch ${cls}`, style }), title);
}

/** The legend for colouring by `by`, whose largest value in the view is `max` (time modes). */
export function graphLegend(by: ColorBy, max: number, theme: Theme): HTMLElement {
  const eff = by === "efficiency";
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => `${ramp(t, eff, theme)} ${t * 100}%`).join(", ");
  if (!eff && max <= 0) {
    return h("div", { class: "graph-legend" }, h("span", { class: "graph-legend-title", text: `${TITLES[by]}: none in this view` }));
  }
  const [lo, hi] = eff ? ["0 %", "100 %"] : ["0", time(max)];
  return h(
    "div",
    { class: "graph-legend", attrs: { "aria-label": "Colour legend" } },
    h(
      "div",
      { class: "graph-legend-ramp" },
      h("span", { class: "graph-legend-title", text: TITLES[by] }),
      h("span", { text: lo }),
      h("span", { class: "graph-legend-bar", style: { background: `linear-gradient(to right, ${stops})` } }),
      h("span", { text: hi }),
    ),
    h(
      "div",
      { class: "graph-legend-items" },
      swatch("", eff ? "no rated kernel" : "none", { background: unknownFill(theme) }),
      swatch("graph-swatch-critical", "critical path: its ops outlined", { color: CRITICAL }),
      swatch("graph-swatch-expandable", "expandable"),
      swatch("graph-swatch-group", "op group"),
    ),
  );
}
