// Types and fetcher of the /trend route: every run in recording order, marked against the runs before it.
import { getJson } from "../../api";

export type TrendChange = "regression" | "improvement" | "none";

export interface TrendKernel {
  kernel: string;
  class: string;
  a_ms: number;
  b_ms: number;
  delta_ms: number;
  share_of_change: number | null;
}

export interface TrendRun {
  run: string;
  worker: string;
  steps: number;
  kept: number;
  step_ms: number | null;
  band_ms: number | null;
  mfu: number | null;
  classes: Record<string, number>;
  value: number | null;
  value_band: number | null;
  left_out: number;
  change: TrendChange;
  why: string;
  against?: string[];
  change_pct?: number | null;
  top: TrendKernel[];
}

export interface TrendResponse {
  metric: string;
  threshold: number;
  rule?: string;
  order: string;
  runs: TrendRun[];
  pending: string[];
  problems: string[];
}

export function fetchTrend(metric: string, threshold: number, signal?: AbortSignal): Promise<TrendResponse> {
  return getJson<TrendResponse>("trend", { metric, threshold }, signal);
}
