// Distributed tab: the run's ranks side by side. Per-rank breakdown of the step (table and stacked bars), a
// ranks x steps heatmap, the collectives with bus bandwidth against the interconnect, and the straggler named with
// its evidence. Everything comes from /ranks (the run's rank index); ranks are paged on the server (rank order or
// top stragglers first, the default past one page) and searched by number or worker name, never drawn all at once.
import { ApiError, isAbort, type Selection } from "../../api";
import { cpuOnlyRanks, RankBars, StepHeatmap } from "./charts";
import { IDLE_CAUSES, ranksApi, STEP_METRICS, type CollectiveRow, type RankCompare, type Heatmap, type RankOrder, type RankRow, type RanksResponse, type StepMetric } from "./api";
import { emptyState, errorState, inlineError, loadingState } from "../../components/states";
import { debounce, field, h, replace, select } from "../../dom";
import { bytes, count, gbps, pct, sig, time } from "../../format";
import { ALL_WORKERS, openTab } from "../../state";
import type { TabDef, TabView } from "../types";
import { htmlTableExport } from "../../export";
import { tabLink, writeTabLink } from "../../deeplink";

const TAB_ID = "distributed";

const RANK_PAGE = 64;
const RETRY_MS = 3000;

type Cell = string | Node;

function table(head: string[], rows: Cell[][], cls: string, rowClass?: (i: number) => string, onRow?: (i: number) => void): HTMLElement {
  const tr = (cells: Cell[], i: number) =>
    h("tr", { class: rowClass?.(i) ?? "", on: onRow ? { click: () => onRow(i) } : {} }, ...cells.map((c) => h("td", null, c)));
  const el = h("table", { class: `ranks-table ${cls}` }, h("thead", null, h("tr", null, ...head.map((t) => h("th", { text: t })))), h("tbody", null, ...rows.map(tr)));
  return h("div", { class: "table-scroll" }, el, htmlTableExport(el, cls));
}

function panel(title: string, ...body: (Node | null)[]): HTMLElement {
  return h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: title })), ...body);
}

function rankCells(r: RankRow, cpu = false): Cell[] {
  return [
    String(r.rank),
    r.worker,
    time(r.step_us),
    time(r.compute_us),
    time(r.comm_exposed_us),
    time(r.comm_overlapped_us),
    ...(cpu ? [] : [time(r.memcpy_us)]),
    time(r.idle_us),
    ...(cpu ? [] : IDLE_CAUSES.map(([m]) => time(r[`${m}_us`]))),
    time(r.comm_wait_us),
    count(r.arrived_last),
    time(r.others_waited_us),
  ];
}

const RANK_HEAD = ["Rank", "Worker", "Step", "Compute", "Comm exposed", "Comm overlapped", "Memcpy", "Idle",
  "Host-bound", "Launch-bound", "Sync", "Data loading", "Other idle", "Wait in collectives", "Arrived last", "Others waited"];
/** A CPU-only run's columns: what the CPU did (analysis/overview/cpu.py), no memcpy and no GPU idle causes. */
const CPU_RANK_HEAD = ["Rank", "Worker", "Step", "CPU ops", "Collectives exposed", "Collectives overlapped", "Idle threads",
  "Wait in collectives", "Arrived last", "Others waited"];
const COLL_HEAD = ["Collective", "dtype", "Size", "Ranks", "Algorithm", "Count", "Time / rank", "Wait", "Transfer", "algbw", "busbw", "% of link"];

function collectiveCells(c: CollectiveRow): Cell[] {
  return [
    c.kind + (c.pg ? ` (pg ${c.pg})` : ""),
    c.dtype || "—",
    c.bytes == null && c.reason ? h("span", { class: "muted", title: c.reason, text: "— no tensor recorded" }) : bytes(c.bytes),
    count(c.group_size),
    c.algo || "—",
    count(c.count),
    time(c.total_time_per_rank_us),
    time(c.wait_us),
    time(c.transfer_us),
    gbps(c.algbw_gbps),
    h("span", { title: `algbw × ${sig(c.busbw_factor)} (NCCL-tests factor for ${c.kind} over ${c.group_size} ranks)`, text: gbps(c.busbw_gbps) }),
    pct(c.pct_link),
  ];
}

