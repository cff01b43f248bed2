"""Tensor shapes: ops grouped by name, input shapes and dtypes; the tensors of a tensor.trace joined to those ops.

Op groups (from a Kineto trace recorded with `record_shapes=True`): one group per (op name, Input Dims, Input type);
calls, CPU time (the ops' own wall time), device time, FLOPs, achieved TFLOP/s and % of peak. Device time is the time
of the kernels, memcpys and memsets the op launched, its child ops' included (`aten::linear` gets the time of the
GEMM its `aten::addmm` launched), so a group's achieved rate is its FLOPs over that time. FLOPs are the per-call
estimate (`estimate/flops.py`) times the calls; unknown stays unknown (None, with a reason), never 0.

The groups also form a tree (`op_tree`): a group's parent is the group of the enclosing op of most of its calls
(`aten::conv2d` -> `aten::convolution` -> `aten::_convolution` -> `aten::cudnn_convolution`). `device_us` is the
group's total (its calls' descendants included), `self_us` the time of what its calls launched directly, so self
times add up to the device time exactly once; `leaf` groups have no call with a child op that has device time:
the flat view's default, where one convolution is one row, not four with the same time.

Tensors (from a tensor.trace): every record, with two joins.
- op, by time: a `[call]` record is taken by the first top-level Kineto op (one with no enclosing op on its thread)
  that starts between the call's timestamp and the next recorded call's, preferring an op whose name matches the
  function (`torch.matmul` -> `aten::matmul`). Both files use the wall clock (`time.time_ns()`; Kineto's absolute
  microseconds). `[ret]` records take the op of their call. Records outside the profiled window have no op.
- producer, by data pointer: the latest earlier `[ret]` record with the same data pointer ("function file:line"),
  i.e. which call made the tensor a call consumes (pointers are reused after a free, hence "latest").
"""
from __future__ import annotations

import os

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ...estimate.devices import normalize_dtype
from ...estimate.flops import estimate_op, freeze
from ...trace.kineto import KinetoTrace
from ...trace.table import Interner, Table, unique_rows
from ...trace.tensortrace import TensorTraceFile
from ..correlate import op_parents

_US = 1e-6
NO_SHAPES = "no shapes recorded: profile with record_shapes=True"
NO_TENSOR_TRACE = "no tensor.trace for this span: record one with tb_gpuinsight.TensorTrace"


# ---------------------------------------------------------------------------------------------- op groups

@dataclass
class OpGroup:
    """Sums for one (op name, input dims, input types); merged across spans by `add`."""
    op: str
    input_dims: Any
    input_types: Any
    concrete_inputs: Any = None
    calls: int = 0
    cpu_us: float = 0.0
    device_us: float = 0.0
    kernels: int = 0
    flops: Optional[float] = None
    flops_reason: str = ""
    dtype: Optional[str] = None
    peak_tflops: Optional[float] = None
    self_us: float = 0.0
    parent: Optional[Tuple[str, str, str]] = None  # key of the group of most calls' enclosing op
    leaf: bool = True  # no call of it encloses an op call with device time
    source: str = ""  # "graph capture": kernels a graph replayed, counted through the op that captured them

    def add(self, other: "OpGroup") -> None:
        self.calls += other.calls
        self.cpu_us += other.cpu_us
        self.device_us += other.device_us
        self.kernels += other.kernels
        if other.flops is not None:
            self.flops = (self.flops or 0.0) + other.flops
        self.flops_reason = self.flops_reason or other.flops_reason
        self.dtype = self.dtype or other.dtype
        self.peak_tflops = self.peak_tflops or other.peak_tflops
        self.self_us += other.self_us
        self.parent = self.parent or other.parent
        self.leaf = self.leaf and other.leaf
        self.source = self.source or other.source

    @property
    def key(self) -> Tuple[str, str, str]:
        return (self.op, json.dumps(self.input_dims), json.dumps(self.input_types))

    def row(self) -> Dict[str, Any]:
        """JSON-ready dict: derived rates included, unknowns None."""
        tflops = self.flops / (self.device_us * _US) / 1e12 if self.flops is not None and self.device_us > 0 else None
        pct = tflops / self.peak_tflops if tflops is not None and self.peak_tflops else None
        return {"op": self.op, "input_dims": self.input_dims, "input_types": self.input_types,
                "concrete_inputs": self.concrete_inputs, "shape": shape_label(self.input_dims),
                "calls": self.calls, "cpu_us": self.cpu_us, "mean_cpu_us": self.cpu_us / max(self.calls, 1),
                "device_us": self.device_us if self.kernels else None, "kernels": self.kernels,
                "self_us": self.self_us if self.kernels else None, "leaf": self.leaf,
                "id": group_id(self.key), "parent": group_id(self.parent) if self.parent else None,
                "flops": self.flops, "flops_reason": "" if self.flops is not None else self.flops_reason,
                "tflops": tflops, "pct_peak": pct, "dtype": self.dtype, "peak_tflops": self.peak_tflops,
                "source": self.source}


