// Types and fetchers of the Memory routes (/memory, /memory_curve, /memory_allocations, /memory_ops).
import { getJson, selParams, type Selection } from "../../api";
import type { Page, PageQuery } from "../shapes/api";

export interface MemoryPeak {
  index: number;
  ts: number;
  allocated: number;
  reserved: number | null;
  live_count: number;
  live_bytes: number;
  before_span: number | null;
  unexplained: number | null;
}

export interface MemoryDevice {
  device: string;
  events: number;
  allocations: number;
  frees: number;
  allocated_bytes: number;
  frees_before_span: number | null;
  freed_before_span_bytes: number | null;
  never_freed: number | null;
  never_freed_bytes: number | null;
  peak: MemoryPeak | null;
  peak_reserved: number | null;
  peak_fragmentation: number | null;
  start_allocated: number | null;
  end_allocated: number | null;
  allocated_source: string;
  reserved_source: string;
  live_source: string;
  /** The datasheet row the device is rated as (the picked device, else the one the trace matched). */
  rated_as?: { name: string; memory_gb: number | null } | null;
}

export interface MemoryStep {
  name: string;
  ts: number;
  dur: number;
}

export interface MemorySummary {
  span: string;
  spans: string[];
  has_memory: boolean;
  message: string | null;
  start_us: number;
  end_us: number;
  steps: MemoryStep[];
  devices: MemoryDevice[];
}

export interface PixelSeries {
  first: (number | null)[];
  min: (number | null)[];
  max: (number | null)[];
  last: (number | null)[];
}

export interface MemoryCurve {
  start_us: number;
  end_us: number;
  width: number;
  events: number;
  t_us: number[];
  allocated: PixelSeries;
  reserved: PixelSeries;
  fragmentation: PixelSeries;
}

export interface AllocationRow {
  index: number;
  t_ms: number | null;
  bytes: number;
  addr: string;
  op_index: number;
  op: string;
  shape: string;
  module: string;
  lifetime_us: number | null;
  allocated_after: number | null;
}

export interface OpMemoryRow {
  op_index: number;
  op: string;
  shape: string;
  module: string;
  allocations: number;
  bytes: number;
  max_bytes: number;
  freed: number | null;
  never_freed: number | null;
  never_freed_bytes: number | null;
  mean_lifetime_us: number | null;
  max_lifetime_us: number | null;
  live_at_peak_bytes: number | null;
}

export type Which = "live_at_peak" | "never_freed" | "all";

export interface AllocationsPage extends Page<AllocationRow> {
  which: Which;
  bytes: number;
}

/** A page of a server-sorted table. */
export type TablePage = Omit<PageQuery, "filter">;

// With the picked device (device_name): the peak is read against that device's memory.
const sel = selParams;

export const memoryApi = {
  summary: (s: Selection, signal?: AbortSignal) => getJson<MemorySummary>("memory", sel(s), signal),
  curve: (s: Selection, device: string, width: number, range: [number, number] | null, signal?: AbortSignal) =>
    getJson<MemoryCurve>("memory_curve", { ...sel(s), device, width, ...(range ? { start_us: range[0], end_us: range[1] } : {}) }, signal),
  allocations: (s: Selection, device: string, which: Which, op: number | null, q: TablePage, signal?: AbortSignal) =>
    getJson<AllocationsPage>("memory_allocations", { ...sel(s), device, which, ...(op == null ? {} : { op }), ...q }, signal),
  ops: (s: Selection, device: string, q: TablePage, signal?: AbortSignal) =>
    getJson<Page<OpMemoryRow>>("memory_ops", { ...sel(s), device, ...q }, signal),
};
