// Overview charts (ECharts): one stacked bar per step (GPU time by class, GPU idle by cause; click a bar to scope
// the other tabs to that step) and a trend across the spans of a worker.
import { BarChart, LineChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import type { OverviewCategory, OverviewHeadline, StepRow } from "../../api";
import { pct, time } from "../../format";
import { ChartBox, TOOLTIP_STYLE } from "../../components/charts";
import { KERNEL_CLASS_COLORS, OVERVIEW_COLORS, UNKNOWN_COLOR } from "../../palette";

echarts.use([BarChart, LineChart, GridComponent, TooltipComponent, LegendComponent, CanvasRenderer]);

/** Busy classes and idle causes in the shared palette (palette.ts). */
export const CATEGORY_COLORS: Readonly<Record<string, string>> = OVERVIEW_COLORS;

function axisTime(us: number): string {
  return us === 0 ? "0" : time(us);
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
    const name = spanNamer(steps.map((s) => s.span));
    const labels = steps.map((s) => (steps.some((o) => o.span !== s.span) ? `${s.step} · ${name(s.span)}` : s.step));
    this.el.dataset.series = used.map((c) => c.label).join("|"); // the legend's entries, readable without the canvas
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
          itemStyle: { color: CATEGORY_COLORS[c.key] ?? UNKNOWN_COLOR },
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

/** A worker as a rank: "rank 3" when its name carries one (worker3, rank_3), else its name. */
export function rankName(worker: string): string {
  const m = /(?:rank|worker)[_-]?(\d+)/i.exec(worker);
  return m ? `rank ${m[1]}` : worker.length > 16 ? worker.slice(0, 15) + "…" : worker;
}

/** How a chart names the spans of one list: by rank where they come from several workers (All ranks), with
 * the end of the timestamp only where a worker has several spans; by timestamp for one worker's spans. */
export function spanNamer(spans: string[]): (span: string) => string {
  const worker = (s: string) => s.split(".")[0];
  const perWorker = new Map<string, Set<string>>();
  for (const s of spans) perWorker.set(worker(s), (perWorker.get(worker(s)) ?? new Set()).add(s));
  if (perWorker.size < 2) return shortSpan;
  const several = [...perWorker.values()].some((set) => set.size > 1);
  return (s) => (several ? `${rankName(worker(s))} · ${shortSpan(s)}` : rankName(worker(s)));
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
        legend: { top: 0, type: "scroll", textStyle: { fontSize: 11 } },
        tooltip: { ...TOOLTIP_STYLE, trigger: "axis" },
        xAxis: { type: "category", data: spans.map((s) => spanNamer(spans.map((o) => o.span))(s.span)), axisLabel: { fontSize: 11 } },
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
            itemStyle: { color: KERNEL_CLASS_COLORS.GEMM },
            tooltip: { valueFormatter: (v: unknown) => pct(Number(v)) },
            data: spans.map((s) => s.gpu_busy_pct),
          },
          {
            name: "MFU",
            type: "line",
            yAxisIndex: 1,
            itemStyle: { color: "#D55E00" }, // Okabe & Ito's vermillion: apart from the blue GPU-busy line
            tooltip: { valueFormatter: (v: unknown) => (v == null ? "—" : pct(Number(v))) },
            data: spans.map((s) => s.mfu),
          },
        ],
      },
      true,
    );
  }
}