OP_COLUMNS = ["op", "input_dims", "input_types", "concrete_inputs", "shape", "calls", "cpu_us", "mean_cpu_us",
              "device_us", "self_us", "kernels", "flops", "flops_reason", "tflops", "pct_peak", "dtype", "peak_tflops",
              "leaf", "id", "parent", "source"]


def group_id(key: Tuple[str, str, str]) -> str:
    """A short stable id of a group key (op, dims JSON, types JSON): what rows name their parent by."""
    import hashlib

    return hashlib.blake2s("\x1f".join(key).encode(), digest_size=6).hexdigest()


def shape_label(dims: Any) -> str:
    """Compact text of an op's Input Dims: `[32, 64] [128, 64] [128]` (empty inputs as `-`)."""
    if not isinstance(dims, list):
        return "" if dims is None else str(dims)
    return " ".join(json.dumps(d, separators=(", ", ":")) if d != [] else "-" for d in dims) or "-"


def op_groups(trace: KinetoTrace, activities: Optional[Table] = None,
              shapes: Optional[Dict[int, Any]] = None) -> Dict[Tuple[str, str, str], OpGroup]:
    """Groups of one trace keyed by (op name, dims JSON, types JSON). `activities`: an analysis's activity table of
    the same trace (`Efficiency.activities`, with its `op` rows), for device time and peaks; None for CPU only.
    `shapes` (`Efficiency.shapes`): with it, kernels a graph replayed count in the groups of the ops that
    captured them (source "graph capture"), not in the op around the replay."""
    groups = _trace_groups(trace, activities if shapes is None else _not_captured(activities))
    if shapes is not None and activities is not None:
        for part in captured_groups(activities, shapes):
            if part.key in groups:
                groups[part.key].add(part)
            else:
                groups[part.key] = part
    return groups


def _trace_groups(trace: KinetoTrace, activities: Optional[Table]) -> Dict[Tuple[str, str, str], OpGroup]:
    ops = trace.ops
    if not len(ops):
        return {}
    pairs = np.stack([ops["name"].astype(np.int64), ops["shape"].astype(np.int64)], axis=1)
    distinct, inverse = unique_rows(pairs)
    calls = np.bincount(inverse, minlength=len(distinct))
    cpu = np.bincount(inverse, weights=np.nan_to_num(ops["dur"]), minlength=len(distinct))
    parents = op_parents(ops)
    device, kernels, peak, own, op_time = _device_time(ops, inverse, len(distinct), activities, parents)
    timed = (op_time > 0) & (parents >= 0)
    timed_parent = np.zeros(len(distinct), dtype=bool)
    timed_parent[inverse[parents[timed]][inverse[parents[timed]] != inverse[timed]]] = True
    parent_group = _group_parents(parents, inverse, len(distinct))
    names = ops.strings["name"]
    keys: List[Tuple[str, str, str]] = []
    groups: Dict[Tuple[str, str, str], OpGroup] = {}
    for i, (name_code, shape_code) in enumerate(distinct.tolist()):
        dims, types, concrete = trace.shape(shape_code) if shape_code >= 0 else (None, None, None)
        name = names[name_code] if name_code >= 0 else "?"
        est = estimate_op(name, freeze(dims), freeze(types), freeze(concrete))
        part = OpGroup(name, dims, types, concrete, int(calls[i]), float(cpu[i]), float(device[i]), int(kernels[i]),
                       est.flops * int(calls[i]) if est.flops is not None else None, est.flops_reason, normalize_dtype(est.dtype) or est.dtype,
                       float(peak[i]) if not math.isnan(peak[i]) else None, float(own[i]),
                       leaf=not timed_parent[i])
        key = part.key
        keys.append(key)
        if key in groups:
            groups[key].add(part)
        else:
            groups[key] = part
    for i, p in enumerate(parent_group.tolist()):  # parents by key, once every group has one
        if p >= 0 and keys[p] != keys[i] and groups[keys[i]].parent is None:
            groups[keys[i]].parent = keys[p]
    return groups


