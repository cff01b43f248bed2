"""Launch -> kernel flows of the timeline index: for every GPU event, the CPU op that launched it (its event in the
index) and when the launch call began. Kineto writes these links as `ac2g` flow events (and the runtime call's
correlation id); the efficiency analysis has already resolved them to each activity's launching op (`op`), so the
index keeps two columns per event, `flow_src` (the launching op's event position, -1 when unknown or for CPU
events) and `flow_ts` (the launch call's start in us from the trace start; the op's start when the call is not in
the trace), and the views draw the arrows from them: for one selected event, or for every event in view.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ..overview import host

MAX_FLOWS = 2000  # arrows drawn in one viewport: more is a solid band that says nothing
MAX_LAUNCHED = 64  # kernels listed for one CPU op


def launch_flows(trace, acts, origin: float, arrays: Dict[str, np.ndarray], op_rows: np.ndarray) -> None:
    """Add `flow_src` and `flow_ts` to the index arrays. `op_rows`: per event, its row in the ops table (-1 for
    GPU events); `arrays["act"]`: per event, its activity row (-1 for CPU ops)."""
    n = len(arrays["start"])
    src, ts = np.full(n, -1, dtype=np.int32), np.full(n, np.nan)
    act = arrays["act"]
    if n and len(acts) and "op" in acts and len(trace.ops):
        event_of_op = np.full(len(trace.ops), -1, dtype=np.int64)
        cpu = np.flatnonzero(op_rows >= 0)
        event_of_op[op_rows[cpu]] = cpu
        gpu = np.flatnonzero(act >= 0)
        ops = acts["op"][act[gpu]]
        known = (ops >= 0) & (ops < len(event_of_op))
        gpu, ops = gpu[known], ops[known]
        src[gpu] = event_of_op[ops]
        correlation = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
        launch = host.launch_times(trace, correlation)[0] if len(correlation) == len(acts) else \
            np.full(len(acts), np.nan)
        called = launch[act[gpu]]
        ts[gpu] = np.where(np.isfinite(called), called - origin, arrays["start"][np.maximum(src[gpu], 0)])
        ts[src < 0] = np.nan
    arrays["flow_src"], arrays["flow_ts"] = src, ts


def fwd_bwd_links(ops, op_rows: np.ndarray) -> np.ndarray:
    """Per event, the event of the op at the other end of its forward -> backward flow (-1 for none): the links
    Kineto writes as `fwdbwd` flow events, made by its rule from the ops' `Sequence number` and `Fwd thread id`
    args (so they exist also where a trace left the flow events out). Ops are taken in the order the profiler
    records them, at exit; a backward op (fwd thread id > 0) links to the latest-starting forward op of its
    sequence number recorded before it and not linked yet (among nested ops sharing a sequence number, the
    innermost created the autograd node), and only the first backward op of a number takes the link. Kineto keys by (the profiler's own thread
    number, sequence number); the trace does not record a forward op's thread number, so the key is the backward
    op's `Fwd thread id` with the sequence number, forward ops of every thread sharing the lookup."""
    n = len(op_rows)
    peer = np.full(n, -1, dtype=np.int32)
    if not n or not len(ops) or "seq" not in ops:
        return peer
    op_rows = np.asarray(op_rows, dtype=np.int64)
    event_of_op = np.full(len(ops), -1, dtype=np.int64)
    cpu = np.flatnonzero(op_rows >= 0)
    event_of_op[op_rows[cpu]] = cpu
    seq, fwd = ops["seq"], ops["fwd_tid"]
    rows = np.flatnonzero((seq >= 0) & (event_of_op >= 0))
    start = ops["ts"]
    rows = rows[np.lexsort((-start[rows], start[rows] + ops["dur"][rows]))]  # as the profiler records: at exit
    open_fwd: Dict[int, int] = {}
    for row, s, f in zip(rows.tolist(), seq[rows].tolist(), fwd[rows].tolist()):
        if f > 0:
            fwd_row = open_fwd.pop(s, None)
            if fwd_row is not None:
                peer[event_of_op[fwd_row]], peer[event_of_op[row]] = event_of_op[row], event_of_op[fwd_row]
        elif s not in open_fwd or start[row] >= start[open_fwd[s]]:
            open_fwd[s] = row
    return peer


