"""Kernels whose launching op cannot be sized, sized from the sub-ops that op recorded just before the launch.

A custom op may not show the sizes its kernels work on (``vllm::moe_forward`` finds its expert weights by layer
name: its estimate is unknown with reason "hidden_size"). Its own sub-ops often do: the allocations and views it
records between its previous launch and this one (``aten::empty`` of the output, ``aten::view`` of the operands).
Per kernel family, a rule in `estimate/moe_subops.py` reads them. A kernel is sized this way only when its op
gave it no FLOPs; its reasons then start with "sub-op shapes" and say which sub-ops gave which size.

Works on eager launches (the kernel ran in the trace: its launch call is found by correlation) and on graph
replays merged with their capture (`graph_capture.py` passes the capture trace and its launch calls).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...estimate.args import OpArgs, UnknownEstimate
from ...estimate.devices import normalize_dtype
from ...estimate.flops import OpEstimate
from ...estimate.moe_subops import SubOp, matches, size_kernel
from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from ..correlate import GRAPH_LAUNCHES, NO_OP, descends, link_activities, op_parents
from .attribution import SOURCES
from .reasons import CODES

# (sub-ops since the op's previous launch, every sub-op before the launch, a key equal for equal sub-op sequences)
Window = Tuple[List[SubOp], List[SubOp], Tuple]


def size_from_subops(trace: KinetoTrace, acts: Table) -> int:
    """Size this trace's own launches (not graph replays) of kernels with a sub-op rule and no FLOPs from their
    op. Returns how many activities were sized."""
    rows = _candidates(acts, (acts["op"] >= 0) & ~acts["graph"].astype(bool))
    rows = rows[rows < len(trace.kernels)]  # kernels come first in the activity table
    if not len(rows) or not len(trace.launches):
        return 0
    launch = _launch_of(trace.launches["correlation"], trace.kernels["correlation"][rows])
    return size_rows(acts, rows[launch >= 0], trace, launch[launch >= 0])


def size_captured(part: Table, rows: np.ndarray, pairs: Sequence[Tuple[np.ndarray, np.ndarray]],
                  trace: KinetoTrace, launch_rows: np.ndarray) -> int:
    """Size replayed kernels of a graph-capture merge from the capture's sub-ops. `part`: the merged activities
    (row i is replay activity rows[i]); `pairs`: (replay rows, capture launch positions) per graph launch;
    `launch_rows`: each capture launch position's row in trace.launches."""
    position = {r: p for replay, captured in pairs for r, p in zip(replay.tolist(), captured.tolist())}
    todo = _candidates(part, np.ones(len(part), dtype=bool))
    todo = np.array([i for i in todo.tolist() if int(rows[i]) in position], dtype=np.int64)
    if not len(todo):
        return 0
    launch = launch_rows[np.array([position[int(rows[i])] for i in todo.tolist()], dtype=np.int64)]
    return size_rows(part, todo, trace, launch)


def _candidates(acts: Table, mask: np.ndarray) -> np.ndarray:
    """Kernel rows in `mask` without FLOPs (or with only the model config's) whose name has a sub-op rule."""
    names = acts.strings["name"]
    ruled = np.fromiter((matches(n) for n in names), dtype=bool, count=len(names))
    kernel = acts["kind"] == acts.strings["kind"].index("kernel") if "kernel" in acts.strings["kind"] else \
        np.zeros(len(acts), dtype=bool)
    # the model config's share of the op is coarser than the sizes the kernel's own sub-ops record: they win
    coarse = np.isnan(acts["flops"]) | (acts["source"] == SOURCES.index("model config"))
    return np.flatnonzero(mask & kernel & coarse & ruled[acts["name"]]) if len(names) else \
        np.empty(0, np.int64)


def size_rows(acts: Table, rows: np.ndarray, trace: KinetoTrace, launch_rows: np.ndarray) -> int:
    """Write the sub-op estimate of each activity row (launched by `launch_rows` of `trace`) where its rule can
    size it; rows it cannot stay as they were. Returns how many were sized."""
    names = acts.strings["name"]
    windows = sub_op_windows(trace, launch_rows)
    codes = EstimateWriter(acts)
    memo: Dict[Tuple, Optional[OpEstimate]] = {}  # every layer of every step repeats the same sub-ops
    sized = 0
    for row, window in zip(rows.tolist(), windows):
        if window is None:
            continue
        kernel = names[acts["name"][row]]
        key = (kernel, window[2])
        if key not in memo:
            memo[key] = _estimate(kernel, window)
        est = memo[key]
        if est is None:
            continue
        codes.write(row, est)
        sized += 1
    return sized


def _estimate(kernel: str, window: Window) -> Optional[OpEstimate]:
    try:
        return size_kernel(kernel, window[0], window[1])
    except UnknownEstimate:
        return None


class EstimateWriter:
    """Writes estimates into an activity table's rows, coding new texts in its string columns (lists copied before
    the first append)."""

    def __init__(self, acts: Table) -> None:
        self.acts = acts
        self.index: Dict[str, Dict[str, int]] = {}

    def code(self, col: str, text: str) -> int:
        if col not in self.index:
            self.acts.strings[col] = list(self.acts.strings.get(col, []))
            self.index[col] = {t: i for i, t in enumerate(self.acts.strings[col])}
        found = self.index[col].get(text)
        if found is None:
            found = self.index[col][text] = len(self.acts.strings[col])
            self.acts.strings[col].append(text)
        return found

    def write(self, rows, est: OpEstimate, share=1.0) -> None:
        """`est` on `rows` (one row or an array), its FLOPs and bytes times `share` (a row's part of the op's)."""
        acts = self.acts
        acts["flops"][rows] = np.nan if est.flops is None else est.flops * share
        acts["bytes"][rows] = np.nan if est.bytes is None else est.bytes * share
        acts["flops_reason"][rows] = self.code("flops_reason", est.flops_reason)
        acts["bytes_reason"][rows] = self.code("bytes_reason", est.bytes_reason)
        dtype = normalize_dtype(est.dtype)
        acts["dtype"][rows] = self.code("dtype", dtype) if dtype else -1
        acts["source"][rows] = SOURCES.index("formula")
        acts["gap"][rows] = CODES.index("" if est.bytes is not None else "no_bytes")