def _captured(activities: Table) -> np.ndarray:
    """Activities whose figures, op name and shapes come from a graph capture."""
    sources = activities.strings.get("source", [])
    if "capture" not in sources or "op_shape" not in activities:
        return np.zeros(len(activities), dtype=bool)
    return (activities["source"] == sources.index("capture")) & (activities["op_shape"] >= 0) & \
        (activities["op_name"] >= 0)


def _not_captured(activities: Optional[Table]) -> Optional[Table]:
    """The activity table with captured rows unlinked from the replay's op (they count through their captured op)."""
    if activities is None or not len(activities):
        return activities
    captured = _captured(activities)
    if not captured.any():
        return activities
    cols = dict(activities.columns)
    cols["op"] = np.where(captured, -1, activities["op"])
    return Table(activities.name, cols, activities.strings)


def captured_groups(activities: Table, shapes: Dict[int, Any]) -> List[OpGroup]:
    """One group per (captured op name, shapes) of the graph-replayed kernels: their device time, kernels, FLOPs
    and peak. A replayed launch has no CPU call in this trace: `calls` counts the kernels replayed."""
    rows = np.flatnonzero(_captured(activities))
    if not len(rows):
        return []
    names = activities.strings["op_name"]
    pairs, inverse = unique_rows(np.stack([activities["op_name"][rows], activities["op_shape"][rows]], axis=1))
    inverse = inverse.reshape(-1)
    dur, flops = np.nan_to_num(activities["dur"][rows]), activities["flops"][rows]
    peak = activities["peak_tflops"][rows] if "peak_tflops" in activities else np.full(len(rows), np.nan)
    out = []
    for g, (name, code) in enumerate(pairs.tolist()):
        mine = inverse == g
        dims, types, concrete = shapes.get(code) or (None, None, None)
        known = ~np.isnan(flops[mine])
        peaks = peak[mine][~np.isnan(peak[mine])]
        out.append(OpGroup(names[name], dims, types, concrete, int(mine.sum()), 0.0, float(dur[mine].sum()),
                           int(mine.sum()), float(flops[mine][known].sum()) if known.all() else None,
                           "" if known.all() else "FLOPs unknown for some replayed kernels",
                           peak_tflops=float(peaks[0]) if len(peaks) else None,
                           self_us=float(dur[mine].sum()), source="graph capture"))
    return out


def _group_parents(parents: np.ndarray, group_of: np.ndarray, g: int) -> np.ndarray:
    """Per group: the group of the enclosing op of most of its calls (-1: mostly top level)."""
    nested = parents >= 0
    parent_grp = np.where(nested, group_of[np.clip(parents, 0, None)], -1)
    best = np.full(g, -1, dtype=np.int64)
    if nested.any():
        pairs, inverse = unique_rows(np.stack([group_of[nested], parent_grp[nested]], axis=1))
        counts = np.bincount(inverse, minlength=len(pairs))
        top = np.bincount(group_of[~nested], minlength=g)
        most = np.zeros(g, dtype=np.int64)
        for (child, parent), n in zip(pairs.tolist(), counts.tolist()):
            if parent != child and n > most[child] and n > top[child]:
                most[child], best[child] = n, parent
    return best


