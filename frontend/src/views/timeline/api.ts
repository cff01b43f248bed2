// Types and fetchers of the Timeline routes (/timeline/meta, view, range, find, event).
import { getJson, selParams, type Selection } from "../../api";

export interface TimelineLane {
  id: number;
  kind: "gpu" | "cpu" | "device";
  label: string;
  device?: number;
  stream?: number;
  pid?: string;
  tid?: string;
  depth?: number;
  /** A sub-row (1, 2, ...) of a stream or depth whose events overlap: no two boxes share a row. */
  row?: number;
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
  /** Each name as the tables show it (analysis/kernels/names.py display_name): what the boxes are labelled. */
  display_names?: string[];
  /** Each name's key (what Find and the drawers send back: names can be any length). */
  name_keys: string[];
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
  /** Launch flows: the lane of the CPU op that launched each GPU event and when the launch began (null: none). */
  src_lane?: (number | null)[];
  src_ts?: (number | null)[];
  /** Forward <-> backward links (Kineto's fwdbwd): the other op's lane and start (null: none). */
  fb_lane?: (number | null)[];
  fb_ts?: (number | null)[];
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

/** One occurrence found: its event position and name code (an index into TimelineMeta.names). */
export interface FoundOccurrence extends Occurrence {
  index: number;
  name: number;
}

export interface FoundName {
  code: number;
  name: string;
  display_name: string;
  key: string;
  count: number;
  total_us: number;
}

export interface FindResult {
  query: string;
  count: number;
  /** In time order, to step through. */
  occurrences: FoundOccurrence[];
  truncated?: boolean;
  longest: FoundOccurrence | null;
  /** The names found, most time first (at most 200 of `names_total`). */
  names: FoundName[];
  names_total: number;
}

/** What Find looks for: a name's key (any length), or a part of any form of a name. */
export type FindQuery = { name_key: string } | { q: string };

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
  name_key: string;
  /** A GPU event: the CPU op that launched it. A CPU op: the kernels it launched (at most 64 of launched_total). */
  launched_by?: FlowLink;
  launched?: (FlowLink & { act: number; efficiency?: number | null })[];
  launched_total?: number;
  /** A CPU op: its inputs (record_shapes), the nn.Module calls around it (with_stack), its Module Hierarchy, and
   * the op at the other end of its forward -> backward link. */
  inputs?: { dims: unknown[] | null; types: unknown[] | null; concrete: unknown[] | null };
  stack?: string[];
  module_path?: string;
  call_stack?: string[];
  forward?: OpLink;
  backward?: OpLink;
}

export interface OpLink {
  index: number;
  lane: number;
  name: string;
  start: number;
  dur: number;
}

export interface FlowLink {
  index: number;
  lane: number;
  name: string;
  start: number;
  dur: number;
  /** When the launch call began. */
  ts: number;
}

type Q = Record<string, string | number | undefined>;

function q(sel: Selection, tspan: string, extra: Q): Q {
  return { ...selParams(sel), tspan, ...extra }; // device_name: efficiency colouring against the picked device
}

export const timelineApi = {
  meta: (sel: Selection, tspan: string, signal?: AbortSignal) => getJson<TimelineMeta>("timeline/meta", q(sel, tspan, {}), signal),
  view: (sel: Selection, tspan: string, p: { t0: number; t1: number; width: number; lanes: number[]; depth: number }, signal?: AbortSignal) =>
    getJson<TimelineView>("timeline/view", q(sel, tspan, { ...p, lanes: p.lanes.join(",") }), signal),
  range: (sel: Selection, tspan: string, t0: number, t1: number, signal?: AbortSignal) =>
    getJson<RangeBreakdown>("timeline/range", q(sel, tspan, { t0, t1 }), signal),
  find: (sel: Selection, tspan: string, what: FindQuery, signal?: AbortSignal) =>
    getJson<FindResult>("timeline/find", q(sel, tspan, { ...what }), signal),
  event: (sel: Selection, tspan: string, index: number, signal?: AbortSignal) =>
    getJson<TimelineEvent>("timeline/event", q(sel, tspan, { index }), signal),
};
