"""The execution graph: an Execution Trace's control tree and data dependencies, linked to Kineto timings.

- Ops: ET nodes that are operators (an op schema, a `ns::name`, a collective or a compiled kernel). The outermost
  op of each call stack is a *unit*: its nested ops (an `aten::linear`'s `aten::addmm`) are implementation
  details whose kernels count for it. Annotations (record_function ranges, ProfilerStep, autograd wrappers) are
  containers, never units.
- Data edges: unit A -> unit B when B consumes a tensor (tensor id, storage id) that A was the last to produce.
- Backward: autograd runs backward ops on its own thread; a backward node carries the forward op's thread
  (`fw_tid`) and sequence number (`seq_id`), which find the forward op; `fw_parent` names the forward op's parent,
  under which the backward folds in the display tree (see view.py).
- Linked (et_link.py) nodes carry their CPU time, kernels, GPU time, FLOPs and efficiency.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from ...trace.et import ExecutionTrace, load_et, tensor_keys
from .op_path import CriticalPath, OpTimes, critical_path
from .et_link import NONE, Link

_WRAPPER = "autograd::engine::evaluate_function"


@dataclass
class Kernels:
    """Per ET row, the GPU activities it launched itself (rows of `Efficiency.activities`) and their totals."""
    rows: Dict[int, List[int]] = field(default_factory=dict)
    gpu_us: Optional[np.ndarray] = None
    flops: Optional[np.ndarray] = None
    rated_us: Optional[np.ndarray] = None  # kernel time with an efficiency
    eff_us: Optional[np.ndarray] = None  # sum of efficiency x time (time-weighted mean = eff_us / rated_us)
    captured_us: Optional[np.ndarray] = None  # of gpu_us: graph-replayed kernels counted at their captured op


@dataclass
class ExecutionGraph:
    et: ExecutionTrace
    is_op: np.ndarray
    unit: np.ndarray  # per row: its unit's row (-1 outside any op)
    units: np.ndarray  # unit rows in program (id) order
    data_edges: List[Tuple[int, int]]  # (producer row, consumer row) between units
    forward: np.ndarray  # per row: the forward op row of a backward node, -1
    link: Link
    cpu_ts: np.ndarray
    cpu_dur: np.ndarray
    kernels: Kernels
    efficiency: object = None  # the Efficiency the kernels come from, when linked
    critical: Optional[CriticalPath] = None
    critical_units: Optional[np.ndarray] = None  # the unit rows the path's op indices refer to
    path_rows: Optional[List[int]] = None  # unit rows of the step critical path (critical_path/path.py), when known
    joint: object = None  # that path (cpath.CriticalPath), when computed here (load_graph)

    @property
    def timed(self) -> bool:
        return self.link.linked > 0

    def critical_rows(self) -> List[int]:
        """ET rows of the units on the critical path, in order: the joint CPU + GPU path's when it was set
        (`use_path`), else the op-level path of the ET alone."""
        if self.path_rows is not None:
            return self.path_rows
        return [int(self.critical_units[i]) for i in self.critical.ops()] if self.critical else []

    def use_path(self, et_ids: Iterable[int]) -> None:
        """Mark the ops of the joint CPU + GPU critical path (its segments' ET node ids, in path order), so that the
        graph shows the same path as the critical-path list."""
        rows: List[int] = []
        seen = set()
        for et_id in et_ids:
            row = self.et.row_of.get(int(et_id), -1)
            unit = int(self.unit[row]) if row >= 0 else -1
            if unit >= 0 and unit not in seen:
                seen.add(unit)
                rows.append(unit)
        self.path_rows = rows


def build_graph(et: ExecutionTrace, trace=None, efficiency=None) -> ExecutionGraph:
    """The graph of an Execution Trace, linked to a loaded Kineto trace and its analysis when given."""
    from .et_link import host_events, link_et

    host = host_events(trace) if trace is not None else None
    is_op = _op_mask(et)
    unit = _units(et, is_op)
    units = np.flatnonzero(unit == np.arange(len(et)))
    link = link_et(et, host) if host is not None else Link(np.full(len(et), -1, np.int64), NONE, 0,
                                                                  sum(not et.is_root(r) for r in range(len(et))))
    cpu_ts, cpu_dur = _cpu_times(link, host)
    kernels = _kernels(et, link, trace, host, efficiency)
    graph = ExecutionGraph(et, is_op, unit, units, _data_edges(et, units), _forward_ops(et, is_op), link,
                           cpu_ts, cpu_dur, kernels, efficiency)
    order = _path_order(graph)
    graph.critical = critical_path(_op_times(graph, host, order), _order_edges(graph, order))
    graph.critical_units = graph.units[order] if len(order) else graph.units[:0]
    return graph


def load_graph(et_path: "os.PathLike[str] | str", kineto_path: "os.PathLike[str] | str | None" = None,
               extra_args=(), datasheet=None) -> ExecutionGraph:
    """Read an ET (and optionally its Kineto trace, analysed for kernel efficiency) and build the graph."""
    et = load_et(et_path)
    if kineto_path is None:
        return build_graph(et)
    from ...loading import load
    from ..kernels.efficiency import analyze_trace
    from ..kernels.graph_capture import with_captures

    from .critical_path.path import compute

    trace = load(kineto_path, extra_args=extra_args)
    eff = with_captures(analyze_trace(trace, datasheet=datasheet), datasheet=datasheet)  # replays via captured ops
    graph = build_graph(et, trace, eff)
    graph.joint = compute(trace, eff.activities, [et_path])
    graph.use_path(graph.joint.seg["et_id"])
    return graph


def _op_mask(et: ExecutionTrace) -> np.ndarray:
    mask = np.zeros(len(et), dtype=bool)
    for row, name in enumerate(et.names):
        attrs = et.attrs[row]
        mask[row] = bool(et.op_schema[row]) or ("::" in name and not name.startswith(_WRAPPER)) \
            or name == "record_param_comms" or "collective_name" in attrs or "kernel_backend" in attrs
    mask &= et.cols["scope"] != 7  # USER_SCOPE: record_function ranges are annotations
    return mask


def _units(et: ExecutionTrace, is_op: np.ndarray) -> np.ndarray:
    """Per row, its outermost op ancestor (itself when it is one), -1 when no op encloses it."""
    unit = np.full(len(et), -1, dtype=np.int64)
    parent = et.parent
    for row in _top_down(parent):
        up = int(parent[row])
        inherited = unit[up] if up >= 0 else -1
        unit[row] = inherited if inherited >= 0 else (row if is_op[row] else -1)
    return unit


def _top_down(parent: np.ndarray) -> List[int]:
    """Rows ordered so that every parent comes before its children."""
    children: List[List[int]] = [[] for _ in range(len(parent))]
    roots = []
    for row, up in enumerate(parent.tolist()):
        (children[up] if up >= 0 else roots).append(row)
    order, stack = [], roots[::-1]
    while stack:
        row = stack.pop()
        order.append(row)
        stack.extend(reversed(children[row]))
    return order


def _data_edges(et: ExecutionTrace, units: np.ndarray) -> List[Tuple[int, int]]:
    producer: Dict[Tuple[int, int], int] = {}
    edges = set()
    for row in units.tolist():
        for key in tensor_keys(et.inputs[row]):
            p = producer.get(key)
            if p is not None and p != row:
                edges.add((p, row))
        for key in tensor_keys(et.outputs[row]):
            producer[key] = row
    return sorted(edges)


def _forward_ops(et: ExecutionTrace, is_op: np.ndarray) -> np.ndarray:
    """Per backward node (fw_tid set, seq_id >= 0), the outermost forward op with that thread and seq_id."""
    seq, tid, fw_tid = et.cols["seq_id"], et.cols["tid"], et.cols["fw_tid"]
    first: Dict[Tuple[int, int], int] = {}
    for row in np.flatnonzero(is_op & (seq >= 0) & (fw_tid <= 0)).tolist():
        first.setdefault((int(tid[row]), int(seq[row])), row)
    forward = np.full(len(et), -1, dtype=np.int64)
    for row in np.flatnonzero((seq >= 0) & (fw_tid > 0)).tolist():
        forward[row] = first.get((int(fw_tid[row]), int(seq[row])), -1)
    return forward


def _cpu_times(link: Link, host) -> Tuple[np.ndarray, np.ndarray]:
    ts = np.full(len(link.op), np.nan)
    dur = np.full(len(link.op), np.nan)
    linked = link.op >= 0
    if host is not None and linked.any():
        ts[linked] = host["ts"][link.op[linked]]
        dur[linked] = host["dur"][link.op[linked]]
    return ts, dur


def _kernels(et: ExecutionTrace, link: Link, trace, host, efficiency) -> Kernels:
    """Each activity goes to the ET node of its launching op, or of that op's nearest linked enclosing op; a
    kernel replayed from a CUDA/HIP graph captured in this trace goes to its captured op's node (the capture merge,
    `kernels/graph_capture.py`), counted in `captured_us` too."""
    out = Kernels(gpu_us=np.zeros(len(et)), flops=np.zeros(len(et)), rated_us=np.zeros(len(et)),
                  eff_us=np.zeros(len(et)), captured_us=np.zeros(len(et)))
    if efficiency is None or trace is None or link.linked == 0:
        return out
    from ..correlate import op_parents

    node_of_op = np.full(len(trace.ops), -1, dtype=np.int64)
    linked = np.flatnonzero(link.op >= 0)
    op_rows = host["op_row"][link.op[linked]]
    node_of_op[op_rows[op_rows >= 0]] = linked[op_rows >= 0]
    parents = op_parents(trace.ops)
    acts = efficiency.activities
    captured = getattr(efficiency, "captured_op", None)
    ops = np.where(captured >= 0, captured, acts["op"]) if captured is not None else acts["op"]
    for a, op in enumerate(ops.tolist()):
        while op >= 0 and node_of_op[op] < 0:
            op = int(parents[op])
        if op >= 0:
            _add_kernel(out, int(node_of_op[op]), a, acts)
            if captured is not None and captured[a] >= 0:
                out.captured_us[int(node_of_op[op])] += float(acts["dur"][a])
    return out


def _add_kernel(out: Kernels, row: int, a: int, acts) -> None:
    dur = float(acts["dur"][a])
    out.rows.setdefault(row, []).append(a)
    out.gpu_us[row] += dur
    flops = acts["flops"][a]
    out.flops[row] += 0.0 if np.isnan(flops) else flops
    eff = acts["efficiency"][a]
    if not np.isnan(eff):
        out.rated_us[row] += dur
        out.eff_us[row] += eff * dur


def _path_order(graph: ExecutionGraph) -> np.ndarray:
    """Indices into `units` the critical path runs over: timed, the linked units by start time (unlinked ones
    have no time to add); untimed, every unit in program order."""
    if not graph.timed:
        return np.arange(len(graph.units))
    ts = graph.cpu_ts[graph.units]
    linked = np.flatnonzero(~np.isnan(ts))
    return linked[np.argsort(ts[linked], kind="stable")]


def _op_times(graph: ExecutionGraph, host, order: np.ndarray) -> OpTimes:
    """Times per path op: its own CPU time, and the kernels of its whole call stack."""
    rows = graph.units[order]
    n = len(rows)
    index = {int(r): i for i, r in enumerate(rows.tolist())}
    gpu_ts, gpu_end, busy = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    stream = np.full(n, -1, dtype=np.int64)
    acts = graph.efficiency.activities if graph.efficiency is not None else None
    for row, kernel_rows in graph.kernels.rows.items():
        i = index.get(int(graph.unit[row]))
        if i is None:
            continue
        ts, dur = acts["ts"][kernel_rows], acts["dur"][kernel_rows]
        gpu_ts[i] = np.fmin(gpu_ts[i], ts.min())
        gpu_end[i] = np.fmax(gpu_end[i], (ts + dur).max())
        busy[i] += dur.sum()
        if stream[i] < 0:
            stream[i] = int(acts["stream"][kernel_rows[0]])
    thread = graph.et.cols["tid"][rows]
    if host is not None and len(host["tid"]):  # the Kineto thread where the op is linked, else the ET's
        ops = graph.link.op[rows]
        thread = np.where(ops >= 0, host["tid"][np.clip(ops, 0, None)], thread)
    return OpTimes(graph.cpu_ts[rows], graph.cpu_dur[rows], thread, gpu_ts, gpu_end, busy, stream,
                   timed=graph.timed)


def _order_edges(graph: ExecutionGraph, order: np.ndarray) -> List[Tuple[int, int]]:
    """Data edges as (producer, consumer) path indices, kept where the producer comes first."""
    index = {int(r): i for i, r in enumerate(graph.units[order].tolist())}
    pairs = ((index.get(p), index.get(c)) for p, c in graph.data_edges)
    return [(p, c) for p, c in pairs if p is not None and c is not None and p < c]