def _device_time(ops: Table, group_of: np.ndarray, g: int, acts: Optional[Table], parents: np.ndarray):
    """Per group: activity time and count of the ops in it and of their descendants, the first known peak, and
    the time of the activities its ops launched themselves (self); and per op, its calls' device time."""
    device, kernels, peak, own = np.zeros(g), np.zeros(g, dtype=np.int64), np.full(g, np.nan), np.zeros(g)
    op_time = np.zeros(len(ops))
    if acts is None or not len(acts) or "op" not in acts:
        return device, kernels, peak, own, op_time
    row = acts["op"].astype(np.int64)
    dur = np.nan_to_num(acts["dur"])
    direct = row >= 0
    np.add.at(own, group_of[row[direct]], dur[direct])
    act_peak = acts["peak_tflops"] if "peak_tflops" in acts else np.full(len(acts), np.nan)
    last = np.full(len(row), -1, dtype=np.int64)
    while True:  # climb one level of the op tree per pass; each ancestor group gets the activity once
        live = row >= 0
        if not live.any():
            break
        np.add.at(op_time, row[live], dur[live])
        grp = np.where(live, group_of[np.clip(row, 0, None)], -1)
        fresh = live & (grp != last)  # direct recursion into the same group counts once
        np.add.at(device, grp[fresh], dur[fresh])
        np.add.at(kernels, grp[fresh], 1)
        known = fresh & ~np.isnan(act_peak)
        unset = np.isnan(peak[grp[known]])
        peak[grp[known][unset]] = act_peak[known][unset]
        last = np.where(live, grp, last)
        row = np.where(live, parents[np.clip(row, 0, None)], -1)
    return device, kernels, peak, own, op_time


def merge_groups(parts: Iterable[Dict[Tuple[str, str, str], OpGroup]]) -> List[Dict[str, Any]]:
    """Rows of the groups of several traces (spans) merged, most device time first, then most CPU time."""
    merged: Dict[Tuple[str, str, str], OpGroup] = {}
    for groups in parts:
        for key, grp in groups.items():
            if key in merged:
                merged[key].add(grp)
            else:
                merged[key] = OpGroup(**grp.__dict__)
    rows = [g.row() for g in merged.values()]
    return sorted(rows, key=lambda r: (-(r["device_us"] or 0.0), -r["cpu_us"], r["op"]))


def tree_rows(rows: Sequence[Dict[str, Any]], keep: Optional[Iterable[str]] = None) -> List[Dict[str, Any]]:
    """Rows in tree order (each parent before its children, siblings by most device time), with `depth`; a parent
    link that would close a cycle (recursion through other shapes) or names a missing row is cut. `keep`: ids of
    rows to show (a filter's hits): they and their ancestors only."""
    by_id = {r["id"]: r for r in rows}
    parent = {r["id"]: _acyclic_parent(r["id"], by_id) for r in rows}
    if keep is not None:
        wanted = set()
        for rid in keep:
            while rid is not None and rid not in wanted:
                wanted.add(rid)
                rid = parent.get(rid)
        by_id = {k: v for k, v in by_id.items() if k in wanted}
    children: Dict[Optional[str], List[str]] = {}
    for rid in by_id:
        children.setdefault(parent[rid] if parent[rid] in by_id else None, []).append(rid)
    out: List[Dict[str, Any]] = []
    stack = [(rid, 0) for rid in reversed(_by_time(children.get(None, []), by_id))]
    while stack:
        rid, depth = stack.pop()
        out.append({**by_id[rid], "parent": parent[rid] if parent[rid] in by_id else None, "depth": depth})
        stack.extend((c, depth + 1) for c in reversed(_by_time(children.get(rid, []), by_id)))
    return out


def _acyclic_parent(rid: str, by_id: Dict[str, Dict[str, Any]]) -> Optional[str]:
    seen, cur = {rid}, by_id[rid].get("parent")
    while cur is not None and cur in by_id:
        if cur in seen:
            return None
        seen.add(cur)
        cur = by_id[cur].get("parent")
    first = by_id[rid].get("parent")
    return first if first in by_id else None


def _by_time(ids: List[str], by_id: Dict[str, Dict[str, Any]]) -> List[str]:
    return sorted(ids, key=lambda i: (-(by_id[i]["device_us"] or 0.0), -by_id[i]["cpu_us"], by_id[i]["op"]))


def has_shapes(trace: KinetoTrace) -> bool:
    return bool(trace.meta.record_shapes) or bool(len(trace.ops) and (trace.ops["shape"] >= 0).any())


def distribution(rows: Sequence[Dict[str, Any]], op: str) -> List[Dict[str, Any]]:
    """The input-shape distribution of one op: its groups' shapes with calls, time and share of calls."""
    picked = [r for r in rows if r["op"] == op]
    total = sum(r["calls"] for r in picked) or 1
    out = [{"shape": r["shape"], "input_types": r["input_types"], "calls": r["calls"], "share": r["calls"] / total,
            "cpu_us": r["cpu_us"], "device_us": r["device_us"], "tflops": r["tflops"], "pct_peak": r["pct_peak"]}
           for r in picked]
    return sorted(out, key=lambda r: (-r["calls"], r["shape"]))


