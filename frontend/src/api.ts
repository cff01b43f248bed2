// Typed fetch helpers for the plugin's JSON routes.
//
// TensorBoard loads the plugin in an iframe whose document is `<prefix>/data/plugin_entry.html?name=gpuinsight`, and
// that page carries `<base href="plugin/gpuinsight/">` (tensorboard/backend/application.py, _serve_plugin_entry).
// Relative URLs therefore resolve against `<prefix>/data/plugin/gpuinsight/`, where the routes are served: "./runs"
// is `<prefix>/data/plugin/gpuinsight/runs`, whatever `--path_prefix` is. All route URLs are built from this base.
import type { DiffAttribution, DiffVerdict } from "./views/diff/verdict";

export const API_BASE = "./";

/** Give up on a request after this long so that no view ever spins forever. */
const TIMEOUT_MS = 120_000;

export type RunStatus = "ready" | "loading" | "pending" | "waiting" | "error";
export type Dtype = "auto" | "fp32" | "tf32" | "bf16" | "fp16" | "fp8" | "fp64" | "int8" | "fp6" | "fp4";
export type Group = "name" | "op";
export type Order = "asc" | "desc";
/** Side of the roofline ridge; null (or "unknown" from older servers) unless both FLOPs and bytes are known;
 * "communication" for a collective, rated against its link rather than the roofline. */
export type Bound = "compute" | "memory" | "communication" | "unknown" | null;

export const DTYPES: readonly Dtype[] = ["auto", "fp32", "tf32", "bf16", "fp16", "fp8", "fp64", "int8", "fp6", "fp4"];

export interface Progress {
  files_done: number;
  files_total: number;
  bytes_done: number;
  bytes_total: number;
}

export interface FileError {
  file: string;
  reason: string;
}

export interface SpanInfo {
  span: string;
  stamp: number;
  status: RunStatus;
  /** Why the span failed (status "error") or waits. */
  reason?: string;
  /** Size of the trace file in bytes. */
  bytes?: number;
  /** The trace lies in object storage (s3://, gs://): downloading it fetches the whole file first. */
  remote?: boolean;
}

export interface WorkerInfo {
  worker: string;
  spans: SpanInfo[];
}

export interface RunInfo {
  run: string;
  status: RunStatus;
  progress?: Progress | null;
  errors?: FileError[] | null;
  /** Files that are part of the run without being spans: graph-capture traces of its `capture_traces/` folder. */
  companions?: { file: string; kind: string }[] | null;
  workers: WorkerInfo[];
}

export interface RunsResponse {
  runs: RunInfo[];
  scan_interval_s?: number;
  /** Why the logdir yields no run ("<path>: <reason>"), or a summary store that cannot be used; null when fine. */
  logdir_error?: string | null;
}

export interface DeviceSpec {
  name: string;
  vendor: string;
  peak_tflops: Partial<Record<Exclude<Dtype, "auto">, number | null>> & Record<string, number | null>;
  dram_gbps: number | null;
  /** The datasheet the row comes from: a URL, or an object with a `url`. */
  source?: string | { url?: string | null; note?: string | null } | null;
}

export interface DeviceSummary {
  gpu_busy_us: number | null;
  kernel_time_us: number | null;
  memop_time_us: number | null;
  kernel_count: number | null;
  byte_time_share: number | null;
  efficiency: number | null;
  /** Time share of kernels with both estimates, under the roof. */
  covered_time_share?: number | null;
  /** Time share and count of kernels whose estimate is over the physical roof (left out of the efficiency). */
  over_roof_time_share?: number | null;
  over_roof_count?: number | null;
  /** Why kernels have no rated figure: share of kernel time per reason code, with a hint each. */
  reasons?: ReasonRow[];
  /** Compute kernel time (outside communication, copies and fills), the share of it with FLOPs (the one FLOP
   * coverage figure of every view), and the kernel families without FLOPs. */
  compute_time_us?: number | null;
  compute_flop_share?: number | null;
  unrated_families?: UnratedFamily[];
}

export interface UnratedFamily {
  family: string;
  time_share: number | null;
  reason: string;
  code: string;
}

export interface ReasonRow {
  code: string;
  label: string;
  hint: string;
  time_share: number;
}

export interface DeviceInfo {
  id: number;
  trace_name: string;
  matched: boolean;
  spec: DeviceSpec | null;
  how: string;
  summary: DeviceSummary | null;
}

export interface DevicesResponse {
  devices: DeviceInfo[];
  /** "All ranks": every rank's GPU together (what the All-ranks kernel table sums). */
  all_ranks?: DeviceSummary | null;
  /** All ranks: per GPU id, the ranks its card adds up. */
  device_ranks?: Record<string, number[]>;
}

