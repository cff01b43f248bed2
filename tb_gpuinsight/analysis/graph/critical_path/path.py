"""Critical path of every step of a trace, over the joint CPU + GPU dependency graph of `deps.py` (its
docstring lists the dependency rules), attributed to causes.

The path of a step is the chain of dependencies that decided when the step's work ended, as measured: starting
from the step's end (the GPU activity still running at the step boundary, else the last event to end in it), go
back to the critical predecessor of each point, the dependency that arrived last, until the step's start. Every
microsecond of the step lies on one segment of that walk, charged to an event and a cause:
"cpu_op" (an op's or annotation's own time), "kernel" (GPU activities and the queue gap after them),
"launch" (launch calls, and the GPU waiting for a launch), "sync_wait" (blocking syncs, cross-stream and data
waits), "communication" (collective kernels and ops), "idle" (host time outside any traced op, and time with no
traced work at all). `wall_us` is the step's time, `path_us` the time of the path spent in traced work
(wall minus idle); the causes sum to the wall time.

Relation to HTA's critical-path analysis (the anchor): the same typed edges (CPU nesting, launch, kernel-kernel,
GPU->CPU and GPU->GPU sync), but HTA takes the longest path where waits weigh zero, so its path skips host gaps and
sync waits and is shorter than the step; here the walk follows the measured last-arriving dependency, which gives the
same chain where the trace's timings are consistent with the dependencies, and covers the whole step.
Cost: the graph is built with vectorised numpy (sorting and binary searches, O(n log n)); the CPU call stacks are one
linear pass; each step's walk visits only the points on its path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ....sections import Section, SectionContext
from ....trace.text import safe_text
from .deps import CAUSES, IDLE, K_HOST_GAP, KINDS, NO, Graph, build_graph
from ...kernels.names import display_name
from ...overview.steps import step_windows

SECTION = "critical_path"
_SEG_COLS = ("step", "cause", "kind", "name", "start", "dur", "thread", "device", "stream", "correlation", "et_id")
_SEG_DTYPES = {"step": np.int32, "cause": np.int8, "kind": np.int8, "name": np.int32, "start": np.float64,
               "dur": np.float64, "thread": np.int64, "device": np.int64, "stream": np.int64,
               "correlation": np.int64, "et_id": np.int64}
HOST_GAP = "(host, outside any op)"


SEGMENT_COLUMNS = ["index", "step", "cause", "kind", "name", "display_name", "start_us", "dur_us", "share", "thread",
                   "device", "stream", "correlation", "et_id"]


@dataclass
class CriticalPath:
    """The critical path of every step of one trace. `seg` holds the segments in path order (step by step) as
    columns: step index, cause / kind codes (into CAUSES / KINDS), name code (into `names`), start (us from the
    trace's first event, the Timeline's time base), dur, thread, device, stream, correlation, ET node id (-1 = none)."""
    steps: List[Dict[str, Any]]
    seg: Dict[str, np.ndarray]
    names: List[str]
    origin_us: float = 0.0
    base_us: float = 0.0
    has_et: bool = False
    rank: Optional[int] = None
    notes: Dict[str, Any] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return bool(self.steps)

    def to_section(self) -> Section:
        info = {"steps": self.steps, "names": self.names, "origin_us": self.origin_us, "base_us": self.base_us,
                "has_et": self.has_et, "rank": self.rank, "notes": self.notes, "causes": list(CAUSES),
                "kinds": list(KINDS)}
        return Section(SECTION, info, {f"seg_{k}": v for k, v in self.seg.items()})

    @classmethod
    def from_section(cls, section: Section) -> "CriticalPath":
        info = section.check().info
        seg = {k: section.arrays.get(f"seg_{k}", np.empty(0, _SEG_DTYPES[k])) for k in _SEG_COLS}
        return cls(info["steps"], seg, info["names"], info.get("origin_us", 0.0), info.get("base_us", 0.0),
                   bool(info.get("has_et")), info.get("rank"), info.get("notes", {}))

    def totals(self, steps: Optional[Sequence[int]] = None) -> Dict[str, float]:
        """Time per cause over the steps (all by default)."""
        chosen = range(len(self.steps)) if steps is None else steps
        return {c: float(sum(self.steps[i]["causes"][c] for i in chosen)) for c in CAUSES}

    def segments(self, step: Optional[int] = None) -> List[Dict[str, Any]]:
        """JSON-ready segments in path order (of one step index, or all)."""
        rows = np.arange(len(self.seg["step"])) if step is None else np.flatnonzero(self.seg["step"] == step)
        return self.segment_rows(rows)

    def segment(self, i: int) -> Dict[str, Any]:
        """Segment i, JSON-ready."""
        return self.segment_rows([i])[0]

    def segment_rows(self, rows: Sequence[int]) -> List[Dict[str, Any]]:
        """Segments `rows` (indices into the columns), JSON-ready; read column by column, so a path of 10^6
        segments (a kernel per segment) costs one pass per column rather than a dozen numpy reads per segment."""
        rows = np.asarray(rows, dtype=np.int64)
        col = {k: self.seg[k][rows].tolist() for k in _SEG_COLS}
        labels = [st["step"] for st in self.steps]
        walls = [st["wall_us"] for st in self.steps]
        opt = [[None if x < 0 else x for x in col[k]] for k in ("thread", "device", "stream", "correlation",
                                                               "et_id")]
        shown = {n: display_name(self.names[n]) for n in set(col["name"])}  # once per distinct name
        return [{"index": i, "step": labels[st], "cause": CAUSES[c], "kind": KINDS[k], "name": self.names[n],
                 "display_name": shown[n], "start_us": start, "dur_us": dur,
                 "share": dur / walls[st] if walls[st] > 0 else 0.0,
                 "thread": th, "device": dev, "stream": sm, "correlation": corr, "et_id": et}
                for i, st, c, k, n, start, dur, th, dev, sm, corr, et
                in zip(rows.tolist(), col["step"], col["cause"], col["kind"], col["name"], col["start"], col["dur"],
                       *opt)]

    def step_index(self, wanted: Any) -> Optional[int]:
        """A step by its label ("ProfilerStep#12"), its number ("12" or 12) or its position ("#0")."""
        wanted = str(wanted)
        for i, step in enumerate(self.steps):
            if wanted in (step["step"], str(step.get("number"))):
                return i
        if wanted.startswith("#") and wanted[1:].isdigit() and int(wanted[1:]) < len(self.steps):
            return int(wanted[1:])
        return None

    def longest(self, step: Optional[int] = None) -> Optional[Dict[str, Any]]:
        """The longest segment (of a step, or of all)."""
        rows = np.arange(len(self.seg["dur"])) if step is None else np.flatnonzero(self.seg["step"] == step)
        if not len(rows):
            return None
        return self.segment(int(rows[np.argmax(self.seg["dur"][rows])]))

    def steps_frame(self):
        """One row per step: wall, path and time per cause (us)."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in s.items() if k != "causes"} | s["causes"] for s in self.steps],
                            columns=None if self.steps else ["step"])

    def segments_frame(self):
        """One row per segment, in path order (built column by column: a path can hold 10^6 segments)."""
        import pandas as pd

        return pd.DataFrame(self.segment_columns(), columns=SEGMENT_COLUMNS)

    def segment_columns(self, rows: Optional[np.ndarray] = None) -> Dict[str, Any]:
        """The segments_frame columns of the segments at `rows` (all by default); `index` is their position in
        the path."""
        s = self.seg
        rows = np.arange(len(s["step"])) if rows is None else rows
        if not len(rows):
            return {c: [] for c in SEGMENT_COLUMNS}
        pick = lambda values, codes: np.array(values, dtype=object)[codes].tolist()  # noqa: E731
        step = s["step"][rows]
        dur = s["dur"][rows]
        wall = np.array([st["wall_us"] for st in self.steps], dtype=np.float64)[step]
        data = {"index": rows, "step": pick([st["step"] for st in self.steps], step),
                "cause": pick(CAUSES, s["cause"][rows]), "kind": pick(KINDS, s["kind"][rows]),
                "name": pick(self.names, s["name"][rows]), "display_name": self._display_names(s["name"][rows]),
                "start_us": s["start"][rows].astype(np.float64), "dur_us": dur.astype(np.float64),
                "share": np.divide(dur, wall, out=np.zeros(len(wall)), where=wall > 0)}
        for k in ("thread", "device", "stream", "correlation", "et_id"):  # -1 = none, as in segment_rows
            values = s[k][rows]
            data[k] = values if (values >= 0).all() else [None if x < 0 else x for x in values.tolist()]
        return data

    def _display_names(self, codes: np.ndarray) -> list:
        """The display name of each name code, computed once per distinct name."""
        used, which = np.unique(codes, return_inverse=True)
        shown = np.array([display_name(self.names[int(n)]) for n in used], dtype=object)
        return shown[which.reshape(-1)].tolist()