# ---------------------------------------------------------------------------------------------- timeline

@dataclass
class Timeline:
    """Top-level ops of a trace, by absolute start time (ns): what tensor records are joined to."""
    start_ns: np.ndarray
    names: List[str]
    shapes: List[str]

    @classmethod
    def of(cls, trace: KinetoTrace) -> "Timeline":
        ops = trace.ops
        if not len(ops):
            return cls(np.empty(0, dtype=np.int64), [], [])
        top = np.flatnonzero(op_parents(ops) < 0)
        base_us = (trace.meta.base_time_ns or 0) / 1000.0
        ns = np.round((ops["ts"][top] + base_us) * 1000.0)
        # A corrupt timestamp (inf, or past int64 nanoseconds) sorts last and can never match a record.
        start = np.where(np.isfinite(ns) & (np.abs(ns) < 9e18), ns, 9e18).astype(np.int64)
        order = np.argsort(start, kind="stable")
        top, start = top[order], start[order]
        names = ops.strings["name"]
        shape_text = {}
        shapes = []
        for code in ops["shape"][top].tolist():
            if code not in shape_text:
                shape_text[code] = shape_label(trace.shape(code)[0]) if code >= 0 else ""
            shapes.append(shape_text[code])
        return cls(start, [names[c] if c >= 0 else "?" for c in ops["name"][top].tolist()], shapes)

    @classmethod
    def concat(cls, parts: Sequence["Timeline"]) -> "Timeline":
        if not parts:
            return cls(np.empty(0, dtype=np.int64), [], [])
        start = np.concatenate([p.start_ns for p in parts])
        order = np.argsort(start, kind="stable")
        names = [n for p in parts for n in p.names]
        shapes = [s for p in parts for s in p.shapes]
        return cls(start[order], [names[i] for i in order.tolist()], [shapes[i] for i in order.tolist()])


# ---------------------------------------------------------------------------------------------- tensors

@dataclass
class Tensors:
    """tensor.trace records (several files concatenated) with `op`, `op_shape` and `producer` columns added."""
    table: Table
    files: List[Dict[str, Any]] = field(default_factory=list)
    errors: List[Dict[str, Any]] = field(default_factory=list)
    error_count: int = 0
    matched: int = 0

    def to_pandas(self):
        df = self.table.to_pandas()
        df["ptr"] = [hex(int(p)) for p in self.table["ptr"]]
        return df


def join_tensors(files: Sequence[TensorTraceFile], timeline: Optional[Timeline] = None) -> Tensors:
    """Concatenate tensor.trace files and join their records to ops (by time) and producers (by data pointer)."""
    table = _concat([f.table for f in files])
    ops, op_shapes = Interner(), Interner()
    ops.code("")
    op_shapes.code("")
    op_col = np.zeros(len(table), dtype=np.int32)
    shape_col = np.zeros(len(table), dtype=np.int32)
    order = np.lexsort((table["lineno"], table["ts"]))
    matched = _join_ops(table, order, timeline, op_col, shape_col, ops, op_shapes) if timeline is not None else 0
    producer, producers = _producers(table, order)
    table.columns.update(op=op_col, op_shape=shape_col, producer=producer)
    table.strings.update(op=ops.items, op_shape=op_shapes.items, producer=producers)
    errors = [{"file": f.path, "line": n, "reason": r} for f in files for n, r in f.errors]
    meta = [{"file": f.path, "records": len(f), "lines": f.lines, "errors": f.error_count} for f in files]
    return Tensors(table, meta, errors, sum(f.error_count for f in files), matched)


def _concat(tables: Sequence[Table]) -> Table:
    """One table from several tensor tables, string codes merged."""
    if len(tables) == 1:
        return Table("tensors", dict(tables[0].columns), dict(tables[0].strings))
    if not tables:
        from ...trace.tensortrace import parse_lines
        return parse_lines([]).table
    columns: Dict[str, List[np.ndarray]] = {}
    merged = {c: Interner() for c in tables[0].strings}
    for t in tables:
        for col, arr in t.columns.items():
            if col in merged:
                lookup = np.fromiter((merged[col].code(s) for s in t.strings[col]), np.int32, len(t.strings[col]))
                arr = lookup[arr] if len(arr) else arr
            columns.setdefault(col, []).append(arr)
    return Table("tensors", {c: np.concatenate(v) for c, v in columns.items()},
                 {c: i.items for c, i in merged.items()})


