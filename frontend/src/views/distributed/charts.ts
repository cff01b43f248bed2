// Charts of the Distributed tab: each rank's mean step split into its parts (stacked bars) and a ranks x steps
// heatmap of one metric. Both draw at most one page of ranks; the tab pages through the rest.
import { BarChart, HeatmapChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent, VisualMapComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { time } from "../../format";
import { ChartBox } from "../../components/charts";
import { IDLE_CAUSE_COLORS, KERNEL_CLASS_COLORS } from "../../palette";
import { IDLE_CAUSES, type Heatmap, type RankRow } from "./api";
import { TOOLTIP_STYLE } from "../../components/charts";

echarts.use([BarChart, HeatmapChart, GridComponent, LegendComponent, TooltipComponent, VisualMapComponent, CanvasRenderer]);

const OVERLAPPED = "Communication (overlapped, under compute)";
type Part = readonly [string, string, (r: RankRow) => number | null];

/** The stacked parts, summing to the step: busy time, then idle by the Overview's causes in its colours (a
 * CPU-only trace's idle has no cause: one grey part). Overlapped communication ran under compute, so it is a thin
 * bar of its own beside the stack, not part of it. */
const PARTS: ReadonlyArray<Part> = [
  ["Compute", KERNEL_CLASS_COLORS.GEMM, (r) => r.compute_us],
  [OVERLAPPED, "#FFAABB", (r) => r.comm_overlapped_us], // Tol's light pink: communication, lighter
  ["Communication (exposed)", KERNEL_CLASS_COLORS.communication, (r) => r.comm_exposed_us],
  ["Memcpy / memset", KERNEL_CLASS_COLORS.memcpy, (r) => r.memcpy_us],
  ...IDLE_CAUSES.map(([m, label, key]): Part => [label, IDLE_CAUSE_COLORS[key], (r) => r[`${m}_us`]]),
];

/** A CPU-only run's parts (analysis/overview/cpu.py): what the CPU did, never GPU idle causes. */
const CPU_OVERLAPPED = "Collectives (overlapped, under CPU ops)";
const CPU_PARTS: ReadonlyArray<Part> = [
  ["CPU ops (and data loading)", KERNEL_CLASS_COLORS["CPU op"], (r) => r.compute_us],
  [CPU_OVERLAPPED, "#FFAABB", (r) => r.comm_overlapped_us],
  ["Collectives (exposed)", KERNEL_CLASS_COLORS.communication, (r) => r.comm_exposed_us],
  ["Idle threads", "#DDDDDD", (r) => r.idle_us],
];

/** No rank has a GPU idle cause: a CPU-only run. */
export function cpuOnlyRanks(rows: RankRow[]): boolean {
  return rows.length > 0 && rows.every((r) => r.idle_host_bound_us == null);
}

/** A chart box whose height follows the number of ranks it draws. */
class Chart extends ChartBox {
  protected height(px: number): void {
    this.el.style.height = `${px}px`;
    this.chart.resize();
  }
}

/** Mean step per rank, stacked: compute, overlapped and exposed communication, memcpy, idle by cause. */
export class RankBars extends Chart {
  constructor(private onRank: (rank: number) => void) {
    super("ranks-bars");
    this.chart.on("click", (p) => this.onRank(Number((p as { name: string }).name)));
  }

  setData(rows: RankRow[], stragglers: Set<number>): void {
    this.height(Math.max(160, Math.min(900, 18 * rows.length + 80)));
    const ranks = rows.map((r) => String(r.rank));
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 24, top: 32, bottom: 28, containLabel: true },
        // One scrolling line above the plot: a wrapped legend would run over rank 0's bar.
        legend: { top: 0, type: "scroll", textStyle: { fontSize: 11 } },
        tooltip: { ...TOOLTIP_STYLE, trigger: "axis", axisPointer: { type: "shadow" }, valueFormatter: (v: number) => time(v) },
        xAxis: { type: "value", axisLabel: { formatter: (v: number) => time(v) } },
        yAxis: {
          type: "category",
          inverse: true,
          data: ranks,
          axisLabel: { formatter: (r: string) => (stragglers.has(Number(r)) ? `{s|rank ${r} ⚑}` : `rank ${r}`), rich: { s: { color: "#c0392b", fontWeight: "bold" } } },
        },
        series: (cpuOnlyRanks(rows) ? CPU_PARTS : PARTS).map(([name, color, value]) => ({
          type: "bar",
          name,
          stack: name === OVERLAPPED || name === CPU_OVERLAPPED ? "overlap" : "step",
          itemStyle: { color },
          barMaxWidth: name === OVERLAPPED || name === CPU_OVERLAPPED ? 5 : 16,
          data: rows.map(value),
        })),
      },
      true,
    );
  }
}

/** Ranks x steps heatmap of one metric (microseconds). */
export class StepHeatmap extends Chart {
  constructor() {
    super("ranks-heatmap");
  }

  setData(map: Heatmap): void {
    this.height(Math.max(160, Math.min(900, 16 * map.ranks.length + 90)));
    const data: [number, number, number | null][] = [];
    map.values.forEach((row, y) => row.forEach((v, x) => data.push([x, y, v])));
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 24, top: 8, bottom: 60, containLabel: true },
        tooltip: {
          ...TOOLTIP_STYLE,
          formatter: (p: { value: [number, number, number | null] }) => {
            const [x, y, v] = p.value;
            const median = map.median_per_step[x];
            return `rank ${map.ranks[y]}, step ${map.steps[x]}: ${time(v)} (median of all ranks ${time(median)})`;
          },
        },
        xAxis: { type: "category", data: map.steps.map(String), name: "step", nameLocation: "middle", nameGap: 22 },
        yAxis: { type: "category", inverse: true, data: map.ranks.map((r) => `rank ${r}`) },
        visualMap: {
          min: 0,
          max: map.max ?? 1,
          calculable: true,
          orient: "horizontal",
          left: "center",
          bottom: 0,
          itemHeight: 120,
          formatter: (v: number) => time(v),
          inRange: { color: ["#f4f7fb", "#8fb8de", "#3b6ea5", "#d9822b", "#c0392b"] },
        },
        series: [{ type: "heatmap", data, emphasis: { itemStyle: { borderColor: "#333", borderWidth: 1 } } }],
      },
      true,
    );
  }
}