# ---------------------------------------------------------------------------------------------------- build

def build_section(ctx: SectionContext) -> Section:
    """Section builder (registered in sections.py)."""
    return compute(ctx.trace, ctx.eff.activities, ctx.execution_traces).to_section()


def compute(trace, acts, execution_traces: Sequence[str] = ()) -> CriticalPath:
    """The critical path of every step of a loaded trace and its activity table; `execution_traces` add their
    cross-thread data dependencies and ET node ids (`et.py`) when one links to the trace."""
    from .et import apply_et

    g = build_graph(trace, acts)
    et_info = apply_et(g, trace, execution_traces) if execution_traces else None
    launched = np.where(g.launch_event >= 0, g.ts[np.maximum(g.launch_event, 0)], np.nan)
    windows = step_windows(trace, g.end[g.n_cpu:], launched)  # the Overview's windows: the last keeps its GPU tail
    origin = g.origin_us
    rank = (trace.meta.distributed or {}).get("rank")
    walker = _Walker(g)
    steps, parts = [], []
    labels = windows.step_names() if windows.annotated else ["whole trace"] * len(windows)
    for i, (t0, t1) in enumerate(zip(windows.start.tolist(), windows.end.tolist())):
        segs = walker.walk(t0, t1)
        parts.append((i, segs))
        steps.append({"step": labels[i], "number": int(windows.number[i]), **_step_times(segs, t0, t1, origin)})
    seg, names = _segment_columns(g, parts)
    notes = dict(g.notes)
    if et_info:
        notes["et"] = et_info
    return CriticalPath(steps, seg, names, origin, (trace.meta.base_time_ns or 0) / 1000.0,
                        bool(et_info and et_info.get("used")), rank if isinstance(rank, int) else None, notes)