export interface KernelRow {
  name: string;
  /** Short name for tables and charts (template arguments folded, distinctive suffix kept). */
  display_name?: string | null;
  /** Full demangled name, or null when the name is not mangled. */
  demangled?: string | null;
  /** GEMM, attention, conv, elementwise, reduction, norm, communication, memcpy, memset or other. */
  kernel_class?: string | null;
  fused_from?: string | null; // the ops an Inductor kernel was fused from (its name), not its class
  /** What `kernel_ops` takes back instead of the name (names can be any length). */
  name_key?: string;
  op?: string | null;
  count: number;
  total_us: number;
  mean_us: number;
  min_us: number;
  max_us: number;
  time_share: number;
  flops: number | null;
  flops_reason?: string | null;
  bytes: number | null;
  bytes_reason?: string | null;
  tflops: number | null;
  gbps: number | null;
  dtype: string | null;
  pct_peak: number | null;
  pct_dram: number | null;
  intensity: number | null;
  bound: Bound;
  occupancy: number | null;
  registers: number | null;
  grid: string | null;
  block: string | null;
  /** compute, work, layout, splitk, epilogue, memset or memcpy: what the kernel does for its op. */
  role?: string | null;
  /** Time share of the row's calls with both a FLOP and a byte estimate (its rates describe those calls). */
  covered_share?: number | null;
  /** Reason code with most of the row's time ("" when rated). */
  reason?: string | null;
  /** The row's figures come from calls over the physical roof (impossible: the estimate is wrong). */
  over_roof?: boolean;
  over_roof_share?: number | null;
  roof_cause?: string | null;
  efficiency?: number | null;
  /** "All ranks" only: the ranks the kernel ran on, and its time per rank (0 on a rank where it did not run). */
  ranks?: number;
  rank_min_us?: number;
  rank_median_us?: number;
  rank_max_us?: number;
}

export interface KernelsResponse {
  total: number;
  dtype: string;
  rows: KernelRow[];
  /** "All ranks": how many ranks the rows span (null for one worker). */
  rank_count?: number | null;
}

export interface RooflinePoint {
  name: string;
  intensity: number | null;
  tflops: number | null;
  total_us: number;
  count: number;
  pct_peak: number | null;
  gbps?: number | null;
  bound?: Bound;
  over_roof?: boolean;
  roof_cause?: string | null;
}

export interface RooflineResponse {
  dtype: string;
  peak_tflops: number | null;
  dram_gbps: number | null;
  ridge: number | null;
  points: RooflinePoint[];
}

export interface KernelOp {
  op: string;
  count: number;
  total_us: number;
  flops: number | null;
  flops_reason?: string | null;
  input_dims: unknown[] | null;
  input_types: string[] | null;
  concrete_inputs: unknown[] | null;
}

export interface KernelOpsResponse {
  name: string;
  ops: KernelOp[];
}

/** The trace selection every data route is scoped to. `span` is a span name or "all". */
export interface Selection {
  run: string;
  worker: string;
  span: string;
}

export interface KernelQuery {
  device: number;
  dtype: Dtype;
  group: Group;
  filter: string;
  /** One kernel by its key (a row's or the timeline's `name_key`): exact whatever the name's length. */
  nameKey?: string;
  op: string;
  sort: string;
  order: Order;
  offset: number;
  limit: number;
  /** A step's time window (trace microseconds): only kernels that start in [t0, t1). */
  t0?: number | null;
  t1?: number | null;
}

/** An error with a one-line message fit for the UI (the server's `{"error": ...}` text when it sent one). */
export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
    this.name = "ApiError";
  }

  /** 503: the data is still being read; asking again later will work. */
  get stillLoading(): boolean {
    return this.status === 503;
  }

  /** 422: the trace failed for good (until its file changes); retrying cannot help. */
  get failedForGood(): boolean {
    return this.status === 422;
  }
}

/** Whether a failed request is worth a Retry button (not when the server said the trace cannot be analysed). */
export function canRetry(err: unknown): boolean {
  return !(err instanceof ApiError && err.failedForGood);
}

type Params = Record<string, string | number | undefined | null>;

/** Relative URL of a route with its query string; empty and undefined params are left out. */
/** The server takes text parameters of up to 500 characters. A filter matches names that contain it, so its first
 * 400 characters still match every name the whole text matches (a 1,000-character kernel name from a link). */
export function substring(text: string | undefined): string | undefined {
  return text === undefined ? undefined : text.slice(0, 400);
}

export function routeUrl(route: string, params: Params = {}): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const qs = query.toString();
  return API_BASE + route + (qs ? "?" + qs : "");
}

function oneLine(text: string, max = 300): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

