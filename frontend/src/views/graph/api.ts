// Types and fetchers of the Execution graph routes (/graph/view, /graph/node, /graph/search).
import { getJson, selParams, type Selection } from "../../api";

export type NodeKind = "op" | "annotation" | "group" | "root" | "backward";
export type Cause = "cpu_op" | "gpu_kernel" | "launch_gap" | "host_gap";

export interface GraphNode {
  id: number;
  label: string;
  kind: NodeKind;
  et_id: number | null;
  parent: number | null;
  expandable: boolean;
  size: number;
  cpu_us: number | null;
  gpu_us: number;
  flops: number;
  kernels: number;
  efficiency: number | null;
  /** The node itself is an op of the critical path (what the graph outlines). */
  critical: boolean;
  /** Ops of the critical path in the node's subtree (a group holds some without being on the path itself). */
  critical_ops: number;
  shapes: string;
}

export interface GraphEdge {
  source: number;
  target: number;
  count: number;
  critical: boolean;
}

export interface CriticalPathSummary {
  timed: boolean;
  length_us: number;
  step_us: number;
  ops: number;
  causes: Record<Cause, { us: number; share: number }>;
  steps: { id: number; name: string; cause: Cause; us: number }[];
}

export interface GraphView {
  /** False when the span has no Execution Trace (`reason` says so and how to record one). */
  available: boolean;
  reason: string | null;
  /** The node that `focus` / `focus_et` revealed (null when the ET has no node with that id). */
  focus?: number | null;
  nodes: GraphNode[];
  edges: GraphEdge[];
  capped: boolean;
  max_visible: number;
  expanded: { id: number; label: string; depth: number; parent: number | null }[];
  et_file: string;
  kineto_file: string | null;
  schema: string;
  warning: string;
  node_count: number;
  op_count: number;
  unit_count: number;
  data_edge_count: number;
  link: { method: string; offset: number; linked: number; linkable: number; rate: number };
  critical_path: CriticalPathSummary;
}

export interface EtArgs {
  values: unknown[];
  shapes: unknown[];
  types: string[];
  strides?: unknown[];
}

export interface GraphKernel {
  name: string;
  dur: number;
  op: string | null;
  flops: number | null;
  tflops: number | null;
  gbps: number | null;
  pct_peak: number | null;
  pct_dram: number | null;
  efficiency: number | null;
}

export interface NodeDetails {
  summary: GraphNode;
  path: string[];
  et?: {
    id: number;
    name: string;
    op_schema: string;
    rf_id: number;
    seq_id: number;
    tid: number;
    inputs: EtArgs;
    outputs: EtArgs;
    attrs: Record<string, unknown>;
  };
  kineto?: { ts: number; dur: number; method: string } | null;
  kernels?: GraphKernel[];
  forward?: { id: number; name: string } | null;
}

export interface SearchMatch {
  id: number;
  name: string;
  et_id: number;
  gpu_us: number;
  path: string[];
}

export interface ViewQuery {
  collapse: "annotation" | "depth";
  depth: number;
  open: number[];
  close: number[];
  focus: number | null;
  /** Reveal the node of this ET id (a critical-path segment names its op so). */
  focus_et?: number | null;
}

// With the picked device (device_name), so that the graph's efficiency is against the same device as the other tabs.
const sel = selParams;

export const graphApi = {
  view: (s: Selection, q: ViewQuery, signal?: AbortSignal) =>
    getJson<GraphView>(
      "graph/view",
      { ...sel(s), collapse: q.collapse, depth: q.depth, open: q.open.join(","), close: q.close.join(","), focus: q.focus, focus_et: q.focus_et },
      signal,
    ),
  node: (s: Selection, id: number, signal?: AbortSignal) => getJson<NodeDetails>("graph/node", { ...sel(s), id }, signal),
  search: (s: Selection, q: string, signal?: AbortSignal) =>
    getJson<{ matches: SearchMatch[] }>("graph/search", { ...sel(s), q }, signal),
};
