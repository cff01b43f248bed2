// Overview tab (the landing view): headline figures, where each step's time goes, ranked recommendations, and a
// trend across the spans of a worker. Clicking a step scopes the Kernel efficiency, Timeline and Memory tabs to it.
import { api, isAbort, type OverviewHeadline, type OverviewResponse, type Selection } from "../../api";
import { breakdownTable, headlineCards, isCpuOnly, recommendationList } from "./parts";
import { StepChart, TrendChart } from "./charts";
import { emptyState, loadingState, requestErrorState } from "../../components/states";
import { h, replace } from "../../dom";
import { time } from "../../format";
import { nav, openTab } from "../../state";
import type { TabDef, TabView } from "../types";

function panel(title: string, sub: string | null, ...body: (HTMLElement | null)[]): HTMLElement {
  return h(
    "section",
    { class: "panel" },
    h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: title }), sub ? h("span", { class: "muted small", text: sub }) : null),
    ...body,
  );
}

class OverviewView implements TabView {
  private controller = new AbortController();
  private charts: { destroy(): void }[] = [];
  private data: OverviewResponse | null = null;

  constructor(
    private host: HTMLElement,
    private sel: Selection,
  ) {
    void this.load();
  }

  private async load(): Promise<void> {
    replace(this.host, loadingState("Loading the overview…"));
    const signal = this.controller.signal;
    try {
      const res = await api.overview(this.sel, signal);
      if (signal.aborted) return;
      this.data = res;
      this.render(res);
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      replace(
        this.host,
        requestErrorState("Could not load the overview of this selection", err, () => void this.load()),
      );
    }
  }

  private render(res: OverviewResponse): void {
    this.disposeCharts();
    if (!res.steps.length || !("steps" in res.headline)) {
      replace(this.host, emptyState("Nothing to break down in this selection", this.missingList(res.missing)));
      return;
    }
    const hl = res.headline as OverviewHeadline;
    const notes = res.missing.length ? h("div", { class: "banner banner-warn ov-missing" }, h("strong", { text: "Partial overview. " }), this.missingList(res.missing)) : null;
    const stepChart = new StepChart((i) => this.scopeStep(i));
    this.charts.push(stepChart);
    const parts: (HTMLElement | null)[] = [
      notes,
      headlineCards(hl, isCpuOnly(res.categories)),
      panel(
        "Where each step's time goes",
        isCpuOnly(res.categories)
          ? `No GPU activity: CPU time by what the CPU did (data loading, CPU ops, collectives, idle threads) · click a step to scope the other tabs`
          : `GPU time by kernel class, GPU idle by cause; overlapping streams counted once · click a step to scope the Kernel efficiency, Timeline and Memory tabs`,
        stepChart.el,
        breakdownTable(res.steps, res.categories, (i) => this.scopeStep(i)),
      ),
      panel(
        "Recommendations",
        "sorted by the time each could recover per step",
        recommendationList(res.recommendations, (filter, op) => {
          nav.set({ focus: { filter, op } });
          openTab("kernels");
        }),
      ),
    ];
    if (res.spans.length > 1) {
      const trend = new TrendChart();
      this.charts.push(trend);
      parts.push(panel("Across spans", `${res.spans.length} spans of ${this.sel.worker}: mean step time, GPU busy and MFU`, trend.el));
      trend.setData(res.spans);
    }
    replace(this.host, h("div", { class: "ov" }, ...parts));
    stepChart.setData(res.steps, res.categories);
  }

  private missingList(missing: string[]): HTMLElement {
    return h("ul", { class: "ov-missing-list" }, ...missing.map((m) => h("li", { text: m })));
  }

  /** Scope the other tabs to one step: its span and time window, then open the kernel table. */
  private scopeStep(index: number): void {
    const step = this.data?.steps[index];
    if (!step) return;
    nav.set({
      scope: {
        run: this.sel.run,
        worker: this.sel.worker,
        span: step.span,
        label: `${step.step} (${time(step.wall_us)})`,
        t0: step.start_us,
        t1: step.end_us,
      },
    });
    openTab("kernels", step.span);
  }

  private disposeCharts(): void {
    for (const c of this.charts) c.destroy();
    this.charts = [];
  }

  update(sel: Selection): void {
    this.controller.abort();
    this.controller = new AbortController();
    this.sel = sel;
    void this.load();
  }

  destroy(): void {
    this.controller.abort();
    this.disposeCharts();
    replace(this.host);
  }
}

export const overviewTab: TabDef = {
  id: "overview",
  label: "Overview",
  mount: (host, sel) => new OverviewView(host, sel),
};