def _step_times(segs: np.ndarray, t0: float, t1: float, origin: float) -> Dict[str, Any]:
    """A step's window (us from the trace's first event), wall and path time, and its time per cause."""
    per_cause = np.bincount(segs[:, 1].astype(np.int64), weights=segs[:, 4] - segs[:, 3], minlength=len(CAUSES))
    causes = {c: float(per_cause[k]) for k, c in enumerate(CAUSES)}
    wall = t1 - t0
    return {"start_us": t0 - origin, "end_us": t1 - origin, "wall_us": wall, "path_us": wall - causes["idle"],
            "causes": causes}


def _segment_columns(g: Graph, parts: List[Tuple[int, np.ndarray]]) -> Tuple[Dict[str, np.ndarray], List[str]]:
    """The walks' segments (rows of event, cause, kind, start, end) as columns; names of the events they are
    charged to, host gaps named HOST_GAP."""
    rows = np.concatenate([p[1] for p in parts]) if parts else np.empty((0, 5))
    event = rows[:, 0].astype(np.int64)
    has = event >= 0
    ev = np.maximum(event, 0)
    name = np.where(has, g.name[ev] if len(g) else 0, len(g.names)).astype(np.int64)
    used, code = np.unique(name, return_inverse=True)
    names = [g.names[k] if k < len(g.names) else HOST_GAP for k in used.tolist()]

    def per_event(values: np.ndarray) -> np.ndarray:
        return np.where(has, values[ev] if len(g) else NO, NO)

    seg = {"step": np.concatenate([np.full(len(p[1]), p[0]) for p in parts]) if parts else np.empty(0),
           "cause": rows[:, 1], "kind": rows[:, 2], "name": code.reshape(-1), "start": rows[:, 3] - g.origin_us,
           "dur": rows[:, 4] - rows[:, 3], "thread": per_event(g.thread), "device": per_event(g.device),
           "stream": per_event(g.stream), "correlation": per_event(g.correlation),
           "et_id": per_event(g.et_id) if g.et_id is not None else np.full(len(rows), NO)}
    return {k: np.asarray(v).astype(_SEG_DTYPES[k]) for k, v in seg.items()}, names