def _join_ops(table: Table, order: np.ndarray, timeline: Timeline, op_col: np.ndarray, shape_col: np.ndarray,
              ops: Interner, op_shapes: Interner) -> int:
    """Fill op / op_shape codes of records (see the module docstring); returns how many records got an op. Each
    call's window of candidate ops is found for all calls at once (sorted searches), so the per-record loop is
    a few dictionary lookups: linear in the records."""
    kinds, functions = table.strings["kind"], table.strings["function"]
    call_code = kinds.index("call") if "call" in kinds else -1
    is_call = table["kind"][order] == call_code
    ts = table["ts"][order]
    call_times = np.unique(ts[is_call])
    nxt = np.searchsorted(call_times, ts, side="right")
    end = np.where(nxt < len(call_times), call_times[np.minimum(nxt, len(call_times) - 1)] if len(call_times) else 0,
                   ts + 10_000_000)  # the last call: 10 ms
    lo = np.searchsorted(timeline.start_ns, ts, side="left").tolist()
    hi = np.searchsorted(timeline.start_ns, end, side="left").tolist()
    last_op: Dict[int, Tuple[int, int]] = {}  # function code -> its latest call's (op, shape) codes
    cache: Dict[Tuple[int, int], Tuple[int, int]] = {}
    fns = table["function"][order].tolist()
    for pos, (row, fn, call) in enumerate(zip(order.tolist(), fns, is_call.tolist())):
        if not call:
            op_col[row], shape_col[row] = last_op.get(fn, (0, 0))
            continue
        key = (lo[pos], hi[pos], fn)
        if key not in cache:
            cache[key] = _op_at(timeline, lo[pos], hi[pos], functions[fn], ops, op_shapes)
        op_col[row], shape_col[row] = last_op[fn] = cache[key]
    return int((op_col > 0).sum())


def _op_at(timeline: Timeline, lo: int, hi: int, function: str, ops: Interner,
           op_shapes: Interner) -> Tuple[int, int]:
    """The op among the top-level ops `lo:hi` (those starting within a call's window) that the call ran."""
    if lo >= hi:
        return 0, 0
    want = function.rsplit(".", 1)[-1].strip("_").lower()
    pick = next((i for i in range(lo, min(hi, lo + 16)) if timeline.names[i].split("::")[-1].lower() == want), lo)
    return ops.code(timeline.names[pick]), op_shapes.code(timeline.shapes[pick])


