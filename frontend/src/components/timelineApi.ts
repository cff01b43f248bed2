// Types and fetchers of the Timeline routes (/timeline/meta, view, range, find, event).
import { getJson, type Selection } from "../api";

export interface TimelineLane {
  id: number;
  kind: "gpu" | "cpu" | "device";
  label: string;
  device?: number;
  stream?: number;
  pid?: string;
  tid?: string;
  depth?: number;
  events: number;
  /** Stacked ranks ("All ranks"): the rank, worker and span the lane belongs to. */
  rank?: number;
  worker?: string;
  span?: string;
}

export interface TimelineMeta {
  span: string;
  spans: string[];
  origin_us: number;
  duration_us: number;
  lanes: TimelineLane[];
  names: string[];
  classes: string[];
  idle_causes: string[];
  events: number;
  steps: number;
  max_width: number;
  /** Stacked ranks only: each rank's span and where its trace starts on the common time base. */
  ranks?: { rank: number; worker: string; span: string; offset_us: number }[];
}

export interface LaneEvents {
  start: number[];
  dur: number[];
  cls: number[];
  name: number[];
  act: number[];
  index: number[];
  eff?: (number | null)[];
}

export interface LaneBins {
  px0: number[];
  px1: number[];
  busy_us: number[];
  cls: number[];
}

export interface LaneView {
  id: number;
  busy_us: number;
  events: LaneEvents;
  bins: LaneBins;
}

export interface TimelineView {
  t0: number;
  t1: number;
  width: number;
  px_us: number;
  items: number;
  lanes: LaneView[];
  steps: { name: string; start: number; end: number }[];
  /** GPU idle gaps of at least a pixel; `cause` indexes TimelineMeta.idle_causes. */
  idle: { device: number; rank?: number; start: number[]; end: number[]; cause: number[] }[];
  over_roof_column: boolean;
}

export interface RangeRow {
  id: number;
  label: string;
  busy_us: number;
  idle_us: number;
  classes: Record<string, number>;
}

export interface RangeBreakdown {
  t0: number;
  t1: number;
  range_us: number;
  devices: RangeRow[];
  lanes: RangeRow[];
}

export interface Occurrence {
  lane: number;
  start: number;
  end: number;
}

export interface FindResult {
  name: string;
  count: number;
  occurrences: Occurrence[];
  truncated?: boolean;
  longest: (Occurrence & { index: number }) | null;
}

export interface TimelineEvent {
  index: number;
  lane: number;
  lane_label: string;
  name: string;
  class: string;
  start: number;
  dur: number;
  act: number;
  device: number | null;
}

type Q = Record<string, string | number | undefined>;

function q(sel: Selection, tspan: string, extra: Q): Q {
  return { run: sel.run, worker: sel.worker, span: sel.span, tspan, ...extra };
}

export const timelineApi = {
  meta: (sel: Selection, tspan: string, signal?: AbortSignal) => getJson<TimelineMeta>("timeline/meta", q(sel, tspan, {}), signal),
  view: (sel: Selection, tspan: string, p: { t0: number; t1: number; width: number; lanes: number[]; depth: number }, signal?: AbortSignal) =>
    getJson<TimelineView>("timeline/view", q(sel, tspan, { ...p, lanes: p.lanes.join(",") }), signal),
  range: (sel: Selection, tspan: string, t0: number, t1: number, signal?: AbortSignal) =>
    getJson<RangeBreakdown>("timeline/range", q(sel, tspan, { t0, t1 }), signal),
  find: (sel: Selection, tspan: string, name: string, signal?: AbortSignal) =>
    getJson<FindResult>("timeline/find", q(sel, tspan, { name }), signal),
  event: (sel: Selection, tspan: string, index: number, signal?: AbortSignal) =>
    getJson<TimelineEvent>("timeline/event", q(sel, tspan, { index }), signal),
};