class _Walker:
    """Walks a graph backwards from a step's end (see the module docstring)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.by_end = np.argsort(g.end, kind="stable")
        self.ends = g.end[self.by_end]
        gpu = np.arange(g.n_cpu, len(g))
        self.gpu_by_start = gpu[np.argsort(g.ts[gpu], kind="stable")]
        gpu_end = g.end[self.gpu_by_start]
        self.gpu_starts = g.ts[self.gpu_by_start]
        self.run_max = np.maximum.accumulate(gpu_end) if len(gpu_end) else gpu_end
        # position of the running maximum: the activity with the latest end among those started so far
        idx = np.where(gpu_end == self.run_max, np.arange(len(gpu_end)), 0)
        self.run_arg = np.maximum.accumulate(idx) if len(idx) else idx
        self._as_lists: Optional[Tuple[List[int], List[float], List[float]]] = None

    def walk(self, t0: float, t1: float) -> np.ndarray:
        """Segments of the path of [t0, t1] as rows (event, cause, kind, start, end), in time order."""
        g = self.g
        head: List[List[float]] = []
        point, cur = self._sink(t0, t1, head)
        points, lows, last = self._chase(point, cur, t0)
        pts = np.asarray(points, dtype=np.int64)
        lo = np.asarray(lows, dtype=np.float64)
        hi = np.concatenate([[cur], lo[:-1]]) if len(lo) else lo
        rows = [np.asarray(head, dtype=np.float64).reshape(-1, 5),
                np.stack([g.seg_event[pts], g.seg_cause[pts], g.seg_kind[pts], lo, hi], 1).astype(np.float64)]
        if last > t0:  # nothing traced before: host time outside any op
            rows.append(np.array([[NO, IDLE, K_HOST_GAP, t0, last]], dtype=np.float64))
        return _merged(np.concatenate(rows)[::-1])

    def _chase(self, point: int, cur: float, t0: float) -> Tuple[List[int], List[float], float]:
        """Follow critical predecessors back from `point` (at time `cur`) to t0: the points that own a segment,
        each segment's start (its end is the previous start), and the time the walk stopped at."""
        pred, ts, end = self._lists()
        points: List[int] = []
        lows: List[float] = []
        budget = 2 * len(ts) + 2  # timestamps that contradict the dependencies could close a loop: never spin
        while point >= 0 and cur > t0 and budget:
            budget -= 1
            q = pred[point]
            if q < 0:
                break
            tq = end[q >> 1] if q & 1 else ts[q >> 1]
            if tq < cur:  # else a zero-length step (timestamps out of order): skip it
                cur = tq if tq > t0 else t0
                points.append(point)
                lows.append(cur)
            point = q
        return points, lows, cur

    def _lists(self) -> Tuple[List[int], List[float], List[float]]:
        """pred, ts and end as Python lists, made once per graph: the walk reads them point by point, and a list
        read costs a fraction of a numpy scalar read (a 10^6-kernel path reads them 10^6 times)."""
        if self._as_lists is None:
            self._as_lists = (self.g.pred.tolist(), self.g.ts.tolist(), self.g.end.tolist())
        return self._as_lists

    def _sink(self, t0: float, t1: float, head: List[List[float]]) -> Tuple[int, float]:
        """Where the walk of [t0, t1] begins: the GPU activity running at t1, else the last event to end by t1
        (the time after it is host time outside any op, a segment put in `head`)."""
        g = self.g
        k = int(np.searchsorted(self.gpu_starts, t1, "left")) - 1
        if k >= 0 and self.run_max[k] > t1:
            e = int(self.gpu_by_start[self.run_arg[k]])
            start = max(float(g.ts[e]), t0)
            head.append([e, int(g.cause[e]), int(g.kind[e]), start, t1])
            return 2 * e, start
        i = int(np.searchsorted(self.ends, t1, "right")) - 1
        if i < 0 or self.ends[i] <= t0:
            return NO, t1
        e = int(self.by_end[i])
        last = float(g.end[e])
        if t1 > last:
            head.append([NO, IDLE, K_HOST_GAP, last, t1])
        return 2 * e + 1, last


def _merged(rows: np.ndarray) -> np.ndarray:
    """Consecutive segments charged to the same event, cause and kind become one (they tile the time)."""
    if len(rows) < 2:
        return rows
    same = np.all(rows[1:, :3] == rows[:-1, :3], axis=1)
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    last = np.concatenate([starts[1:], [len(rows)]]) - 1
    out = rows[starts].copy()
    out[:, 4] = rows[last, 4]
    return out


# ---------------------------------------------------------------------------------------------------- API

