// Types and fetchers of the Distributed routes (/ranks, /ranks_heatmap).
import { getJson, type DiffRow, type DiffSummary } from "../../api";

/** Idle by cause, as the Overview splits it (step metric, label, the Overview's category key for its colour). */
export const IDLE_CAUSES = [
  ["idle_host_bound", "Idle: host-bound", "host_bound"],
  ["idle_launch_bound", "Idle: launch-bound", "launch_bound"],
  ["idle_sync", "Idle: synchronisation", "sync"],
  ["idle_data_loading", "Idle: data loading", "data_loading"],
  ["idle_other", "Idle: other", "idle_other"],
] as const;

export type IdleCause = (typeof IDLE_CAUSES)[number][0];
export type StepMetric = "dur" | "compute" | "comm_exposed" | "comm_overlapped" | "memcpy" | "idle" | IdleCause | "comm_wait";

export const STEP_METRICS: ReadonlyArray<readonly [StepMetric, string]> = [
  ["dur", "Step time"],
  ["compute", "Compute"],
  ["comm_exposed", "Exposed communication"],
  ["comm_overlapped", "Overlapped communication"],
  ["comm_wait", "Wait in collectives"],
  ["memcpy", "Memcpy / memset"],
  ["idle", "Idle"],
  ...IDLE_CAUSES.map(([m, label]) => [m, label] as const),
];

export interface RankRow {
  rank: number;
  worker: string;
  span: string;
  steps: number;
  step_us: number | null;
  compute_us: number | null;
  comm_exposed_us: number | null;
  comm_overlapped_us: number | null;
  memcpy_us: number | null;
  idle_us: number | null;
  /** Idle by cause (null on a CPU-only trace: no GPU idle to split). */
  idle_host_bound_us: number | null;
  idle_launch_bound_us: number | null;
  idle_sync_us: number | null;
  idle_data_loading_us: number | null;
  idle_other_us: number | null;
  comm_wait_us: number | null;
  arrived_last: number;
  others_waited_us: number;
}

export interface CollectiveRow {
  pg: string;
  kind: string;
  dtype: string;
  bytes: number | null;
  group_size: number;
  algo: string;
  count: number;
  ranks: number;
  time_per_rank_us: number | null;
  total_time_per_rank_us: number | null;
  wait_us: number | null;
  transfer_us: number | null;
  algbw_gbps: number | null;
  busbw_factor: number | null;
  busbw_gbps: number | null;
  pct_link: number | null;
}

export interface Straggler {
  rank: number;
  worker: string;
  arrived_last: number;
  of_instances: number;
  others_waited_us: number;
  share_of_wait: number;
  evidence: string;
}

/** The order of the paged ranks: by number, or the ranks others waited for most first. */
export type RankOrder = "rank" | "straggler";

export interface Heatmap {
  metric: StepMetric;
  steps: number[];
  ranks: number[];
  values: (number | null)[][];
  offset: number;
  limit: number;
  total_ranks: number;
  /** Present on /ranks_heatmap answers: the page, its order and search, and how many ranks match the search. */
  page?: number;
  size?: number;
  order?: RankOrder;
  query?: string;
  matches?: number;
  median_per_step: (number | null)[];
  max: number | null;
}

export interface RanksResponse {
  world_size: number | null;
  rank_count: number;
  source: "kernel" | "cpu" | "";
  ranks: RankRow[];
  collectives: CollectiveRow[];
  stragglers: Straggler[];
  problems: string[];
  interconnect: { gbps: number | null; how: string; device?: string };
  step_numbers: number[];
  instance_count: number;
  pending: number;
  heatmap: Heatmap;
}

export interface RankCompare {
  rank: number;
  median_rank: number;
  summary: DiffSummary;
  rows: DiffRow[];
}

export const ranksApi = {
  compare: (run: string, rank: number, signal?: AbortSignal) => getJson<RankCompare>("ranks_compare", { run, rank, limit: 12 }, signal),
  ranks: (run: string, signal?: AbortSignal) => getJson<RanksResponse>("ranks", { run, instance_limit: 0 }, signal),
  heatmap: (run: string, metric: StepMetric, page: number, size: number, order: RankOrder, q: string, signal?: AbortSignal) =>
    getJson<Heatmap>("ranks_heatmap", { run, metric, page, size, order, q }, signal),
};
