// Types and fetchers of the critical-path routes (/critical_path, /critical_path/ranks).
import { getJson, type Selection } from "../../api";
import { PATH_CAUSE_COLORS } from "../../palette";

export type PathCause = "cpu_op" | "kernel" | "launch" | "sync_wait" | "communication" | "idle";

export const CAUSE_LABELS: Record<string, string> = {
  cpu_op: "CPU op",
  kernel: "GPU kernel",
  launch: "launch overhead",
  sync_wait: "sync wait",
  communication: "communication",
  idle: "idle",
};

export const CAUSE_COLORS: Readonly<Record<string, string>> = PATH_CAUSE_COLORS;

export interface PathStep {
  step: string;
  start_us: number;
  end_us: number;
  wall_us: number;
  path_us: number;
  causes: Record<string, number>;
}

export interface PathSegment {
  index: number;
  step: string;
  cause: PathCause;
  kind: string;
  name: string;
  /** The readable name (kernel template names folded); the raw one is the hover. */
  display_name?: string;
  start_us: number;
  dur_us: number;
  share: number;
  thread: number | null;
  stream: number | null;
  correlation: number | null;
  et_id: number | null;
}

export interface CriticalPath {
  available: boolean;
  reason: string | null;
  has_et: boolean;
  causes: string[];
  steps: PathStep[];
  segments: PathSegment[];
  totals: Record<string, number>;
}

export interface RankPath {
  worker: string;
  rank: number | null;
  wall_us: number;
  path_us: number;
  causes: Record<string, number>;
  top: { name: string; cause: string; dur_us: number } | null;
}

export interface RankPaths {
  ranks: RankPath[];
  longest: string | null;
  why: string;
}

export const criticalPathApi = {
  path: (s: Selection, signal?: AbortSignal) =>
    getJson<CriticalPath>("critical_path", { run: s.run, worker: s.worker, span: s.span }, signal),
  ranks: (run: string, span: string, signal?: AbortSignal) => getJson<RankPaths>("critical_path/ranks", { run, span }, signal),
};
