"""What the host was doing, as intervals: host-blocking synchronisation calls (with the time until the host queued
work again), DataLoader `__next__` calls, CPU ops, and when each GPU activity was launched."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

from ...trace.kineto import KinetoTrace
from ...trace.table import Table

# Calls that block the host until the GPU has drained work: explicit syncs and synchronous copies (`.item()`,
# `.cpu()`, `.tolist()` end in a cudaMemcpyAsync + cudaStreamSynchronize, or a plain cudaMemcpy).
SYNC_CALL = re.compile(r"^(?:cuda|hip)(?:Stream|Device|Event)Synchronize$|^cu(?:Stream|Ctx|Event)Synchronize$|"
                       r"^(?:cuda|hip)Memcpy(?:2D|3D)?$|^cuMemcpy(?:DtoH|HtoD|DtoD)?(?:_v2)?$")
DATALOADER = re.compile(r"DataLoader.*__next__|DataLoaderIter.*__next__")
_LAUNCH_KINDS = ("runtime", "driver")


@dataclass
class Intervals:
    start: np.ndarray
    end: np.ndarray

    @staticmethod
    def empty() -> "Intervals":
        return Intervals(np.empty(0), np.empty(0))

    @property
    def total(self) -> float:
        return float((self.end - self.start).sum())


def _mask_names(table: Table, pattern: "re.Pattern[str]") -> np.ndarray:
    names = table.strings.get("name", [])
    hit = np.fromiter((bool(pattern.search(n)) for n in names), dtype=bool, count=len(names))
    return hit[table["name"]] if len(table) and len(names) else np.zeros(len(table), dtype=bool)


def _kinds(table: Table, kinds: Tuple[str, ...]) -> np.ndarray:
    cats = table.strings.get("kind", [])
    hit = np.fromiter((c in kinds for c in cats), dtype=bool, count=len(cats))
    return hit[table["kind"]] if len(table) and len(cats) else np.zeros(len(table), dtype=bool)


def sync_calls(trace: KinetoTrace) -> np.ndarray:
    """Mask of the launches-table rows that block the host on the GPU."""
    launches = trace.launches
    return _kinds(launches, _LAUNCH_KINDS) & _mask_names(launches, SYNC_CALL)


def sync_intervals(trace: KinetoTrace) -> Intervals:
    """Each blocking call, extended to the start of the next launch call of its thread: the queue is empty from
    the moment the host waited for it until the host queues work again."""
    launches = trace.launches
    sync = sync_calls(trace)
    if not sync.any():
        return Intervals.empty()
    launch = _kinds(launches, _LAUNCH_KINDS) & ~sync
    ts, end, tid = launches["ts"], launches["ts"] + launches["dur"], launches["tid"]
    out_end = end[sync].copy()
    for thread in np.unique(tid[sync]).tolist():
        mine = np.flatnonzero(sync & (tid == thread))
        starts = np.sort(ts[launch & (tid == thread)])
        nxt = np.searchsorted(starts, end[mine], side="left")
        has = nxt < len(starts)
        pos = np.searchsorted(np.flatnonzero(sync), mine)
        out_end[pos[has]] = np.maximum(end[mine][has], starts[nxt[has]])
    return Intervals(ts[sync], out_end)


def sync_evidence(trace: KinetoTrace, limit: int = 8) -> List[Dict[str, Any]]:
    """The blocking calls grouped by (call, launching op): count and host time blocked, most time first."""
    launches, ops = trace.launches, trace.ops
    sync = np.flatnonzero(sync_calls(trace))
    if not len(sync):
        return []
    op_of_ext = dict(zip(ops["ext_id"].tolist(), ops["name"].tolist())) if len(ops) else {}
    op_names = ops.strings.get("name", [])
    groups: Dict[Tuple[str, str], List[float]] = {}
    enclosing = _enclosing_ops(trace, sync)
    for row, around in zip(sync.tolist(), enclosing):
        code = op_of_ext.get(int(launches["ext_id"][row]), around) if launches["ext_id"][row] >= 0 else around
        key = (launches.decode("name", int(launches["name"][row])) or "", op_names[code] if code >= 0 else "")
        acc = groups.setdefault(key, [0, 0.0])
        acc[0] += 1
        acc[1] += float(launches["dur"][row])
    rows = [{"call": c, "op": o or None, "count": int(n), "total_us": t} for (c, o), (n, t) in groups.items()]
    return sorted(rows, key=lambda r: -r["total_us"])[:limit]


def _enclosing_ops(trace: KinetoTrace, rows: np.ndarray, look_back: int = 256) -> List[int]:
    """Name code of the innermost CPU op of the same thread around each launches row (-1 when none): runtime
    calls of older traces carry no External id."""
    launches, ops = trace.launches, trace.ops
    out = [-1] * len(rows)
    if not len(ops):
        return out
    tid_names = ops.strings.get("tid", [])
    by_tid = {}
    for i, row in enumerate(rows.tolist()):
        tid = launches.decode("tid", int(launches["tid"][row]))
        if tid not in by_tid:
            code = tid_names.index(tid) if tid in tid_names else -2
            mine = np.flatnonzero(ops["tid"] == code)
            by_tid[tid] = mine[np.argsort(ops["ts"][mine], kind="stable")]
        mine = by_tid[tid]
        t = float(launches["ts"][row])
        k = int(np.searchsorted(ops["ts"][mine], t, side="right"))
        cand = mine[max(0, k - look_back): k]
        inside = cand[ops["ts"][cand] + ops["dur"][cand] >= t]
        if len(inside):
            out[i] = int(ops["name"][inside[-1]])
    return out


def dataloader_intervals(trace: KinetoTrace) -> Intervals:
    """DataLoader `__next__` calls: user annotations (2022+) and ops (2021)."""
    parts = [(t["ts"][m], t["ts"][m] + t["dur"][m]) for t in (trace.annotations, trace.ops)
             for m in (_mask_names(t, DATALOADER),) if m.any()]
    if not parts:
        return Intervals.empty()
    return Intervals(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def cpu_op_intervals(trace: KinetoTrace) -> Intervals:
    """Every CPU op (nested ones included: the sweep counts coverage, so nesting does not double count)."""
    ops = trace.ops
    return Intervals(ops["ts"], ops["ts"] + ops["dur"]) if len(ops) else Intervals.empty()


def launch_times(trace: KinetoTrace, correlation: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(start, end) of the launch call of each GPU activity, by correlation id (NaN when not in the trace)."""
    launches = trace.launches
    mask = _kinds(launches, _LAUNCH_KINDS) & (launches["correlation"] >= 0) if len(launches) else \
        np.zeros(0, dtype=bool)
    corr = launches["correlation"][mask]
    order = np.argsort(corr, kind="stable")
    corr = corr[order]
    ts = launches["ts"][mask][order]
    end = ts + launches["dur"][mask][order]
    start_out = np.full(len(correlation), np.nan)
    end_out = np.full(len(correlation), np.nan)
    if len(corr) and len(correlation):
        pos = np.clip(np.searchsorted(corr, correlation), 0, len(corr) - 1)
        found = (corr[pos] == correlation) & (correlation >= 0)
        start_out[found], end_out[found] = ts[pos[found]], end[pos[found]]
    return start_out, end_out