export async function getJson<T>(route: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
  const abort = () => controller.abort();
  signal?.addEventListener("abort", abort);
  let response: Response;
  try {
    response = await fetch(routeUrl(route, params), {
      signal: controller.signal,
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    if (controller.signal.aborted) {
      throw new ApiError(`${route}: no answer from the server after ${TIMEOUT_MS / 1000} s`, 0);
    }
    throw new ApiError(`${route}: cannot reach the TensorBoard server (${oneLine(String(err))})`, 0);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", abort);
  }
  const text = await response.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const serverMessage =
      body && typeof body === "object" && typeof (body as { error?: unknown }).error === "string"
        ? (body as { error: string }).error
        : `HTTP ${response.status} ${response.statusText}`.trim();
    throw new ApiError(oneLine(serverMessage), response.status);
  }
  if (body === undefined) {
    throw new ApiError(`${route}: the server answered with something that is not JSON`, response.status);
  }
  return body as T;
}

export function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}

/** The device the user picked for a run, or null. The shell hands in the picker's lookup at start
 * (components/devicePicker.ts), so this module imports nothing back from the components that call it. */
let deviceOverride: (run: string | null | undefined) => string | null = () => null;

export function useDeviceOverride(lookup: (run: string | null | undefined) => string | null): void {
  deviceOverride = lookup;
}

export function selParams(sel: Selection): Params {
  // device_name: the GPU the user picked for a run whose trace does not name it (components/devicePicker.ts)
  return { run: sel.run, worker: sel.worker, span: sel.span, device_name: deviceOverride(sel.run) ?? undefined };
}

export const api = {
  runs: (signal?: AbortSignal) => getJson<RunsResponse>("runs", {}, signal),

  devices: (sel: Selection, signal?: AbortSignal) => getJson<DevicesResponse>("devices", selParams(sel), signal),

  kernels: (sel: Selection, q: KernelQuery, signal?: AbortSignal) =>
    getJson<KernelsResponse>(
      "kernels",
      {
        ...selParams(sel),
        device: q.device,
        dtype: q.dtype,
        group: q.group,
        filter: substring(q.filter),
        name_key: q.nameKey,
        op: substring(q.op),
        sort: q.sort,
        order: q.order,
        offset: q.offset,
        limit: q.limit,
        t0: q.t0,
        t1: q.t1,
      },
      signal,
    ),

  overview: (sel: Selection, signal?: AbortSignal) => getJson<OverviewResponse>("overview", selParams(sel), signal),

  roofline: (sel: Selection, device: number, dtype: Dtype, signal?: AbortSignal) =>
    getJson<RooflineResponse>("roofline", { ...selParams(sel), device, dtype }, signal),

  /** The launching ops of a kernel, by its row's `name_key` when known (any name length), else by name. */
  kernelOps: (sel: Selection, device: number, name: string, signal?: AbortSignal, nameKey?: string) =>
    getJson<KernelOpsResponse>(
      "kernel_ops",
      { ...selParams(sel), device, ...(nameKey ? { name_key: nameKey } : { name }) },
      signal,
    ),

  /** URL of the augmented trace of one span (a gzip file), for an `<a download>` link. */
  traceUrl: (run: string, worker: string, span: string) => routeUrl("trace", { run, worker, span }),
};

// ---- Diff tab: the `diff` route (two selections compared kernel by kernel or op by op) ----

export type DiffMatch = "normalized" | "exact";
export type DiffBy = "kernel" | "op";
export type DiffStatus = "both" | "added" | "removed";
export type DiffClass =
  | "GEMM"
  | "attention"
  | "conv"
  | "elementwise"
  | "reduction"
  | "norm"
  | "memcpy"
  | "memset"
  | "communication"
  | "other";

export interface DiffSummary {
  name_a: string;
  name_b: string;
  match: DiffMatch;
  by: DiffBy;
  spans_a: number | null;
  spans_b: number | null;
  time_us_a: number | null;
  time_us_b: number | null;
  delta_us: number | null;
  /** A fraction of side A's time (0.1 = +10 %), or null when A has no time. */
  delta_pct: number | null;
  devices_a: string[];
  devices_b: string[];
  added: number | null;
  removed: number | null;
  within_noise: number | null;
  /** Share of both sides' GPU time in rows found on both sides. */
  matched_share?: number | null;
  /** Set when kernel names barely match (another vendor or library): compare by op + shapes. */
  suggest?: { by: DiffBy; why: string } | null;
}

export interface DiffClassRow {
  class: DiffClass | string;
  time_us_a: number | null;
  time_us_b: number | null;
  delta_us: number | null;
  share_of_change: number | null;
}

/** Per-span time spread of a row on a side that aggregates several spans. */
export interface DiffSpread {
  min: number | null;
  median: number | null;
  max: number | null;
}