def lane_of(index, rows: np.ndarray) -> np.ndarray:
    """The lane of each event position."""
    return (np.searchsorted(index.lane_off, rows, side="right") - 1).astype(np.int64)


def viewport_flows(index, rows: np.ndarray) -> Dict[str, List]:
    """The flow columns of the events at `rows` of one lane: source lane and launch time (None without one), and
    for ops with a forward <-> backward link the other op's lane and start (`fb_lane`, `fb_ts`)."""
    if "flow_src" not in index.arrays:
        return {}
    src = index.flow_src[rows].astype(np.int64)
    has = src >= 0
    lanes = np.where(has, lane_of(index, np.maximum(src, 0)), -1)
    out = {"src_lane": [int(v) if v >= 0 else None for v in lanes.tolist()],
           "src_ts": [round(float(t), 4) if h else None for t, h in zip(index.flow_ts[rows].tolist(), has.tolist())]}
    peer = index.fb_peer[rows].astype(np.int64) if "fb_peer" in index.arrays else np.empty(0, np.int64)
    if (peer >= 0).any():  # forward <-> backward: the other op's lane and start (sent only when some event has one)
        on = peer >= 0
        peer_lanes = np.where(on, lane_of(index, np.maximum(peer, 0)), -1)
        out["fb_lane"] = [int(v) if v >= 0 else None for v in peer_lanes.tolist()]
        out["fb_ts"] = [round(float(index.start[p]), 4) if p >= 0 else None for p in peer.tolist()]
    return out


def event_flows(index, row: int) -> Dict[str, Any]:
    """For one event: the op that launched it (a GPU event) or the kernels it launched (a CPU op)."""
    if "flow_src" not in index.arrays:
        return {}
    src = int(index.flow_src[row])
    if src >= 0:
        return {"launched_by": {"index": src, "lane": int(lane_of(index, np.array([src]))[0]),
                                "name": index.names[index.name[src]], "ts": float(index.flow_ts[row]),
                                "start": float(index.start[src]), "dur": float(index.end[src] - index.start[src])}}
    kids = np.flatnonzero(index.flow_src == row)
    if not len(kids):
        return {}
    shown = kids[:MAX_LAUNCHED]
    lanes = lane_of(index, shown)
    return {"launched": [{"index": int(k), "lane": int(lane), "name": index.names[index.name[k]],
                          "start": float(index.start[k]), "dur": float(index.end[k] - index.start[k]),
                          "ts": float(index.flow_ts[k]), "act": int(index.act[k])}
                         for k, lane in zip(shown.tolist(), lanes.tolist())],
            "launched_total": int(len(kids))}


__all__ = ["MAX_FLOWS", "launch_flows", "viewport_flows", "event_flows", "lane_of"]


# Find by class: a word a user types for a kind of kernel -> the timeline class it means.
CLASS_WORDS = {"gemm": "GEMM", "matmul": "GEMM", "mm": "GEMM", "attention": "attention", "attn": "attention",
               "conv": "conv", "convolution": "conv", "elementwise": "elementwise", "reduction": "reduction",
               "norm": "norm", "nccl": "communication", "rccl": "communication", "communication": "communication",
               "collective": "communication", "collectives": "communication", "comm": "communication",
               "memcpy": "memcpy", "copy": "memcpy", "memset": "memset", "cpu op": "CPU op"}


def class_codes(index, query: str, classes) -> List[int]:
    """Codes of the names whose events are of the class `query` names ("gemm" finds `nvjet_*` and `bmm_*` kernels
    the registry calls GEMMs, whatever their name says); [] when the query names no class."""
    klass = CLASS_WORDS.get(query.strip().lower())
    if klass is None or klass not in classes:
        return []
    return np.unique(index.name[index.cls == classes.index(klass)]).astype(int).tolist()