@dataclass
class CriticalPathReport:
    """What `tb_gpuinsight.critical_path` returns: `steps` and `segments` DataFrames (with `worker` and `span`
    columns), the per-cause `totals` (us) and the `paths` they come from [(worker, span, CriticalPath)]."""
    steps: Any
    segments: Any
    totals: Dict[str, float]
    paths: List[Tuple[str, str, CriticalPath]]

    @classmethod
    def of(cls, paths: List[Tuple[str, str, CriticalPath]], step: Optional[str] = None) -> "CriticalPathReport":
        """The report of several paths; each frame is built once from all their rows (a run can hold 10^4
        traces: a frame per trace, then a concat, took most of the time)."""
        import pandas as pd

        steps: List[Dict[str, Any]] = []
        segments: List[Dict[str, Any]] = []
        totals = dict.fromkeys(CAUSES, 0.0)
        for worker, span, cp in paths:
            chosen = list(range(len(cp.steps))) if step is None else [i for i in [cp.step_index(step)]
                                                                      if i is not None]
            label = dict(worker=safe_text(worker), span=safe_text(span))  # names from files: any bytes
            steps += [{k: v for k, v in cp.steps[i].items() if k != "causes"} | cp.steps[i]["causes"] | label
                      for i in chosen]
            columns = cp.segment_columns(np.flatnonzero(np.isin(cp.seg["step"], chosen)))
            segments.append(columns | {k: [v] * len(columns["index"]) for k, v in label.items()})
            for c, us in cp.totals(chosen).items():
                totals[c] += us
        if not paths:
            return cls(pd.DataFrame(), pd.DataFrame(), totals, paths)
        return cls(pd.DataFrame(steps) if steps else pd.DataFrame(columns=["step", "worker", "span"]),
                   pd.DataFrame(_joined(segments), columns=SEGMENT_COLUMNS + ["worker", "span"]), totals, paths)

    def to_json(self, step: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """What the plugin's /critical_path route answers for the same traces."""
        return to_json([(span, cp) for _, span, cp in self.paths], step, limit)


def _joined(parts: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Columns of several traces end to end: arrays stay arrays when every part's is one, else a list."""
    out = {}
    for c in parts[0]:
        values = [p[c] for p in parts]
        if all(isinstance(v, np.ndarray) for v in values):
            out[c] = np.concatenate(values)
        else:
            out[c] = [x for v in values for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    return out


# ---------------------------------------------------------------------------------------------------- JSON

def to_json(parts: Sequence[Tuple[str, CriticalPath]], step: Optional[str] = None,
            limit: Optional[int] = None) -> Dict[str, Any]:
    """The /critical_path answer for one span or several (their steps listed one after the other, labelled
    "span · step" when there are several). `step` keeps one step; `limit` keeps that many segments, the longest,
    in path order."""
    several = len(parts) > 1
    steps, picked, totals = [], [], dict.fromkeys(CAUSES, 0.0)
    for p, (span, cp) in enumerate(parts):
        chosen = range(len(cp.steps)) if step is None else [i for i in [cp.step_index(step)] if i is not None]
        for i in chosen:
            s = dict(cp.steps[i], span=span)
            if several:
                s["step"] = f"{span} · {s['step']}"
            steps.append(s)
            for c in CAUSES:
                totals[c] += s["causes"][c]
            rows = np.flatnonzero(cp.seg["step"] == i)
            picked.append((p, rows, cp.seg["dur"][rows], s["step"]))
    total = sum(len(r) for _, r, _, _ in picked)
    if limit is not None and total > limit:  # the longest `limit` segments over all the chosen steps
        durs = np.concatenate([d for _, _, d, _ in picked])
        cut = np.sort(durs)[-limit]
        keep = durs > cut
        keep[np.flatnonzero(durs == cut)[:limit - int(keep.sum())]] = True
        offsets = np.cumsum([0] + [len(r) for _, r, _, _ in picked])
        picked = [(p, rows[keep[offsets[j]:offsets[j + 1]]], None, label)
                  for j, (p, rows, _, label) in enumerate(picked)]
    segments = []
    for p, rows, _, label in picked:
        for seg in parts[p][1].segment_rows(rows):
            seg["step"] = label
            seg["index"] = len(segments)
            segments.append(seg)
    available = bool(steps)
    reason = None if available else (f"no step {step!r} in this selection" if step is not None else
                                     "the trace has no timed events to build a critical path from")
    return {"available": available, "reason": reason, "has_et": any(cp.has_et for _, cp in parts),
            "causes": list(CAUSES), "steps": steps, "segments": segments, "segment_count": total,
            "truncated": total > len(segments), "totals": totals}