def _producers(table: Table, order: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    """Per record, the latest earlier [ret] record with the same data pointer, as "function file:line"."""
    labels = Interner()
    labels.code("")
    out = np.zeros(len(table), dtype=np.int32)
    kinds, fns, files = table.strings["kind"], table.strings["function"], table.strings["file"]
    ret_code = kinds.index("ret") if "ret" in kinds else -1
    made: Dict[int, int] = {}
    columns = (table[c][order].tolist() for c in ("ptr", "kind", "function", "file", "line"))
    for row, ptr, kind, fn, file, line in zip(order.tolist(), *columns):
        if not ptr:
            continue
        if kind == ret_code:
            made[ptr] = labels.code(f"{fns[fn]} {files[file]}:{line}")
        else:
            out[row] = made.get(ptr, 0)
    return out, labels.items


# ---------------------------------------------------------------------------------------------- tensor rows

TENSOR_COLUMNS = ("kind", "ts", "shape", "ndim", "numel", "bytes", "name", "function", "file", "line", "op",
                  "op_shape", "producer")
TENSOR_SORTABLE = frozenset(TENSOR_COLUMNS) | {"ptr"}


def tensor_rows(tensors: Tensors, index: Iterable[int], t0: Optional[int] = None) -> List[Dict[str, Any]]:
    """JSON-ready rows; `ptr` as hex text, `t_ms` relative to `t0` (the first record by default)."""
    t = tensors.table
    if t0 is None:
        t0 = int(t["ts"].min()) if len(t) else 0
    out = []
    for i in index:
        row = {c: t.decode(c, int(t[c][i])) if c in t.strings else int(t[c][i]) for c in TENSOR_COLUMNS}
        row["ptr"] = hex(int(t["ptr"][i]))
        row["t_ms"] = (row["ts"] - t0) / 1e6
        row["line"] = row["line"] if row["line"] >= 0 else None
        out.append(row)
    return out


def tensor_filter(tensors: Tensors, text: str) -> np.ndarray:
    """Records whose name, function, file, shape or op contains `text` (case-insensitive)."""
    t = tensors.table
    if not text:
        return np.ones(len(t), dtype=bool)
    needle = text.lower()
    mask = np.zeros(len(t), dtype=bool)
    for col in ("name", "function", "file", "shape", "op"):
        cats = t.strings[col]
        hits = np.fromiter((needle in c.lower() for c in cats), dtype=bool, count=len(cats))
        mask |= hits[t[col]] if len(cats) else False
    return mask


def tensor_order(tensors: Tensors, key: str, descending: bool) -> np.ndarray:
    """Row order by a column (string columns by text), stable; time order breaks ties."""
    t = tensors.table
    values = t[key]
    if key in t.strings:
        cats = t.strings[key]
        rank = np.argsort(np.argsort(np.array(cats, dtype=object).astype(str), kind="stable"), kind="stable")
        values = rank[values] if len(cats) else values
    order = np.lexsort((t["lineno"], t["ts"], values))
    return order[::-1] if descending else order


# ---------------------------------------------------------------------------------------------- one trace

def damaged_note(damaged: Sequence[str]) -> str:
    """What the CLI, the API and the plugin say of tensor.trace companions that do not read ("file: reason")."""
    return "damaged tensor.trace, not read: " + "; ".join(damaged)


@dataclass
class ShapesReport:
    """The Tensor shapes view of one Kineto trace (and its tensor.trace files, if any), for the CLI and the API."""
    path: str
    record_shapes: bool
    rows: List[Dict[str, Any]]
    tensors: Optional[Tensors]
    tensor_trace_paths: List[str]
    damaged_tensor_traces: List[str] = field(default_factory=list)  # "file: reason" of companions that do not read

    @property
    def tensors_note(self) -> str:
        """Why `tensors` is None ("" when it is not): no tensor.trace was found or given for this trace, or the
        ones found are damaged."""
        if self.tensors is not None:
            return ""
        if self.damaged_tensor_traces:
            return damaged_note(self.damaged_tensor_traces)
        return (f"no tensor.trace for {os.path.basename(self.path)}: record one with tb_gpuinsight.TensorTrace or "
                "tb_gpuinsight.profile (saved as {worker}.{stamp}.tensor.trace beside the trace), or pass "
                "tensor_traces=[...]")

    @property
    def ops(self):
        """Op groups as a DataFrame, one row per (op, input dims, input types)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=OP_COLUMNS)

    def distribution(self, op: str):
        """The input-shape distribution of one op as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(distribution(self.rows, op),
                            columns=["shape", "input_types", "calls", "share", "cpu_us", "device_us", "tflops",
                                     "pct_peak"])


def companion_tensor_traces(trace_path: str) -> List[str]:
    """The tensor.trace files logdir discovery would give this trace's span: its own `{worker}.{stamp}.tensor.trace`
    first, then the run-level ones of its directory."""
    from ...logdir import TENSOR_TRACE, companions

    return companions(trace_path, TENSOR_TRACE)


def shapes_report(trace: KinetoTrace, activities: Optional[Table] = None,
                  tensor_traces: Sequence[TensorTraceFile] = (),
                  shapes: Optional[Dict[int, Any]] = None) -> ShapesReport:
    """Op groups of a loaded trace (graph-replayed kernels through their captured ops when `shapes`, the
    analysis' shape table, is given) and its tensor records joined to its ops."""
    rows = merge_groups([op_groups(trace, activities, shapes)])
    tensors = join_tensors(tensor_traces, Timeline.of(trace)) if tensor_traces else None
    return ShapesReport(trace.meta.path, has_shapes(trace), rows, tensors, [t.path for t in tensor_traces])


__all__ = ["ShapesReport", "companion_tensor_traces", "shapes_report", "OpGroup", "op_groups", "merge_groups", "tree_rows", "group_id", "distribution", "has_shapes", "shape_label", "Timeline",
           "Tensors", "join_tensors", "tensor_rows", "tensor_filter", "tensor_order", "NO_SHAPES",
           "NO_TENSOR_TRACE", "TENSOR_COLUMNS", "TENSOR_SORTABLE"]
