"""What an Execution Trace adds to the critical path graph: ET node ids on the events, and data dependencies
between ops on different threads (the consumer's start waits for the producer's end).

The first companion ET that links (`et_link.py`) at least `MIN_LINK_RATE` of its nodes to the trace's ops is used.
A data dependency is op A -> op B where B reads a tensor (tensor id, storage id) whose last writer before B, in ET
order, was A. Within one thread, program order already puts B after A, so only cross-thread pairs become edges,
and only where the timings agree (A ended before B started, within `SLACK_US`): an ET changes the path only where
it knows a dependency the Kineto trace cannot show.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ....errors import GpuInsightError
from ....trace.et import ExecutionTrace, load_et, tensor_keys
from .deps import K_DATA_WAIT, NO, SLACK_US, SYNC_WAIT, Graph
from ...enrich import MIN_LINK_RATE
from ..et_link import link_et


def apply_et(g: Graph, trace, execution_traces: Sequence["os.PathLike[str] | str"]) -> Dict[str, Any]:
    """Link the first usable ET: set `g.et_id` and add its cross-thread data edges. Returns what happened.
    When the trace was enriched (`enrich.py`), only the ET that enrichment used is a candidate."""
    tried = []
    for path in _candidates(trace, execution_traces):
        try:
            et = load_et(path)
        except GpuInsightError as exc:
            tried.append({"path": path, "used": False, "reason": str(exc)[:200]})
            continue
        if not _same_process(et, trace):
            tried.append({"path": path, "used": False, "reason": "recorded by another process"})
            continue
        link = link_et(et, trace.ops)
        if link.rate < MIN_LINK_RATE:
            tried.append({"path": path, "used": False, "reason": f"links only {100 * link.rate:.0f}% of its nodes"})
            continue
        node_of_op = np.full(len(trace.ops), NO, dtype=np.int64)
        linked = np.flatnonzero((link.op >= 0) & (link.op < len(trace.ops)))
        node_of_op[link.op[linked]] = linked
        _set_et_ids(g, et, node_of_op)
        edges = _data_edges(g, et, node_of_op)
        return {"path": path, "used": True, **link.to_dict(), "data_edges": edges, "tried": tried}
    return {"used": False, "tried": tried}


def _candidates(trace, execution_traces: Sequence["os.PathLike[str] | str"]) -> List[str]:
    report = getattr(trace, "enrichment", None)
    paths = [os.fspath(p) for p in execution_traces]
    if report is None:
        return paths
    used = {e.get("path") for e in report.execution_traces if e.get("used")}
    return [p for p in paths if p in used]


def _same_process(et: ExecutionTrace, trace) -> bool:
    """False when the ET names a process id that none of the trace's ops ran in (a run-level ET of another
    rank or job links common op names by chance)."""
    pids = {str(p) for p in trace.ops.strings.get("pid", [])}
    return et.pid is None or not any(p.isdigit() for p in pids) or str(et.pid) in pids


def _set_et_ids(g: Graph, et: ExecutionTrace, node_of_op: np.ndarray) -> None:
    """ET node id of each event: its op's node; for annotations and runtime calls the nearest enclosing op's; for
    GPU activities their launch call's (else their launching op's)."""
    cpu = g.cpu
    et_id = np.full(len(g), NO, dtype=np.int64)
    ops = cpu.op_row >= 0
    rows = node_of_op[cpu.op_row[ops]]
    et_id[np.flatnonzero(ops)[rows >= 0]] = et.ids[rows[rows >= 0]]
    up = g.parent.copy()
    mine = et_id[:g.n_cpu]
    while True:  # pointer jumping: a few passes, one per nesting level at most
        todo = (mine < 0) & (up >= 0)
        if not todo.any():
            break
        mine[todo] = mine[up[todo]]
        up[todo] = g.parent[up[todo]]
    launch = g.launch_event
    gpu_ids = np.where(launch >= 0, mine[np.maximum(launch, 0)], NO)
    op = g.gpu.op
    by_op = (gpu_ids < 0) & (op >= 0)
    if by_op.any():
        rows = node_of_op[op[by_op]]
        gpu_ids[by_op] = np.where(rows >= 0, et.ids[np.maximum(rows, 0)], NO)
    et_id[g.n_cpu:] = gpu_ids
    g.et_id = et_id


def _data_edges(g: Graph, et: ExecutionTrace, node_of_op: np.ndarray) -> int:
    """Add cross-thread data dependencies as start predecessors; returns how many were added."""
    cpu = g.cpu
    event_of_node = np.full(len(et), NO, dtype=np.int64)
    ops = np.flatnonzero(cpu.op_row >= 0)
    rows = node_of_op[cpu.op_row[ops]]
    event_of_node[rows[rows >= 0]] = ops[rows >= 0]
    writer: Dict[Any, int] = {}
    added = 0
    for row in np.argsort(et.ids, kind="stable").tolist():  # ET ids follow program order
        event = int(event_of_node[row])
        if event >= 0:
            for key in tensor_keys(et.inputs[row]):
                src = writer.get(key)
                if src is not None and _add_edge(g, src, event):
                    added += 1
        for key in tensor_keys(et.outputs[row]):
            if event >= 0:
                writer[key] = event
    return added


def _add_edge(g: Graph, src: int, dst: int) -> bool:
    """src's end -> dst's start when they run on different threads, the timings agree, and it arrives after
    dst's current critical predecessor."""
    cpu = g.cpu
    if src == dst or cpu.thread_key[src] == cpu.thread_key[dst]:
        return False
    arrival = float(g.end[src])
    if arrival > g.ts[dst] + SLACK_US:
        return False
    point = 2 * dst
    current = _point_time(g, int(g.pred[point]))
    if current is not None and current >= arrival:
        return False
    g.pred[point] = 2 * src + 1
    g.seg_cause[point] = SYNC_WAIT
    g.seg_kind[point] = K_DATA_WAIT
    g.seg_event[point] = dst
    return True


def _point_time(g: Graph, point: int) -> Optional[float]:
    return None if point < 0 else g.time(point)
