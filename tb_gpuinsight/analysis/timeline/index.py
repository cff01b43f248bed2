"""Timeline index of one span and its level-of-detail viewport queries.

The index (built once by the analysis workers, stored in the span's summary as the "timeline" section) holds:
- lanes: one per GPU device and stream (kernels, memcpy, memset), one per CPU thread and nesting depth (ops), and
  one hidden "device" lane per GPU (the union of its streams: what busy and idle mean for the device);
- events sorted by lane then start: start / end (us from the trace's first event), a running maximum of the end
  (so that the first event visible after t0 is one binary search even where events overlap), class, name, and the
  row in the activity table (for efficiency and details);
- busy segments per (lane, class) and per lane: the merged intervals of that lane's events of that class with their
  cumulative busy time, so that the busy time of any range is two binary searches. A viewport's per-pixel busy time
  is the difference of that cumulative function at the pixel edges: vectorised, exact, and independent of how many
  events the pixel holds.

A viewport answer is bounded whatever the trace size: at most `max_events` individual events (those at least one
pixel wide, the longest first) and, per lane, at most `width` runs of per-pixel aggregates (busy time and dominant
class, equal pixels merged).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import GpuInsightError
from ...sections import Section, SectionContext
from ...trace.table import Interner, unique_rows
from ..correlate import op_parents
from ..kernels.grouping import merged_segments
from ..kernels.names import CLASSES as KERNEL_CLASSES, demangle, display_name, kernel_class, name_head
from ..overview import host
from ..overview.breakdown import CATEGORIES, IDLE, activity_categories, split_steps
from ..overview.steps import step_windows
from . import flows, layout, op_details

SECTION = "timeline"
CPU_OP, RUNTIME = "CPU op", "runtime"
CLASSES: Tuple[str, ...] = tuple(KERNEL_CLASSES) + (CPU_OP,)
_COMM = CLASSES.index("communication")
_CPU = CLASSES.index(CPU_OP)
_ALL = len(CLASSES)  # segment group of a lane's events of any class
_GROUPS = _ALL + 1
MAX_DEPTH = 12  # deeper CPU ops share the last depth lane
MAX_EVENTS = 4000
MAX_WIDTH = 8192
_CPU_COMM = re.compile(r"nccl|rccl|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|alltoall|broadcast_", re.I)
_STEP = re.compile(r"^ProfilerStep#\d+$")  # drawn as bands, not as ops of the CPU lanes
IDLE_CAUSES: Tuple[str, ...] = tuple(label.replace("idle: ", "") for _, label in IDLE)
_IDLE_COLS = [CATEGORIES.index(key) for key, _ in IDLE]


class TimelineError(GpuInsightError):
    """A viewport query that cannot be answered (bad range, unknown lane)."""


@dataclass
class TimelineIndex:
    """The per-span index; see the module docstring. Build with `build_index`, restore with `from_section`."""
    origin_us: float
    duration_us: float
    lanes: List[Dict[str, Any]]
    names: List[str]
    steps: List[str]
    arrays: Dict[str, np.ndarray]
    base_us: float = 0.0  # the trace's baseTimeNanoseconds in us: origin_us + base_us is absolute
    details: Dict[str, list] = field(default_factory=dict)  # the lists op_details' codes index

    def __getattr__(self, key: str) -> np.ndarray:
        try:
            return self.__dict__["arrays"][key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def event_count(self) -> int:
        return int(len(self.arrays["start"]))

    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))

    def to_section(self) -> Section:
        info = {"origin_us": self.origin_us, "duration_us": self.duration_us, "lanes": self.lanes,
                "names": self.names, "steps": self.steps, "classes": list(CLASSES), "base_us": self.base_us,
                "details": self.details}
        return Section(SECTION, info, dict(self.arrays))

    @classmethod
    def from_section(cls, section: Section) -> "TimelineIndex":
        info = section.check().info
        return cls(info["origin_us"], info["duration_us"], info["lanes"], info["names"], info["steps"],
                   section.arrays, float(info.get("base_us", 0.0)), info.get("details") or {})

    def busy_upto(self, group: int, x: np.ndarray) -> np.ndarray:
        """Busy time of one segment group from the start of the trace up to each time in `x` (sorted,
        vectorised). The search runs over the segments between x's ends only: small and cache-friendly when
        zoomed in on a big trace."""
        a, b = int(self.seg_off[group]), int(self.seg_off[group + 1])
        if a == b:
            return np.zeros(len(x))
        s_all = self.seg_start[a:b]
        lo = max(int(np.searchsorted(s_all, x[0], side="right")) - 1, 0)
        hi = int(np.searchsorted(s_all, x[-1], side="right"))
        s, e, cum = s_all[lo:hi], self.seg_end[a + lo:a + hi], self.seg_cum[a + lo:a + hi]
        if not len(s):
            return np.zeros(len(x))
        j = np.searchsorted(s, x, side="right") - 1
        jc = np.maximum(j, 0)
        inside = np.clip(x - s[jc], 0.0, e[jc] - s[jc])
        return np.where(j >= 0, cum[jc] + inside, 0.0)  # j < 0 only before the group's first segment

    def busy(self, lane: int, t0: float, t1: float, cls: Optional[int] = None) -> float:
        """Exact busy time of a lane (one class, or any) within [t0, t1]."""
        upto = self.busy_upto(lane * _GROUPS + (_ALL if cls is None else cls), np.array([t0, t1]))
        return float(upto[1] - upto[0])


# ------------------------------------------------------------------------------------------------------- build

def build_section(ctx: SectionContext) -> Section:
    """Section builder (registered in sections.py): the timeline index of one trace."""
    return build_index(ctx.trace, ctx.eff).to_section()


def build_index(trace, eff) -> TimelineIndex:
    """The index of a loaded trace and its (rated or unrated) efficiency analysis."""
    origin = float(trace.meta.start_us or 0.0)
    names = Interner()
    lanes: List[Dict[str, Any]] = []
    parts: List[Dict[str, np.ndarray]] = []
    _gpu_lanes(eff.activities, origin, names, lanes, parts)
    _cpu_lanes(trace.ops, origin, names, lanes, parts)
    _device_lanes(lanes, parts)
    arrays = _events_and_segments(parts)
    op_rows = arrays.pop("op")
    flows.launch_flows(trace, eff.activities, origin, arrays, op_rows)
    arrays["fb_peer"] = flows.fwd_bwd_links(trace.ops, op_rows)
    details = op_details.add_details(trace, arrays, op_rows)
    arrays["gap_cause"] = _gap_causes(trace, eff.activities, origin, lanes, arrays)
    steps = step_windows(trace)
    has_steps = steps.annotated
    arrays.update(step_start=steps.start - origin if has_steps else np.empty(0),
                  step_end=steps.end - origin if has_steps else np.empty(0))
    step_names = steps.step_names()
    return TimelineIndex(origin, float(trace.meta.duration_us), lanes, list(names.items), step_names, arrays,
                         (trace.meta.base_time_ns or 0) / 1000.0, details)


def _lane_part(start, end, cls, name, act, op=None) -> Dict[str, np.ndarray]:
    """One lane's events sorted by start; `act` their activity rows (-1 for CPU ops), `op` their op rows (-1 for
    GPU activities: the flows of `flows.py` link the two)."""
    order = np.lexsort((-(end - start), start))
    op = np.full(len(start), -1, dtype=np.int64) if op is None else op
    return {"start": start[order], "end": end[order], "cls": cls[order].astype(np.int8),
            "name": name[order].astype(np.int32), "act": act[order].astype(np.int32), "op": op[order]}


def _gpu_lanes(acts, origin: float, names: Interner, lanes: List, parts: List) -> None:
    if not len(acts):
        return
    kinds, act_names, op_names = acts.strings["kind"], acts.strings["name"], acts.strings.get("op_name", [])
    # One class per distinct (name, kind, op): the classifier runs once per distinct kernel, not per launch.
    key = np.stack([acts["name"].astype(np.int64), acts["kind"].astype(np.int64), acts["op_name"].astype(np.int64)], 1)
    distinct, which = unique_rows(key)
    cls_of = np.array([CLASSES.index(kernel_class(act_names[n], kinds[k], op_names[o] if o >= 0 else None))
                       for n, k, o in distinct.tolist()], dtype=np.int8)
    name_of = np.array([names.code(act_names[n]) for n in distinct[:, 0].tolist()], dtype=np.int32)
    which = which.reshape(-1)
    cls, name = cls_of[which], name_of[which]
    start = acts["ts"] - origin
    end = start + np.maximum(acts["dur"], 0.0)
    rows = np.arange(len(acts))
    for dev, stream in sorted(set(zip(acts["device"].tolist(), acts["stream"].tolist()))):
        on = np.flatnonzero((acts["device"] == dev) & (acts["stream"] == stream))
        sub = layout.sub_rows(start[on], end[on])
        for r in range(int(sub.max()) + 1 if len(sub) else 1):
            at = on[sub == r]
            lanes.append({"id": len(lanes), "kind": "gpu", "device": int(dev), "stream": int(stream), "row": r,
                          "label": f"GPU {int(dev)} · stream {int(stream)}" + (f" · row {r + 1}" if r else "")})
            parts.append(_lane_part(start[at], end[at], cls[at], name[at], rows[at]))


def _cpu_lanes(ops, origin: float, names: Interner, lanes: List, parts: List) -> None:
    if not len(ops):
        return
    op_names = ops.strings["name"]
    is_step = np.array([bool(_STEP.match(n)) for n in op_names], dtype=bool)
    keep = ~is_step[ops["name"]] if len(op_names) else np.ones(len(ops), bool)  # steps are drawn as bands
    depth = np.minimum(_depths(op_parents(ops)), MAX_DEPTH - 1)
    code = np.array([names.code(n) for n in op_names], dtype=np.int32)
    comm = np.array([bool(_CPU_COMM.search(name_head(n))) for n in op_names], dtype=bool)  # linear in a 10 MB name
    cls = np.where(comm[ops["name"]], _COMM, _CPU).astype(np.int8)
    start = ops["ts"] - origin
    end = start + np.maximum(ops["dur"], 0.0)
    pids, tids = ops.strings["pid"], ops.strings["tid"]
    rows = np.full(len(ops), -1, dtype=np.int32)  # CPU ops have no activity row
    for pid, tid in sorted(set(zip(ops["pid"].tolist(), ops["tid"].tolist()))):
        thread = keep & (ops["pid"] == pid) & (ops["tid"] == tid)
        # Depth counts from the thread's outermost drawn op (a dropped ProfilerStep parent shifts children up).
        base = depth[thread].min() if thread.any() else 0
        for d in sorted(set(depth[thread].tolist())):
            on = np.flatnonzero(thread & (depth == d))
            sub = layout.sub_rows(start[on], end[on])
            for r in range(int(sub.max()) + 1):
                at = on[sub == r]
                label = f"thread {tids[tid]}" + (f" · depth {d - base}" if d > base else "") + \
                    (f" · row {r + 1}" if r else "")
                lanes.append({"id": len(lanes), "kind": "cpu", "pid": pids[pid], "tid": tids[tid],
                              "depth": int(d - base), "row": r, "label": label})
                parts.append(_lane_part(start[at], end[at], cls[at], code[ops["name"][at]], rows[at], at))


def _depths(parents: np.ndarray) -> np.ndarray:
    """Nesting depth of each op from its parent links (pointer jumping: one pass per level)."""
    depth = np.zeros(len(parents), dtype=np.int32)
    up = parents.copy()
    while True:
        has = up >= 0
        if not has.any():
            return depth
        depth[has] += 1
        up[has] = parents[up[has]]


def _device_lanes(lanes: List, parts: List) -> None:
    """A hidden lane per GPU holding no events of its own, only the union of its streams' busy time."""
    for dev in sorted({lane["device"] for lane in lanes if lane["kind"] == "gpu"}):
        members = [i for i, lane in enumerate(lanes) if lane["kind"] == "gpu" and lane["device"] == dev]
        lanes.append({"id": len(lanes), "kind": "device", "device": dev, "label": f"GPU {dev} (all streams)",
                      "members": members})
        merged = {k: np.concatenate([parts[i][k] for i in members]) for k in parts[members[0]]}
        parts.append({**merged, "union_only": np.ones(1, bool)})