# ---------------------------------------------------------------------------------------------- sub-op windows

def sub_op_windows(trace: KinetoTrace, launch_rows: np.ndarray) -> List[Optional[Window]]:
    """Per launch call: the sub-ops (descendants) of its launching op recorded between that op's previous launch
    (or its start) and this launch, and every sub-op of the op before this launch; None without a launching op."""
    ops, launches = trace.ops, trace.launches
    parents = op_parents(ops)
    work = _work_launches(launches)
    op_of = _launch_ops(trace, work, parents)
    pos = np.clip(np.searchsorted(work, launch_rows), 0, max(len(work) - 1, 0))
    found = (work[pos] == launch_rows) if len(work) else np.zeros(len(launch_rows), dtype=bool)
    op = np.where(found, op_of[pos] if len(work) else NO_OP, NO_OP)
    wanted = np.unique(op[op >= 0])
    launch_ts = _launch_times(op_of, launches["ts"][work], wanted)
    subs = _descendants(trace, wanted, parents)
    out: List[Optional[Window]] = []
    for row, owner in zip(launch_rows.tolist(), op.tolist()):
        if owner < 0:
            out.append(None)
            continue
        t = float(launches["ts"][row])
        earlier = launch_ts[owner][launch_ts[owner] < t]
        since = float(earlier[-1]) if len(earlier) else -np.inf
        starts, items, keys = subs[owner]
        end = int(np.searchsorted(starts, t, side="left"))
        begin = min(int(np.searchsorted(starts, since, side="right")), end)
        out.append((items[begin:end], items[:end], (end - begin, tuple(keys[:end]))))
    return out


def _launch_times(op_of: np.ndarray, ts: np.ndarray, wanted: np.ndarray) -> Dict[int, np.ndarray]:
    """Per wanted op row: the sorted start times of the launch calls it made."""
    sel = np.flatnonzero(np.isin(op_of, wanted))
    sel = sel[np.lexsort((ts[sel], op_of[sel]))]
    keys, first = np.unique(op_of[sel], return_index=True)
    return {int(k): ts[part] for k, part in zip(keys.tolist(), np.split(sel, first[1:]))}


def _descendants(trace: KinetoTrace, wanted: np.ndarray,
                 parents: np.ndarray) -> Dict[int, Tuple[np.ndarray, list, list]]:
    """Per op row: the start times, SubOps and (name, shape) codes of every op it encloses, in time order."""
    ops = trace.ops
    order = np.argsort(ops["ts"], kind="stable")
    starts = ops["ts"][order]
    decoded: Dict[Tuple[int, int], SubOp] = {}  # one decode per distinct (name, shapes)
    out: Dict[int, Tuple[np.ndarray, list, list]] = {}
    for op in wanted.tolist():
        lo, hi = np.searchsorted(starts, [float(ops["ts"][op]), float(ops["ts"][op] + ops["dur"][op])], side="left")
        rows = [int(r) for r in order[lo:hi + 1].tolist() if r != op and descends(int(r), op, parents)]
        keys = [(int(ops["name"][r]), int(ops["shape"][r])) for r in rows]
        for key, row in zip(keys, rows):
            if key not in decoded:
                decoded[key] = _sub_op(trace, row)
        items = [decoded[key] for key in keys]
        out[op] = (ops["ts"][np.array(rows, dtype=np.int64)], items, keys)
    return out


def _work_launches(launches: Table) -> np.ndarray:
    """Rows of the launch calls that run work on the GPU (kernels, memsets, async copies), not graph launches."""
    names = launches.strings.get("name", [])
    kind = np.fromiter((("LaunchKernel" in n or n.startswith("cuLaunch") or "Memset" in n or "Memcpy" in n)
                        and not any(g in n for g in GRAPH_LAUNCHES) for n in names), dtype=bool, count=len(names))
    return np.flatnonzero(kind[launches["name"]]) if len(names) and len(launches) else np.empty(0, np.int64)


def _launch_ops(trace: KinetoTrace, rows: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """The launching op of each launch call row (linked as its activities would be)."""
    launches = trace.launches
    probe = Table("launches", {"correlation": launches["correlation"][rows], "ext_id": launches["ext_id"][rows]}, {})
    return link_activities(probe, trace.ops, launches, parents).op


def _launch_of(correlations: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row of the launch call with each wanted correlation id (-1 where none)."""
    order = np.argsort(correlations, kind="stable")
    pos = np.clip(np.searchsorted(correlations[order], wanted), 0, max(len(order) - 1, 0))
    found = len(order) > 0
    hit = (correlations[order][pos] == wanted) & (wanted >= 0) if found else np.zeros(len(wanted), dtype=bool)
    return np.where(hit, order[pos] if found else NO_OP, NO_OP)


def _sub_op(trace: KinetoTrace, row: int) -> SubOp:
    ops = trace.ops
    code = int(ops["shape"][row])
    args = OpArgs(*trace.shape(code)) if code >= 0 else OpArgs(None, None, None)
    return SubOp(ops.strings["name"][ops["name"][row]], args)


__all__ = ["size_from_subops", "size_captured", "size_rows", "sub_op_windows"]
