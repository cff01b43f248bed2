// Trends tab: every run of the logdir in recording order, each with its median step time, noise band, MFU and
// class split, marked regression / improvement / none against the runs before it (the server's rule, shown under
// the table), with the kernels behind each marked change. Everything comes from the runs' stored summaries.
import { isAbort, type Selection } from "../../api";
import { ms } from "../diff/verdict";
import { emptyState, loadingState, requestErrorState } from "../../components/states";
import { fetchTrend, type TrendResponse, type TrendRun } from "./api";
import { TrendChart } from "./chart";
import { field, h, middleEllipsis, replace, select } from "../../dom";
import { pct } from "../../format";
import { tabLink, writeTabLink } from "../../deeplink";
import type { TabDef, TabView } from "../types";

const METRICS: ReadonlyArray<readonly [string, string, string]> = [
  ["step", "Step time", "ms"],
  ["kernel", "GPU kernel time per step", "ms"],
  ["mfu", "MFU", "%"],
  ["class:gemm", "GEMM time per step", "ms"],
  ["class:attention", "Attention time per step", "ms"],
  ["class:elementwise", "Elementwise time per step", "ms"],
  ["class:communication", "Exposed communication per step", "ms"],
  ["class:data_loading", "Data-loading idle per step", "ms"],
];
const RETRY_MS = 3000;

function classSplit(r: TrendRun): string {
  const parts = Object.entries(r.classes).sort((a, b) => b[1] - a[1]).slice(0, 3);
  return parts.length ? parts.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(" · ") : "no GPU activity";
}

function changeTag(r: TrendRun): HTMLElement {
  return h("span", { class: `tag trend-change trend-${r.change}`, text: r.change, title: r.why });
}

function runRows(r: TrendRun): HTMLElement[] {
  const main = h(
    "tr",
    { class: `trend-row trend-row-${r.change}` },
    h("td", {}, middleEllipsis(r.run)),
    h("td", { text: `${r.kept} / ${r.steps}` }),
    h("td", { text: ms(r.step_ms) }),
    h("td", { text: r.band_ms === null ? "—" : `±${ms(r.band_ms)}` }),
    h("td", { text: r.mfu === null ? "—" : pct(r.mfu / 100) }),
    h("td", { text: classSplit(r) }),
    h("td", {}, changeTag(r)),
    h("td", { class: "trend-why", text: r.why }),
  );
  const behind = r.top.map((k) =>
    h(
      "tr",
      { class: "trend-kernel" },
      h("td", { attrs: { colspan: "2" } }, middleEllipsis(`↳ ${k.kernel}`, k.kernel)),
      h("td", { text: k.class }),
      h("td", { text: `${ms(k.a_ms)} → ${ms(k.b_ms)}` }),
      h("td", { class: k.delta_ms > 0 ? "delta delta-slower" : "delta delta-faster", text: `${k.delta_ms > 0 ? "+" : "−"}${Math.abs(k.delta_ms).toFixed(3)} ms` }),
      h("td", { attrs: { colspan: "3" }, text: k.share_of_change === null ? "" : `${pct(k.share_of_change)} of the change` }),
    ),
  );
  return [main, ...behind];
}

class TrendsView implements TabView {
  private controller = new AbortController();
  private metric = "step";
  private threshold = 5;
  private result = h("div", { class: "trend-result" });
  private chart: TrendChart | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private host: HTMLElement) {
    const link = tabLink("trends"); // the metric and threshold survive a reload (the deep link)
    if (METRICS.some(([k]) => k === link.metric)) this.metric = link.metric as string;
    if (Number(link.threshold) > 0) this.threshold = Number(link.threshold);
    const thresholdBox = h("input", { class: "search trend-threshold", attrs: { type: "number", min: "0.1", step: "any", value: String(this.threshold), "aria-label": "Threshold (%)" } });
    thresholdBox.addEventListener("change", () => {
      const v = Number(thresholdBox.value);
      if (Number.isFinite(v) && v > 0) {
        this.threshold = v;
        writeTabLink("trends", { threshold: v === 5 ? null : String(v) });
        void this.load();
      }
    });
    const controls = h(
      "div",
      { class: "controls" },
      field("Metric", select(METRICS.map(([k, l]) => [k, l] as const), this.metric, (v) => {
        this.metric = v;
        writeTabLink("trends", { metric: v === "step" ? null : v });
        void this.load();
      })),
      field("Threshold %", thresholdBox),
    );
    replace(
      this.host,
      h(
        "div",
        { class: "trends" },
        h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: "Trends across runs" }), h("span", { class: "muted small", text: "every run of the logdir, in recording order" })), controls),
        this.result,
      ),
    );
    void this.load();
  }

  private async load(): Promise<void> {
    this.controller.abort();
    this.controller = new AbortController();
    const signal = this.controller.signal;
    if (this.timer) clearTimeout(this.timer);
    if (!this.chart) replace(this.result, loadingState("Reading the runs' summaries…"));
    try {
      const res = await fetchTrend(this.metric, this.threshold, signal);
      if (signal.aborted) return;
      this.show(res);
      if (res.pending.length) this.timer = setTimeout(() => void this.load(), RETRY_MS);
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      this.teardown();
      replace(this.result, requestErrorState("Could not read the trend", err, () => void this.load()));
    }
  }

  private show(res: TrendResponse): void {
    this.teardown();
    if (!res.runs.length) {
      replace(this.result, emptyState("No run to trend yet", res.pending.length ? `${res.pending.length} run(s) still being analysed…` : "The logdir holds no analysed run."));
      return;
    }
    const [, label, unit] = METRICS.find(([k]) => k === res.metric) ?? [res.metric, res.metric, "ms"];
    this.chart = new TrendChart();
    const marked = res.runs.filter((r) => r.change !== "none").length;
    const head = h("tr", {}, ...["Run", "Steps kept", "Median step", "Noise band", "MFU", "Class split (ms per step)", "Change", "Why"].map((t) => h("th", { text: t })));
    replace(
      this.result,
      h(
        "section",
        { class: "panel" },
        h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: `${label} by run` }), h("span", { class: "muted small", text: `${res.runs.length} runs · ${marked} marked · threshold ${res.threshold} % · order: ${res.order}` })),
        this.chart.el,
      ),
      h(
        "section",
        { class: "panel" },
        h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: "Runs" })),
        res.pending.length ? h("div", { class: "muted small", text: `Still being analysed: ${res.pending.join(", ")}` }) : null,
        ...res.problems.map((p) => h("div", { class: "banner banner-warn", text: p })),
        h("div", { class: "ov-table-wrap" }, h("table", { class: "gi-stat-table trend-table" }, h("thead", {}, head), h("tbody", {}, ...res.runs.flatMap(runRows)))),
        h("div", { class: "muted small trend-rule", text: `Rule: ${res.rule ?? ""}` }),
      ),
    );
    this.chart.setData(res.runs, label, unit);
  }

  private teardown(): void {
    this.chart?.destroy();
    this.chart = null;
  }

  update(_sel: Selection): void {
    // Trends cover every run of the logdir: the header's selection does not change them.
  }

  destroy(): void {
    this.controller.abort();
    if (this.timer) clearTimeout(this.timer);
    this.teardown();
    replace(this.host);
  }
}

export const trendsTab: TabDef = {
  id: "trends",
  label: "Trends",
  mount: (host) => new TrendsView(host),
};
