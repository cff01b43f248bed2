"""The Timeline of a multi-rank run: every rank's stored timeline index stacked, on one time base.

Each rank keeps its own index (nothing is copied or merged); the stack maps global lane ids, event positions and
name codes onto the ranks' own, and shifts each rank by where its trace starts on the common base (its first
event's absolute time: `origin_us + base_us`, baseTimeNanoseconds included), so that a collective lines up across
ranks. Times in and out are microseconds from the earliest rank's first event.

A viewport answer stays bounded over all ranks: the event budget (`max_events`) is shared between the ranks in
proportion to their visible lanes, and each lane holds at most `width` runs of per-pixel aggregates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import index as tl


@dataclass
class RankIndex:
    """One rank's timeline index and where it came from."""
    rank: int
    worker: str
    span: str
    index: tl.TimelineIndex


class Stack:
    """Several ranks' timeline indexes as one timeline (see the module docstring)."""

    def __init__(self, ranks: Sequence[RankIndex]) -> None:
        if not ranks:
            raise tl.TimelineError("no analysed rank to stack")
        self.ranks = sorted(ranks, key=lambda r: r.rank)
        starts = [r.index.origin_us + r.index.base_us for r in self.ranks]
        self.origin_us = min(starts)
        self.offsets = [s - self.origin_us for s in starts]
        self.duration_us = max(o + r.index.duration_us for o, r in zip(self.offsets, self.ranks))
        codes: Dict[str, int] = {}
        self.name_maps = [np.array([codes.setdefault(n, len(codes)) for n in r.index.names], dtype=np.int64)
                          for r in self.ranks]
        self.names: List[str] = list(codes)
        self.lane_base = np.cumsum([0] + [len(r.index.lanes) for r in self.ranks])
        self.event_base = np.cumsum([0] + [r.index.event_count for r in self.ranks])
        self.lanes = [self._lane(i, lane) for i, r in enumerate(self.ranks) for lane in r.index.lanes]

    @property
    def event_count(self) -> int:
        return int(self.event_base[-1])

    @property
    def steps(self) -> List[str]:
        """ProfilerSteps of the first rank (the bands drawn)."""
        return self.ranks[0].index.steps

    def _lane(self, i: int, lane: Dict[str, Any]) -> Dict[str, Any]:
        r = self.ranks[i]
        out = {**lane, "id": int(self.lane_base[i] + lane["id"]), "rank": r.rank, "worker": r.worker,
               "span": r.span, "label": f"rank {r.rank} · {lane['label']}"}
        if "members" in lane:
            out["members"] = [int(self.lane_base[i] + m) for m in lane["members"]]
        return out

    def _split_lanes(self, lanes: Optional[Sequence[int]]) -> List[Optional[List[int]]]:
        """Global lane ids -> each rank's local ids (None: all of its drawable lanes)."""
        if lanes is None:
            return [None] * len(self.ranks)
        unknown = [g for g in lanes if not 0 <= g < len(self.lanes)]
        if unknown:
            raise tl.TimelineError(f"no lane {unknown[0]} in this run's stacked timeline")
        rank_of = np.searchsorted(self.lane_base, lanes, side="right") - 1
        return [[int(g - self.lane_base[i]) for g, k in zip(lanes, rank_of.tolist()) if k == i]
                for i in range(len(self.ranks))]

    def _locate_event(self, row: int) -> Tuple[int, int]:
        if not 0 <= row < int(self.event_base[-1]):
            raise tl.TimelineError(f"no event {row} in this run's stacked timeline")
        i = int(np.searchsorted(self.event_base, row, side="right") - 1)
        return i, int(row - self.event_base[i])

    def meta(self) -> Dict[str, Any]:
        """What the tab needs before its first viewport (as `timeline.meta`), plus the ranks and their offsets."""
        counts = np.concatenate([np.diff(r.index.lane_off) for r in self.ranks])
        lanes = [{**lane, "events": int(c)} for lane, c in zip(self.lanes, counts.tolist())]
        first = self.ranks[0].index
        return {"origin_us": self.origin_us, "duration_us": self.duration_us, "lanes": lanes, "names": self.names,
                "classes": list(tl.CLASSES), "idle_causes": list(tl.IDLE_CAUSES),
                "events": int(self.event_base[-1]), "steps": len(first.steps), "max_width": tl.MAX_WIDTH,
                "max_events": tl.MAX_EVENTS,
                "ranks": [{"rank": r.rank, "worker": r.worker, "span": r.span, "offset_us": o}
                          for r, o in zip(self.ranks, self.offsets)]}

    def viewport(self, t0: float, t1: float, width: int, lanes: Optional[Sequence[int]] = None,
                 max_depth: Optional[int] = 0, max_events: int = tl.MAX_EVENTS,
                 efficiency: Optional[Sequence[Optional[np.ndarray]]] = None) -> Dict[str, Any]:
        """`timeline.viewport` over every rank: lanes and events renumbered, times on the common base, ProfilerStep
        bands of the first rank. CPU lanes default to the top level only (`max_depth` 0)."""
        tl.check_range(self.ranks[0].index, t0, t1, width)
        wanted = [tl.lane_ids(r.index, w, max_depth) for r, w in zip(self.ranks, self._split_lanes(lanes))]
        shown = max(1, sum(len(w) for w in wanted))
        out_lanes: List[Dict[str, Any]] = []
        idle: List[Dict[str, Any]] = []
        steps: List[Dict[str, Any]] = []
        items = 0
        for i, (r, ids) in enumerate(zip(self.ranks, wanted)):
            if not ids:
                continue
            off = self.offsets[i]
            view = tl.viewport(r.index, t0 - off, t1 - off, width, ids, max_depth,
                               max_events=max(1, max_events * len(ids) // shown),
                               efficiency=efficiency[i] if efficiency is not None else None)
            items += view["items"]
            out_lanes += [self._shift_lane(i, lane) for lane in view["lanes"]]
            idle += [{**gap, "rank": r.rank, "start": _shift(gap["start"], off), "end": _shift(gap["end"], off)}
                     for gap in view["idle"]]
            if not steps:
                steps = [{**s, "start": s["start"] + off, "end": s["end"] + off} for s in view["steps"]]
        return {"t0": t0, "t1": t1, "width": width, "px_us": (t1 - t0) / width, "lanes": out_lanes,
                "items": items, "steps": steps, "idle": idle}

    def _shift_lane(self, i: int, lane: Dict[str, Any]) -> Dict[str, Any]:
        ev = dict(lane["events"])
        ev["start"] = _shift(ev["start"], self.offsets[i])
        ev["name"] = self.name_maps[i][np.asarray(ev["name"], dtype=np.int64)].tolist()
        ev["index"] = (np.asarray(ev["index"], dtype=np.int64) + int(self.event_base[i])).tolist()
        if "src_lane" in ev:  # launch flows stay within their rank
            base, off = int(self.lane_base[i]), self.offsets[i]
            ev["src_lane"] = [None if v is None else v + base for v in ev["src_lane"]]
            ev["src_ts"] = [None if v is None else v + off for v in ev["src_ts"]]
            if "fb_lane" in ev:
                ev["fb_lane"] = [None if v is None else v + base for v in ev["fb_lane"]]
                ev["fb_ts"] = [None if v is None else v + off for v in ev["fb_ts"]]
        return {**lane, "id": int(self.lane_base[i] + lane["id"]), "events": ev}

    def find(self, name: str, t0: Optional[float] = None, t1: Optional[float] = None,
             limit: int = tl.MAX_EVENTS) -> Dict[str, Any]:
        """Every occurrence of one exact name on every rank (`timeline.find`)."""
        return {"name": name, **self.find_codes([i for i, n in enumerate(self.names) if n == name], t0, t1, limit)}

    def find_codes(self, codes: Sequence[int], t0: Optional[float] = None, t1: Optional[float] = None,
                   limit: int = tl.MAX_EVENTS) -> Dict[str, Any]:
        """`timeline.find_codes` on every rank (codes index `self.names`): occurrences in time order over all
        ranks, the longest of all to land on, per name its count and total over the ranks."""
        wanted = np.asarray(codes, dtype=np.int64)
        count, occ, truncated, longest = 0, [], False, None
        totals: Dict[int, List[float]] = {}
        for i, r in enumerate(self.ranks):
            off, local = self.offsets[i], np.flatnonzero(np.isin(self.name_maps[i], wanted))
            found = tl.find_codes(r.index, local.tolist(), None if t0 is None else t0 - off,
                                  None if t1 is None else t1 - off, limit)
            count += found["count"]
            truncated = truncated or found["truncated"]
            occ += [self._shift_occurrence(i, o) for o in found["occurrences"]]
            best = found["longest"]
            if best and (longest is None or best["end"] - best["start"] > longest["end"] - longest["start"]):
                longest = self._shift_occurrence(i, best)
            for item in found["names"]:
                tally = totals.setdefault(int(self.name_maps[i][item["code"]]), [0, 0.0])
                tally[0] += item["count"]
                tally[1] += item["total_us"]
        occ.sort(key=lambda o: o["start"])
        names = [{"code": c, "count": n, "total_us": round(t, 4)}
                 for c, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1])]
        return {"count": count, "occurrences": occ[:limit], "truncated": truncated or len(occ) > limit,
                "longest": longest, "names": names}

    def _shift_occurrence(self, i: int, o: Dict[str, Any]) -> Dict[str, Any]:
        off = self.offsets[i]
        return {"lane": int(self.lane_base[i] + o["lane"]), "start": o["start"] + off, "end": o["end"] + off,
                "index": int(o["index"] + self.event_base[i]), "name": int(self.name_maps[i][o["name"]])}

    def event(self, row: int) -> Dict[str, Any]:
        """One event by its stacked position, with its rank, worker and span (for the details drawer)."""
        i, local = self._locate_event(row)
        r, ev = self.ranks[i], tl.event(self.ranks[i].index, local)
        lane = int(self.lane_base[i] + ev["lane"])
        for link in [ev["launched_by"]] if "launched_by" in ev else ev.get("launched", []):
            link.update(index=int(link["index"] + self.event_base[i]), lane=int(link["lane"] + self.lane_base[i]),
                        start=link["start"] + self.offsets[i], ts=link["ts"] + self.offsets[i])
        for link in [ev[k] for k in ("forward", "backward") if k in ev]:
            link.update(index=int(link["index"] + self.event_base[i]), lane=int(link["lane"] + self.lane_base[i]),
                        start=link["start"] + self.offsets[i])
        return {**ev, "index": row, "lane": lane, "lane_label": self.lanes[lane]["label"],
                "start": ev["start"] + self.offsets[i], "rank": r.rank, "worker": r.worker, "span": r.span}

    def breakdown(self, t0: float, t1: float) -> Dict[str, Any]:
        """`timeline.breakdown` of the same range on every rank (rows labelled by rank)."""
        devices, lanes = [], []
        for i, r in enumerate(self.ranks):
            part = tl.breakdown(r.index, t0 - self.offsets[i], t1 - self.offsets[i])
            for rows, out in ((part["devices"], devices), (part["lanes"], lanes)):
                out += [{**row, "id": int(self.lane_base[i] + row["id"]), "label": f"rank {r.rank} · {row['label']}"}
                        for row in rows]
        return {"t0": t0, "t1": t1, "range_us": t1 - t0, "devices": devices, "lanes": lanes}