class DistributedView implements TabView {
  private controller = new AbortController();
  private data: RanksResponse | null = null;
  private metric: StepMetric = "dur";
  private page = 0;
  private order: RankOrder = "rank";
  private query = "";
  private byRank = new Map<number, RankRow>();
  private pagerHost = h("div", { class: "ranks-pager-host" });
  private bars: RankBars | null = null;
  private heat: StepHeatmap | null = null;
  private retry: ReturnType<typeof setTimeout> | undefined;
  private rankHost = h("div", { class: "ranks-page" });
  private heatStatus = h("div", { class: "chart-status" });
  private focus = h("div", { class: "rank-focus" });

  constructor(private host: HTMLElement, private sel: Selection) {
    // the heatmap's metric, rank order, search and the rank compared survive a reload (the deep link)
    const link = tabLink(TAB_ID);
    if (STEP_METRICS.some(([m]) => m === link.metric)) this.metric = link.metric as StepMetric;
    if (link.order === "rank" || link.order === "straggler") this.order = link.order;
    this.query = link.q ?? "";
    void this.load();
  }

  private remember(): void {
    writeTabLink(TAB_ID, { metric: this.metric === "dur" ? null : this.metric, order: this.order, q: this.query || null });
  }

  private async load(): Promise<void> {
    replace(this.host, loadingState(`Reading the ranks of ${this.sel.run}…`));
    try {
      this.data = await ranksApi.ranks(this.sel.run, this.controller.signal);
      this.byRank = new Map(this.data.ranks.map((r) => [r.rank, r]));
      if (this.data.ranks.length > RANK_PAGE && this.data.stragglers.length && !tabLink(TAB_ID).order) this.order = "straggler";
      this.render();
      const rank = Number(tabLink(TAB_ID).rank);
      if (tabLink(TAB_ID).rank && this.byRank.has(rank)) this.showRank(rank);
      if (this.data.pending > 0) this.retry = setTimeout(() => void this.load(), RETRY_MS);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof ApiError && err.status === 503) {
        replace(this.host, loadingState(message));
        this.retry = setTimeout(() => void this.load(), RETRY_MS);
        return;
      }
      replace(this.host, errorState("No distributed view for this run", message, () => void this.load()));
    }
  }

  private render(): void {
    const d = this.data!;
    this.teardownCharts();
    this.bars = new RankBars((rank) => this.showRank(rank));
    this.heat = new StepHeatmap();
    const metricSelect = select(STEP_METRICS, this.metric, (v) => {
      this.metric = v as StepMetric;
      this.remember();
      void this.loadHeatmap();
    }, { attrs: { "aria-label": "Heatmap metric" } });
    const orderSelect = select([["rank", "Rank order"], ["straggler", "Top stragglers first"]], this.order, (v) => {
      this.order = v as RankOrder;
      this.page = 0;
      this.remember();
      void this.loadHeatmap();
    }, { attrs: { "aria-label": "Rank order" } });
    const search = h("input", {
      class: "ranks-search",
      attrs: { type: "search", placeholder: "Rank number or worker", "aria-label": "Search ranks", value: this.query },
    }) as HTMLInputElement;
    const searchNow = debounce(() => {
      this.query = search.value.trim();
      this.page = 0;
      this.remember();
      void this.loadHeatmap();
    }, 250);
    search.addEventListener("input", searchNow);
    replace(
      this.host,
      h(
        "div",
        { class: "ranks" },
        this.summary(d),
        h(
          "div",
          { class: "controls" },
          h("button", {
            class: "btn btn-small ranks-timeline",
            text: "All ranks on the timeline",
            title: "Stack every rank's GPU streams and CPU threads on one time base in the Timeline tab",
            on: { click: () => openTab("timeline", null, ALL_WORKERS) },
          }),
        ),
        d.problems.length
          ? h("details", { class: "banner banner-warn" }, h("summary", { text: `${d.problems.length} note${d.problems.length === 1 ? "" : "s"} on the ranks` }), h("ul", null, ...d.problems.map((p) => h("li", { text: p }))))
          : null,
        this.stragglers(d),
        panel("Ranks: mean step split", h("div", {
          class: "muted small",
          text: cpuOnlyRanks(d.ranks)
            ? "Mean per step of a CPU-only run: CPU ops (data loading included), collectives not under CPU ops (exposed) and under them (overlapped), idle threads; waits in collectives are each rank's wait intervals united, so a step's wait never exceeds the step. Click a rank (bar or row) to compare it with the median rank."
            : "Mean per step. Idle is split by cause as in the Overview (host-bound, launch-bound, synchronisation, data loading, other); waits in collectives are each rank's wait intervals united (collectives in flight together count once). Click a rank (bar or row) to compare it with the median rank.",
        }), h("div", { class: "controls" }, field("Order", orderSelect), field("Search", search)), this.pagerHost, this.focus, this.rankHost),
        panel(`Ranks × steps`, h("div", { class: "controls" }, field("Metric", metricSelect)), this.heatStatus, this.heat.el),
        panel(
          "Collectives",
          h("div", {
            class: "muted small",
            text: "Matched across ranks by process group, collective and order. Wait: a rank's time in the collective before the last rank arrived. Transfer: after. algbw = size / transfer; busbw = algbw × the NCCL-tests factor (all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; broadcast, reduce, send/recv 1), rated against the link one way.",
          }),
          d.collectives.length ? table(COLL_HEAD, d.collectives.map(collectiveCells), "ranks-collectives") : emptyState("No collective matched across ranks"),
        ),
      ),
    );
    if (this.order === "rank" && !this.query) this.renderPage(d.heatmap);
    else void this.loadHeatmap();
  }

  private summary(d: RanksResponse): HTMLElement {
    const source = d.source === "kernel" ? "communication kernels: NCCL/RCCL and kernel families" : "CPU (gloo) collectives";
    const parts = [
      `${count(d.rank_count)} rank trace${d.rank_count === 1 ? "" : "s"} of world size ${d.world_size ?? "—"}`,
      `${count(d.step_numbers.length)} step${d.step_numbers.length === 1 ? "" : "s"}`,
      d.instance_count ? `${count(d.instance_count)} collective instances matched (${source})` : "no collective in these traces",
      `interconnect: ${d.interconnect.how}`,
    ];
    return h("div", { class: "ranks-summary muted", text: parts.join(" · ") });
  }

  private stragglers(d: RanksResponse): HTMLElement {
    if (!d.stragglers.length) {
      return h("div", { class: "banner", text: "No straggler: no rank keeps the others waiting for most of the time lost in collectives." });
    }
    return h(
      "div",
      { class: "banner banner-warn ranks-straggler" },
      ...d.stragglers.map((s) => h("div", null, h("b", { text: `Straggler: rank ${s.rank} (${s.worker}). ` }), s.evidence)),
    );
  }

  /** One page of ranks (as the server paged, ordered and searched them): pager, bars, table and heatmap. */
  private renderPage(map: Heatmap): void {
    const rows = map.ranks.map((r) => this.byRank.get(r)).filter((r): r is RankRow => r !== undefined);
    const flagged = new Set(this.data!.stragglers.map((s) => s.rank));
    const matches = map.matches ?? map.total_ranks;
    this.bars!.setData(rows, flagged);
    replace(this.pagerHost, matches > RANK_PAGE || this.query ? this.pager(matches, map.offset) : null);
    replace(
      this.rankHost,
      rows.length ? this.bars!.el : emptyState(`No rank matches “${this.query}”`),
      rows.length ? table(cpuOnlyRanks(rows) ? CPU_RANK_HEAD : RANK_HEAD, rows.map((r) => rankCells(r, cpuOnlyRanks(rows))), "ranks-per-rank", (i) => (flagged.has(rows[i].rank) ? "row-straggler" : ""), (i) => this.showRank(rows[i].rank)) : null,
    );
    this.renderHeatmap(map);
  }

  private pager(total: number, offset: number): HTMLElement {
    const last = Math.max(0, Math.floor((total - 1) / RANK_PAGE));
    const page = Math.floor(offset / RANK_PAGE);
    const go = (p: number) => {
      this.page = Math.min(last, Math.max(0, p));
      void this.loadHeatmap();
    };
    const shown = total ? `ranks ${count(offset + 1)}–${count(Math.min(total, offset + RANK_PAGE))} of ${count(total)}` : "no rank";
    return h(
      "div",
      { class: "controls pager" },
      h("button", { class: "btn", text: "‹ Previous", attrs: page > 0 ? {} : { disabled: "" }, on: { click: () => go(page - 1) } }),
      h("span", { class: "muted ranks-pager-status", text: `${shown}${this.query ? ` matching “${this.query}”` : ""} · page ${count(page + 1)} of ${count(last + 1)}` }),
      h("button", { class: "btn", text: "Next ›", attrs: page < last ? {} : { disabled: "" }, on: { click: () => go(page + 1) } }),
    );
  }

  private async loadHeatmap(): Promise<void> {
    replace(this.heatStatus, h("span", { class: "muted small", text: "Loading…" }));
    try {
      this.renderPage(await ranksApi.heatmap(this.sel.run, this.metric, this.page, RANK_PAGE, this.order, this.query, this.controller.signal));
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(this.heatStatus, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private renderHeatmap(map: RanksResponse["heatmap"]): void {
    const label = STEP_METRICS.find(([m]) => m === map.metric)?.[1] ?? map.metric;
    replace(this.heatStatus, h("span", { class: "muted small", text: `${label} per rank and step; ${count(map.ranks.length)} of ${count(map.total_ranks)} ranks on this page` }));
    this.heat!.setData(map);
  }

  /** The clicked rank against the median rank, part by part. */
  private showRank(rank: number): void {
    const d = this.data!;
    const row = d.ranks.find((r) => r.rank === rank);
    if (!row) return;
    writeTabLink(TAB_ID, { rank: String(rank) });
    const keys: ReadonlyArray<readonly [keyof RankRow, string]> = [
      ["step_us", "Step"], ["compute_us", "Compute"], ["comm_exposed_us", "Comm exposed"], ["comm_overlapped_us", "Comm overlapped"],
      ["memcpy_us", "Memcpy"], ["idle_us", "Idle"], ...IDLE_CAUSES.map(([m, label]) => [`${m}_us` as const, label] as const),
      ["comm_wait_us", "Wait in collectives"],
    ];
    const median = (k: keyof RankRow) => {
      const v = d.ranks.map((r) => r[k] as number | null).filter((x): x is number => x != null).sort((a, b) => a - b);
      return v.length ? (v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2) : null;
    };
    const rows = keys.map(([k, label]) => {
      const mine = row[k] as number | null;
      const mid = median(k);
      const delta = mine != null && mid != null ? mine - mid : null;
      return [label, time(mine), time(mid), delta == null ? "—" : `${delta >= 0 ? "+" : "−"}${time(Math.abs(delta))}`];
    });
    const kernels = h("div", { class: "rank-kernels muted small", text: "Comparing kernels with the median rank…" });
    replace(
      this.focus,
      h(
        "div",
        { class: "rank-compare" },
        h("b", { text: `Rank ${rank} (${row.worker}) against the median rank` }),
        table(["", `Rank ${rank}`, "Median rank", "Difference"], rows, "ranks-compare"),
        kernels,
      ),
    );
    void this.compareKernels(rank, kernels);
  }

  /** The kernels that differ most between this rank and the median-step rank (the Diff tab's arithmetic). */
  private async compareKernels(rank: number, host: HTMLElement): Promise<void> {
    let res: RankCompare;
    try {
      res = await ranksApi.compare(this.sel.run, rank, this.controller.signal);
    } catch (err) {
      if (this.controller.signal.aborted || isAbort(err)) return;
      replace(host, inlineError(err instanceof Error ? err.message : String(err)));
      return;
    }
    const s = res.summary;
    const delta = (v: number | null) => (v == null ? "—" : `${v >= 0 ? "+" : "−"}${time(Math.abs(v))}`);
    const head = `Kernels against rank ${res.median_rank}, the rank of median step time: GPU time ${time(s.time_us_b)} against ${time(s.time_us_a)} (${delta(s.delta_us)}); biggest changes:`;
    replace(
      host,
      h("div", { text: head }),
      table(
        ["Kernel", `Rank ${res.median_rank} (median)`, `Rank ${rank}`, "Difference"],
        res.rows.map((r) => [h("span", { class: "cell-name", title: r.name, text: r.name.length > 90 ? r.name.slice(0, 89) + "…" : r.name }), time(r.time_us_a), time(r.time_us_b), delta(r.delta_us)]),
        "ranks-kernel-compare",
      ),
    );
  }

  private teardownCharts(): void {
    this.bars?.destroy();
    this.heat?.destroy();
    this.bars = this.heat = null;
  }

  update(sel: Selection): void {
    if (sel.run === this.sel.run) return; // the view covers every worker of the run
    this.destroy();
    this.sel = sel;
    this.controller = new AbortController();
    this.page = 0;
    this.order = "rank";
    this.query = "";
    void this.load();
  }

  destroy(): void {
    this.controller.abort();
    if (this.retry !== undefined) clearTimeout(this.retry);
    this.teardownCharts();
    replace(this.host);
  }
}

export const distributedTab: TabDef = {
  id: TAB_ID,
  label: "Distributed",
  mount: (host, sel) => new DistributedView(host, sel),
};
