// Light and dark theme. TensorBoard marks dark mode with a `dark-mode` class on its own <body> (the plugin runs in a
// same-origin iframe); without a reachable parent the OS setting decides. The choice is published as
// `data-theme="light"|"dark"` on <html> and a `gpuinsight-theme` window event: CSS reads the attribute through its
// variables, canvas-drawn views (ECharts here, Cytoscape and the Timeline elsewhere) read themeColor()/onTheme().
import * as echarts from "echarts/core";
import { chartPngButton } from "./export";

export type Theme = "light" | "dark";

export const THEME_EVENT = "gpuinsight-theme";

let theme: Theme = "light";
let started = false;

/** The parent TensorBoard page's <body>, when it is reachable (same origin) and is not this page. */
function parentBody(): HTMLElement | null {
  try {
    return window.parent !== window ? window.parent.document.body : null;
  } catch {
    return null; // cross-origin parent: the OS setting decides
  }
}

function detect(): Theme {
  const body = parentBody();
  if (body) return body.classList.contains("dark-mode") ? "dark" : "light";
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function apply(next: Theme): void {
  document.documentElement.setAttribute("data-theme", next);
  if (next === theme && started) return;
  theme = next;
  window.dispatchEvent(new CustomEvent(THEME_EVENT, { detail: { theme } }));
}

/** Set the theme now and follow TensorBoard's toggle and the OS setting from then on (once). */
export function startTheme(): void {
  if (started) return;
  theme = detect();
  document.documentElement.setAttribute("data-theme", theme);
  started = true;
  const update = () => apply(detect());
  const body = parentBody();
  if (body) new MutationObserver(update).observe(body, { attributes: true, attributeFilter: ["class"] });
  window.matchMedia?.("(prefers-color-scheme: dark)").addEventListener("change", update);
}

export function currentTheme(): Theme {
  return theme;
}

/** Call `fn` on every theme change; returns the unsubscribe function. */
export function onTheme(fn: (theme: Theme) => void): () => void {
  const listener = (e: Event) => fn((e as CustomEvent<{ theme: Theme }>).detail.theme);
  window.addEventListener(THEME_EVENT, listener);
  return () => window.removeEventListener(THEME_EVENT, listener);
}

// The neutral colours the charts use in light mode and their dark counterparts (one to one, and no colour in both
// columns, so a chart's colours can be mapped either way). Series colours are left as they are.
const PAIRS: ReadonlyArray<readonly [string, string]> = [
  ["#1f2933", "#e3e8ee"], // text
  ["#52606d", "#bcc5cf"], // axis names, titles
  ["#616e7c", "#a3aebb"], // axis labels, muted text
  ["#7b8794", "#8d99a6"],
  ["#9aa5b1", "#6c7885"], // axis lines
  ["#c0c6cc", "#59636e"],
  ["#c8ccd2", "#58636f"],
  ["#cbd2d9", "#47525e"], // borders
  ["#e4e7eb", "#2f3842"],
  ["#eef0f3", "#2c343d"], // split lines
  ["#f4f7fb", "#1e2a38"],
  ["#dfe8f3", "#22364d"], // alternating step bands
  ["#eef3f9", "#1b2a3b"],
  ["#f5f7fa", "#161b21"], // page background
  ["#ffffff", "#1c2229"], // panel background
  ["#fff", "#1c2229"],
];
const TO_DARK = new Map(PAIRS.map(([l, d]) => [l, d]));
const TO_LIGHT = new Map(PAIRS.filter(([l]) => l !== "#fff").map(([l, d]) => [d, l]));

/** A light-mode colour as the current theme shows it (any other value unchanged). */
export function themeColor(color: string, to: Theme = theme): string {
  const key = color.toLowerCase();
  return (to === "dark" ? TO_DARK.get(key) : TO_LIGHT.get(key)) ?? color;
}

/** `option` with its neutral colours mapped to theme `to`; big numeric data arrays are passed through untouched. */
export function recolor<T>(option: T, to: Theme): T {
  if (typeof option === "string") return themeColor(option, to) as T;
  if (Array.isArray(option)) {
    const first: unknown = option[0];
    if (first === null || typeof first !== "object" || Array.isArray(first)) {
      return (typeof first === "string" ? option.map((v) => recolor(v, to)) : option) as T;
    }
    return option.map((v) => recolor(v, to)) as T;
  }
  if (option === null || typeof option !== "object" || Object.getPrototypeOf(option) !== Object.prototype) return option;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(option)) out[k] = recolor(v, to);
  return out as T;
}

// ECharts themes: the light one is ECharts' default; the dark one sets the defaults the charts do not set themselves.
const text = (t: Theme) => themeColor("#1f2933", t);
function chartTheme(t: Theme): object {
  const axis = {
    axisLine: { lineStyle: { color: themeColor("#9aa5b1", t) } },
    axisTick: { lineStyle: { color: themeColor("#9aa5b1", t) } },
    axisLabel: { color: themeColor("#616e7c", t) },
    splitLine: { lineStyle: { color: themeColor("#eef0f3", t) } },
    nameTextStyle: { color: themeColor("#52606d", t) },
  };
  return {
    backgroundColor: "transparent",
    textStyle: { color: text(t) },
    legend: { textStyle: { color: text(t) }, pageTextStyle: { color: text(t) } },
    tooltip: {
      backgroundColor: themeColor("#ffffff", t),
      borderColor: themeColor("#cbd2d9", t),
      textStyle: { color: text(t) },
    },
    categoryAxis: axis,
    valueAxis: axis,
    logAxis: axis,
    timeAxis: axis,
    dataZoom: { textStyle: { color: themeColor("#616e7c", t) }, borderColor: themeColor("#cbd2d9", t) },
    visualMap: { textStyle: { color: text(t) } },
  };
}
echarts.registerTheme("gi-light", chartTheme("light"));
echarts.registerTheme("gi-dark", chartTheme("dark"));

type SetOption = (option: echarts.EChartsCoreOption, opts?: unknown, lazy?: boolean) => void;

/**
 * `echarts.init` for every chart of the plugin: the chart follows the theme (its neutral colours are mapped on each
 * setOption and again on a theme change) and gets a PNG export button named after `name`.
 */
export function initChart(el: HTMLElement, name: string): echarts.ECharts {
  const chart = echarts.init(el, `gi-${theme}`, { renderer: "canvas" });
  const raw = chart.setOption.bind(chart) as SetOption;
  (chart as unknown as { setOption: SetOption }).setOption = (option, opts, lazy) => raw(recolor(option, theme), opts, lazy);
  const off = onTheme((t) => {
    if (chart.isDisposed()) return off();
    const option = chart.getOption() as echarts.EChartsCoreOption | undefined;
    chart.setTheme(`gi-${t}`);
    if (option) raw(recolor(option, t), { notMerge: true });
  });
  el.classList.add("gi-chart"); // positions the PNG button over the chart
  el.appendChild(chartPngButton(chart, name));
  // End-to-end tests read the chart's layout (legend and plot rectangles) through its element.
  Object.defineProperty(el, "chart", { value: chart, configurable: true });
  return chart;
}