def from_run_dir(path: str, cycle: int = -1, datasheet=None) -> Stack:
    """The stacked timeline of a run directory (one trace per rank), each trace read here once (CLI and Python
    API; the plugin stacks the stored indexes instead). Ranks as the Distributed view numbers them; `cycle`: the
    n-th span of every worker, -1 the latest."""
    from ...logdir import discover
    from ...sections import SectionContext, build_section
    from ...trace.kineto import load_kineto
    from ..ranks import report as rk
    from ..kernels.efficiency import analyze_trace

    runs = discover(path)
    if len(runs) != 1:
        raise tl.TimelineError(f"{path}: holds {len(runs)} runs; give one run directory")
    traces, indexes = [], {}
    for worker, spans in sorted(runs[0].workers.items()):
        if -len(spans) <= cycle < len(spans):
            trace = load_kineto(spans[cycle].trace.path)
            ctx = SectionContext(trace, analyze_trace(trace, datasheet=datasheet))
            traces.append(rk.RankTrace(worker, spans[cycle].name, build_section(rk.SECTION, ctx)))
            indexes[worker] = tl.build_index(trace, ctx.eff)
    report = rk.analyze(traces, datasheet)
    return Stack([RankIndex(r["rank"], r["worker"], r["span"], indexes[r["worker"]]) for r in report.ranks])


def _shift(values: List[float], off: float) -> List[float]:
    return np.round(np.asarray(values, dtype=np.float64) + off, 4).tolist()