def _events_and_segments(parts: List[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    ev = {k: [] for k in ("start", "end", "cls", "name", "act", "op")}
    seg_s, seg_e, seg_c, seg_n = [], [], [], []
    lane_off = [0]
    for part in parts:
        for cls in range(_GROUPS):
            sel = part["cls"] == cls if cls < _ALL else slice(None)
            s, e = merged_segments(part["start"][sel], part["end"][sel])
            seg_s.append(s)
            seg_e.append(e)
            seg_c.append(np.concatenate([[0.0], np.cumsum(e - s)[:-1]]) if len(s) else s)
            seg_n.append(len(s))
        if "union_only" not in part:
            for k in ev:
                ev[k].append(part[k])
            lane_off.append(lane_off[-1] + len(part["start"]))
        else:
            lane_off.append(lane_off[-1])
    out = {k: np.concatenate(v) if v else np.empty(0) for k, v in ev.items()}
    out["cls"] = out["cls"].astype(np.int8)
    out["name"] = out["name"].astype(np.int32)
    out["act"] = out["act"].astype(np.int32)
    offsets = np.asarray(lane_off, dtype=np.int64)
    out["lane_off"] = offsets
    out["end_max"] = _running_max_per_lane(out["end"], offsets)
    out["seg_off"] = np.concatenate([[0], np.cumsum(seg_n)]).astype(np.int64)
    for key, chunks in (("seg_start", seg_s), ("seg_end", seg_e), ("seg_cum", seg_c)):
        out[key] = np.concatenate(chunks).astype(np.float64) if chunks else np.empty(0)
    return out




def _running_max_per_lane(end: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    out = np.empty_like(end)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        if b > a:
            out[a:b] = np.maximum.accumulate(end[a:b])
    return out


def _gap_causes(trace, acts, origin: float, lanes: List[Dict[str, Any]], arr: Dict[str, np.ndarray]) -> np.ndarray:
    """Why each GPU was idle, per gap between its busy intervals (the Overview's rules: data loading,
    synchronisation, launch-bound, host-bound, other), as an index into IDLE_CAUSES on the segment before the gap
    (-1 elsewhere)."""
    cause = np.full(len(arr["seg_start"]), -1, dtype=np.int8)
    if not len(acts):
        return cause
    correlation = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    if len(correlation) != len(acts):
        correlation = np.full(len(acts), -1, dtype=np.int64)
    _, launch_end = host.launch_times(trace, correlation)
    category = activity_categories(acts)
    hosts = (host.dataloader_intervals(trace), host.sync_intervals(trace), host.cpu_op_intervals(trace))
    start, end = acts["ts"], acts["ts"] + acts["dur"]
    for lane in lanes:
        if lane["kind"] != "device":
            continue
        group = lane["id"] * _GROUPS + _ALL
        a, b = int(arr["seg_off"][group]), int(arr["seg_off"][group + 1])
        if b - a < 2:
            continue
        gaps = (arr["seg_end"][a:b - 1] + origin, arr["seg_start"][a + 1:b] + origin)
        on = acts["device"] == lane["device"]
        split, _ = split_steps(gaps, start[on], end[on], category[on], launch_end[on], *hosts)
        cause[a:b - 1] = np.argmax(split[:, _IDLE_COLS], axis=1)
    return cause


# ------------------------------------------------------------------------------------------------------- query

def check_range(index: TimelineIndex, t0: float, t1: float, width: int = 1) -> None:
    if not (np.isfinite(t0) and np.isfinite(t1) and t1 > t0):
        raise TimelineError("the time range must have t1 > t0 (microseconds from the trace start)")
    if not 1 <= width <= MAX_WIDTH:
        raise TimelineError(f"width must be between 1 and {MAX_WIDTH} pixels")


def lane_ids(index: TimelineIndex, wanted: Optional[Sequence[int]], max_depth: Optional[int]) -> List[int]:
    """Visible lanes: the requested ones (or all drawable), CPU lanes deeper than `max_depth` left out."""
    drawable = [lane["id"] for lane in index.lanes if lane["kind"] != "device" and
                (max_depth is None or lane.get("depth", 0) <= max_depth)]
    if wanted is None:
        return drawable
    unknown = [i for i in wanted if not 0 <= i < len(index.lanes)]
    if unknown:
        raise TimelineError(f"no lane {unknown[0]} in this span's timeline")
    return [i for i in wanted if index.lanes[i]["kind"] != "device"]


def viewport(index: TimelineIndex, t0: float, t1: float, width: int, lanes: Optional[Sequence[int]] = None,
             max_depth: Optional[int] = None, max_events: int = MAX_EVENTS,
             efficiency: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """Level-of-detail data of [t0, t1] (us from the trace start) drawn `width` pixels wide.

    Per lane: `events` (columns; only events at least one pixel wide, the longest first when more than the lane's
    share of `max_events`), `bins` (runs of equal pixels: first and last pixel, busy us, dominant class) and the
    lane's exact `busy_us`. `efficiency` (per activity row) adds each GPU event's % of roof."""
    check_range(index, t0, t1, width)
    ids = lane_ids(index, lanes, max_depth)
    px = (t1 - t0) / width
    edges = t0 + px * np.arange(width + 1)
    budget = max(16, max_events // max(1, len(ids)))
    out_lanes, items = [], 0
    for lane in ids:
        events = _wide_events(index, lane, t0, t1, px, budget, efficiency)
        bins = _bins(index, lane, edges, px)
        items += len(events["start"]) + len(bins["px0"])
        out_lanes.append({"id": lane, "busy_us": index.busy(lane, t0, t1), "events": events, "bins": bins})
    return {"t0": t0, "t1": t1, "width": width, "px_us": px, "lanes": out_lanes, "items": items,
            "steps": _steps_in(index, t0, t1, width), "idle": _idle_gaps(index, t0, t1, px, width)}


def _visible(index: TimelineIndex, lane: int, t0: float, t1: float) -> Tuple[int, int]:
    a, b = int(index.lane_off[lane]), int(index.lane_off[lane + 1])
    lo = a + int(np.searchsorted(index.end_max[a:b], t0, side="right"))
    hi = a + int(np.searchsorted(index.start[a:b], t1, side="left"))
    return lo, max(lo, hi)


def _wide_events(index: TimelineIndex, lane: int, t0: float, t1: float, px: float, budget: int,
                 efficiency: Optional[np.ndarray]) -> Dict[str, List]:
    lo, hi = _visible(index, lane, t0, t1)
    start, end = index.start[lo:hi], index.end[lo:hi]
    wide = np.flatnonzero((end - start) >= px)
    if len(wide) > budget:
        wide = np.sort(wide[np.argsort(-(end[wide] - start[wide]), kind="stable")[:budget]])
    rows = lo + wide
    act = index.act[rows]
    out = {"start": _round(index.start[rows]), "dur": _round(index.end[rows] - index.start[rows]),
           "cls": index.cls[rows].tolist(), "name": index.name[rows].tolist(), "act": act.tolist(),
           "index": rows.tolist(), **flows.viewport_flows(index, rows)}
    if efficiency is not None:
        eff = np.full(len(act), np.nan)
        eff[act >= 0] = efficiency[act[act >= 0]]  # CPU ops (-1) have none; a CPU-only trace has no table
        out["eff"] = [None if v != v else round(float(v), 4) for v in eff.tolist()]
    return out


def _round(values: np.ndarray) -> List[float]:
    return np.round(values, 4).tolist()


def _bins(index: TimelineIndex, lane: int, edges: np.ndarray, px: float) -> Dict[str, List]:
    """Runs of pixels with the same (busy fraction to 1/1000, dominant class); each run's busy time is exact."""
    base = lane * _GROUPS
    busy = np.diff(index.busy_upto(base + _ALL, edges))
    empty = {"px0": [], "px1": [], "busy_us": [], "cls": []}
    if not busy.any():
        return empty
    present = [c for c in range(_ALL) if _has_segments_in(index, base + c, edges[0], edges[-1])]
    if len(present) == 1:
        dominant = np.full(len(busy), present[0])
    else:
        per_class = np.stack([np.diff(index.busy_upto(base + c, edges)) for c in present])
        dominant = np.asarray(present)[np.argmax(per_class, axis=0)]
    quant = np.round(busy / px * 1000).astype(np.int64)
    key = np.where(busy > 0, 1 + quant * _GROUPS + dominant, 0)
    starts = np.flatnonzero(np.diff(key, prepend=-1) != 0)
    run_busy = np.add.reduceat(busy, starts)
    ends = np.append(starts[1:], len(busy)) - 1
    keep = key[starts] > 0
    return {"px0": starts[keep].tolist(), "px1": ends[keep].tolist(), "busy_us": _round(run_busy[keep]),
            "cls": dominant[starts[keep]].tolist()}


def _has_segments_in(index: TimelineIndex, group: int, t0: float, t1: float) -> bool:
    a, b = int(index.seg_off[group]), int(index.seg_off[group + 1])
    if a == b:
        return False
    first_after = a + int(np.searchsorted(index.seg_end[a:b], t0, side="right"))
    return first_after < b and index.seg_start[first_after] < t1


def _steps_in(index: TimelineIndex, t0: float, t1: float, width: int) -> List[Dict[str, Any]]:
    on = np.flatnonzero((index.step_end > t0) & (index.step_start < t1))[:width]
    return [{"name": index.steps[i], "start": float(index.step_start[i]), "end": float(index.step_end[i])}
            for i in on.tolist()]


def _idle_gaps(index: TimelineIndex, t0: float, t1: float, px: float, width: int) -> List[Dict[str, Any]]:
    """Per GPU, the gaps of at least one pixel between its busy intervals within the view (at most `width`)."""
    out = []
    for lane in index.lanes:
        if lane["kind"] != "device":
            continue
        group = lane["id"] * _GROUPS + _ALL
        a, b = int(index.seg_off[group]), int(index.seg_off[group + 1])
        s, e = index.seg_start[a:b], index.seg_end[a:b]
        lo = max(0, int(np.searchsorted(e, t0)) - 1)
        hi = min(len(s), int(np.searchsorted(s, t1)) + 1)
        gap_s, gap_e = e[lo:hi - 1], s[lo + 1:hi]
        on = np.flatnonzero((gap_e - gap_s >= px) & (gap_e > t0) & (gap_s < t1))
        if len(on) > width:
            on = np.sort(on[np.argsort(-(gap_e[on] - gap_s[on]))[:width]])
        out.append({"device": lane["device"], "start": _round(gap_s[on]), "end": _round(gap_e[on]),
                    "cause": index.gap_cause[a + lo + on].tolist()})
    return out


def breakdown(index: TimelineIndex, t0: float, t1: float) -> Dict[str, Any]:
    """Busy / idle / class times of a selected range: per lane, and per GPU (union of its streams)."""
    check_range(index, t0, t1)
    lanes, devices = [], []
    for lane in index.lanes:
        busy = index.busy(lane["id"], t0, t1)
        classes = {CLASSES[c]: round(index.busy(lane["id"], t0, t1, c), 4) for c in range(_ALL)}
        row = {"id": lane["id"], "label": lane["label"], "busy_us": round(busy, 4),
               "idle_us": round(t1 - t0 - busy, 4), "classes": {k: v for k, v in classes.items() if v > 0}}
        (devices if lane["kind"] == "device" else lanes).append(row)
    return {"t0": t0, "t1": t1, "range_us": t1 - t0, "devices": devices, "lanes": lanes}


MAX_MATCHES = 200  # distinct names one Find lists (the most time first)


def search_names(names: Sequence[str], query: str) -> List[int]:
    """Codes of the names that contain `query`, case-insensitive, in any form a view shows: the raw name as
    recorded, its demangled form, or the short display name of the tables ("sgemm" finds `volta_sgemm_128x64_nn`,
    "rmsnorm2dfwd" a mangled CK kernel)."""
    needle = query.strip().lower()
    if not needle:
        return []
    return [code for code, name in enumerate(names) if any(needle in form.lower() for form in _forms(name))]


def _forms(name: str) -> Tuple[str, ...]:
    return (name, demangle(name) or "", display_name(name))


def find(index: TimelineIndex, name: str, t0: Optional[float] = None, t1: Optional[float] = None,
         limit: int = MAX_EVENTS) -> Dict[str, Any]:
    """Every occurrence of one exact event name (see `find_codes`), with the name."""
    codes = [code for code, n in enumerate(index.names) if n == name]
    return {"name": name, **find_codes(index, codes, t0, t1, limit)}


def find_codes(index: TimelineIndex, codes: Sequence[int], t0: Optional[float] = None, t1: Optional[float] = None,
               limit: int = MAX_EVENTS) -> Dict[str, Any]:
    """Every occurrence of the events named by `codes` (indexes into `index.names`): the count, up to `limit`
    occurrences in [t0, t1] (or anywhere) in time order to step through, each with its lane, event position and
    name code, the longest one (to land on), and per name its count and total time (`names`, the most time first).
    """
    rows = np.flatnonzero(np.isin(index.name, np.asarray(codes, dtype=np.int64))) if len(codes) else \
        np.empty(0, dtype=np.int64)
    start, end = index.start[rows], index.end[rows]
    if not len(rows):
        return {"count": 0, "occurrences": [], "truncated": False, "longest": None, "names": []}
    lane_of = np.searchsorted(index.lane_off, rows, side="right") - 1
    shown = np.ones(len(rows), bool) if t0 is None or t1 is None else (end > t0) & (start < t1)
    order = np.flatnonzero(shown)
    order = order[np.argsort(start[order], kind="stable")]
    occ = [_occurrence(index, rows, lane_of, i) for i in order[:limit].tolist()]
    per_name = _per_name(index.name[rows], end - start)
    return {"count": int(len(rows)), "occurrences": occ, "truncated": bool(len(order) > limit),
            "longest": _occurrence(index, rows, lane_of, int(np.argmax(end - start))), "names": per_name}


def _occurrence(index: TimelineIndex, rows: np.ndarray, lane_of: np.ndarray, i: int) -> Dict[str, Any]:
    row = int(rows[i])
    return {"lane": int(lane_of[i]), "start": float(index.start[row]), "end": float(index.end[row]), "index": row,
            "name": int(index.name[row])}


def _per_name(codes: np.ndarray, dur: np.ndarray) -> List[Dict[str, Any]]:
    distinct, which = np.unique(codes, return_inverse=True)
    total = np.bincount(which.reshape(-1), weights=dur, minlength=len(distinct))
    count = np.bincount(which.reshape(-1), minlength=len(distinct))
    order = np.argsort(-total, kind="stable")
    return [{"code": int(distinct[i]), "count": int(count[i]), "total_us": round(float(total[i]), 4)}
            for i in order.tolist()]


def event(index: TimelineIndex, row: int) -> Dict[str, Any]:
    """One event of the index by its position (what a click on the timeline names)."""
    if not 0 <= row < index.event_count:
        raise TimelineError(f"no event {row} in this span's timeline")
    lane = int(np.searchsorted(index.lane_off, row, side="right") - 1)
    return {"index": row, "lane": lane, "lane_label": index.lanes[lane]["label"], "name": index.names[index.name[row]],
            "class": CLASSES[index.cls[row]], "start": float(index.start[row]),
            "dur": float(index.end[row] - index.start[row]), "act": int(index.act[row]),
            "device": index.lanes[lane].get("device"), **flows.event_flows(index, row),
            **op_details.details(index, row)}


def meta(index: TimelineIndex) -> Dict[str, Any]:
    """What the tab needs before its first viewport: lanes, classes, names, duration, steps."""
    counts = np.diff(index.lane_off)
    lanes = [{**lane, "events": int(counts[lane["id"]])} for lane in index.lanes]
    return {"origin_us": index.origin_us, "duration_us": index.duration_us, "lanes": lanes, "names": index.names,
            "classes": list(CLASSES), "idle_causes": list(IDLE_CAUSES), "events": index.event_count,
            "steps": len(index.steps), "max_width": MAX_WIDTH, "max_events": MAX_EVENTS}


ROW_FIELDS = ("lane", "lane_label", "item", "start_us", "end_us", "busy_us", "name", "class", "pct_of_roof")


def rows(index: TimelineIndex, view: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A viewport flattened to one row per item (for CSV and DataFrames): `item` is "event" (one event) or "bins"
    (a run of pixels aggregated: its busy time and dominant class)."""
    out: List[Dict[str, Any]] = []
    t0, px = view["t0"], view["px_us"]
    for lane in view["lanes"]:
        label = index.lanes[lane["id"]]["label"]
        ev = lane["events"]
        effs = ev.get("eff") or [None] * len(ev["start"])
        for s, d, c, n, e in zip(ev["start"], ev["dur"], ev["cls"], ev["name"], effs):
            out.append({"lane": lane["id"], "lane_label": label, "item": "event", "start_us": s, "end_us": s + d,
                        "busy_us": d, "name": index.names[n], "class": CLASSES[c], "pct_of_roof":
                        None if e is None else e * 100})
        b = lane["bins"]
        for p0, p1, busy, c in zip(b["px0"], b["px1"], b["busy_us"], b["cls"]):
            out.append({"lane": lane["id"], "lane_label": label, "item": "bins", "start_us": t0 + p0 * px,
                        "end_us": t0 + (p1 + 1) * px, "busy_us": busy, "name": None, "class": CLASSES[c],
                        "pct_of_roof": None})
    return out