export interface DiffRow {
  /** Kernel name, or "op [dims] [types]" when by=op. */
  name: string;
  /** Short name for the table (template arguments folded); the full name stays in `name`. */
  display_name?: string;
  demangled?: string | null;
  /** Kernel launches per span; `count` is op calls when by=op. */
  launches_a?: number | null;
  launches_b?: number | null;
  class: DiffClass | string;
  status: DiffStatus;
  count_a: number | null;
  count_b: number | null;
  time_us_a: number | null;
  time_us_b: number | null;
  mean_us_a: number | null;
  mean_us_b: number | null;
  tflops_a: number | null;
  tflops_b: number | null;
  gbps_a: number | null;
  gbps_b: number | null;
  pct_peak_a: number | null;
  pct_peak_b: number | null;
  pct_dram_a: number | null;
  pct_dram_b: number | null;
  efficiency_a: number | null;
  efficiency_b: number | null;
  dtype_a: string | null;
  dtype_b: string | null;
  delta_us: number | null;
  delta_pct: number | null;
  spread_a: DiffSpread | null;
  spread_b: DiffSpread | null;
  within_noise: boolean | null;
}

export interface DiffResponse {
  summary: DiffSummary;
  classes: DiffClassRow[];
  total: number;
  rows: DiffRow[];
  /** The step-time verdict (null: a side has no steps) and what accounts for the change, per step. */
  verdict?: DiffVerdict | null;
  attribution?: DiffAttribution;
}

export type DiffSort = "impact" | "delta_us" | "delta_pct" | "time_us_a" | "time_us_b" | "name" | "class" | "status";

export interface DiffQuery {
  match: DiffMatch;
  by: DiffBy;
  dtype: Dtype;
  filter: string;
  /** "" for every row. */
  status: DiffStatus | "";
  sort: DiffSort;
  order: Order;
  offset: number;
  limit: number;
}

/** One page of the diff of selection `a` (baseline) against `b`; summary and classes always cover every row. */
export function fetchDiff(a: Selection, b: Selection, q: DiffQuery, signal?: AbortSignal): Promise<DiffResponse> {
  return getJson<DiffResponse>(
    "diff",
    {
      a_run: a.run,
      a_worker: a.worker,
      a_span: a.span,
      a_device_name: deviceOverride(a.run) ?? undefined,
      b_run: b.run,
      b_worker: b.worker,
      b_span: b.span,
      b_device_name: deviceOverride(b.run) ?? undefined,
      match: q.match,
      by: q.by,
      dtype: q.dtype,
      filter: substring(q.filter),
      status: q.status,
      sort: q.sort,
      order: q.order,
      offset: q.offset,
      limit: q.limit,
    },
    signal,
  );
}

// ---- Overview tab: the `overview` route ----

export interface OverviewCategory {
  key: string;
  label: string;
  kind: "busy" | "idle";
}

export interface StepRow {
  span: string;
  step: string;
  step_number: number;
  start_us: number;
  end_us: number;
  wall_us: number;
  gpu_busy_us: number;
  gpu_busy_pct: number | null;
  comm_overlapped_us: number;
  comm_exposed_us: number;
  kernel_count: number;
  kernel_us: number;
  kernel_median_us: number | null;
  flops: number;
  compute_flop_share: number | null;
  sync_calls: number;
  /** Serving steps (vLLM / SGLang annotations): prefill / extend / decode / mixed, requests and query tokens. */
  phase?: string | null;
  batch?: number | null;
  tokens?: number | null;
  kv_tokens?: number | null;
  [category: string]: number | string | null | undefined;
}

export interface StepStats {
  mean: number | null;
  median: number | null;
  p90: number | null;
  min: number | null;
  max: number | null;
  spread: number | null;
  cv: number | null;
}

export interface OverviewHeadline {
  steps: number;
  step_time_us: StepStats;
  wall_us: number;
  gpu_busy_pct: number | null;
  tflops: number | null;
  mfu: number | null;
  mfu_dtype: string | null;
  peak_tflops: number | null;
  compute_flop_share: number | null;
  tensor_core_share: number | null;
  kernels_per_step: number | null;
  kernel_median_us: number | null;
  breakdown_us: Record<string, number>;
  comm_overlapped_us: number;
  compute_us: number;
  idle_us: number;
}

export interface RecommendationLink {
  label: string;
  tab: string;
  filter: string;
  op: string;
  span: string;
}

export interface Recommendation {
  id: string;
  title: string;
  advice: string;
  threshold: string;
  span: string;
  spans_fired: number;
  recoverable_us: number;
  recoverable_share: number | null;
  figures: Record<string, number | string | null>;
  items: Record<string, number | string | null>[];
  links: RecommendationLink[];
}

export interface OverviewResponse {
  categories: OverviewCategory[];
  source: string;
  missing: string[];
  launch_gap_us: number;
  headline: OverviewHeadline | Record<string, never>;
  spans: (OverviewHeadline & { span: string })[];
  steps: StepRow[];
  recommendations: Recommendation[];
}
