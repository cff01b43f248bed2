// Types and fetchers of the Tensor shapes routes (/op_shapes, /tensors, /shape_distribution).
import { getJson, selParams, type Order, type Selection } from "../../api";

export interface OpShapeRow {
  op: string;
  shape: string;
  input_dims: unknown;
  input_types: unknown;
  concrete_inputs: unknown;
  calls: number;
  cpu_us: number;
  mean_cpu_us: number;
  /** Total device time: what its calls and their child ops launched. */
  device_us: number | null;
  /** Device time of what its calls launched themselves (child ops excluded). */
  self_us: number | null;
  /** No call of it encloses a child op with device time. */
  leaf: boolean;
  id: string;
  parent: string | null;
  /** Depth in the op tree (tree view only). */
  depth?: number;
  kernels: number;
  flops: number | null;
  flops_reason: string;
  tflops: number | null;
  pct_peak: number | null;
  dtype: string | null;
  peak_tflops: number | null;
  /** "graph capture": kernels a graph replayed, counted through the op that captured them. */
  source?: string;
}

export type OpView = "leaf" | "all" | "tree";

export interface TensorRow {
  kind: "call" | "ret";
  t_ms: number;
  ts: number;
  shape: string;
  ndim: number;
  numel: number;
  bytes: number;
  ptr: string;
  name: string;
  function: string;
  file: string;
  line: number | null;
  op: string;
  op_shape: string;
  producer: string;
}

export interface Page<T> {
  total: number;
  rows: T[];
}

export interface OpShapesResponse extends Page<OpShapeRow> {
  record_shapes: boolean;
  message: string | null;
  spans: number;
  view: "flat" | "tree";
  /** Device time of the selection's ops, each microsecond once (the sum of self times). */
  device_us: number;
}

export interface TensorsResponse extends Page<TensorRow> {
  has_tensor_trace: boolean;
  message: string | null;
  files: { file: string; records: number; lines: number; errors: number }[];
  errors: { file: string; line: number; reason: string }[];
  error_count: number;
  matched: number;
}

export interface ShapeShare {
  shape: string;
  input_types: unknown;
  calls: number;
  share: number;
  cpu_us: number;
  device_us: number | null;
  tflops: number | null;
  pct_peak: number | null;
}

export interface DistributionResponse {
  op: string;
  total_calls: number;
  shapes: ShapeShare[];
}

export interface PageQuery {
  filter: string;
  sort: string;
  order: Order;
  offset: number;
  limit: number;
}

type Query = Record<string, string | number>;

// With the picked device (device_name), so that % of peak is against the same device as the other tabs.
const sel = (s: Selection): Query => selParams(s) as Query;

export const shapesApi = {
  opShapes: (s: Selection, q: PageQuery, leafOnly: boolean, signal?: AbortSignal) =>
    getJson<OpShapesResponse>("op_shapes", { ...sel(s), ...q, view: "flat", leaf: leafOnly ? "1" : "0" }, signal),
  opTree: (s: Selection, filter: string, signal?: AbortSignal) =>
    getJson<OpShapesResponse>("op_shapes", { ...sel(s), filter, view: "tree" }, signal),
  tensors: (s: Selection, q: PageQuery, signal?: AbortSignal) =>
    getJson<TensorsResponse>("tensors", { ...sel(s), ...q }, signal),
  distribution: (s: Selection, op: string, signal?: AbortSignal) =>
    getJson<DistributionResponse>("shape_distribution", { ...sel(s), op }, signal),
};
