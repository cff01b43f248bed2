"""Fill what a Kineto trace did not record before it is analysed, so that more kernels get FLOPs and bytes.

Two sources, both writing the reader's own representation (`trace.ops["shape"]` codes into `trace.shapes`, each a
raw-JSON (Input Dims, Input type, Concrete Inputs) triple) so that the estimate code needs no change:

1. ET shapes: a cpu op without Input Dims, or without Concrete Inputs, takes them from the Execution Trace node
   linked to it (`analysis/graph/et_link.py`). ET types ("Tensor(float)", "Int", "GenericList[Int]") are written the way
   Kineto writes them ("float", "Scalar", "ScalarList"), ET values as Kineto's Concrete Inputs strings.
2. Inferred convolution parameters: 2021-23 traces record no Concrete Inputs, so a forward convolution's stride,
   padding and dilation are unknown. Its output shape is known elsewhere: the ET node's outputs, the first input
   (grad_output) of its autograd backward node (same sequence number), the grad_output of a backward op with the
   same input and weight shapes, or the next op on its thread that reads an (N, C_out, ...) tensor. Per spatial
   dim we enumerate stride 1..4 and padding 0..kernel-1 with dilation 1, and dilation 2..4 only when no undilated
   conv explains the output; a unique solution is written as Concrete Inputs, otherwise the conv stays unknown
   ("stride/padding unknown: ambiguous"). FLOPs and bytes depend only on the output shape, which is observed, so
   any consistent solution gives the same estimate; uniqueness guards against a wrong output shape. Ops whose
   `transposed` flag is itself unrecorded (convolution, _convolution) are inferred only when the output does not
   grow. `cudnn_convolution_backward_weight` gets its weight size from the conv backward op enclosing it, else from
   one with the same input and grad_output shapes.

An ET usually covers one iteration of a Kineto window of many. Per thread, each dense run of ops the ET filled is a
template; every other stretch of that thread whose op names repeat it (exactly, or at least MIN_REPEAT of them in
order: another iteration of the same step) takes the filled shapes of the ops it pairs, op by op.

Every op's shape provenance is the coded string column `trace.ops["shape_source"]`: "recorded", "ET shapes"
(dims from the ET), "recorded + ET values" (recorded dims, Concrete Inputs from the ET), "ET shapes, propagated"
(from the same op of an iteration the ET covers), "inferred" (conv parameters), or -1 where the op has no shapes;
`trace.ops["shape_note"]` is AMBIGUOUS where a conv's parameters stay unknown, else -1.
"""
from __future__ import annotations

import difflib
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import msgspec
import numpy as np

from ..errors import GpuInsightError
from ..estimate.bytes import CONV_FORWARD_OPS, OpArgs, UnknownEstimate, _CONV_SPECS, conv_geometry, \
    conv_output_shape
from ..trace.et import ExecutionTrace, load_et
from ..trace.strides import fold_strides
from .et_stack import fill_by_call_stack, python_stacks
from .graph.et_link import link_et

RECORDED, ET_SHAPES, INFERRED, ET_VALUES = "recorded", "ET shapes", "inferred", "recorded + ET values"
PROPAGATED = "ET shapes, propagated"
SOURCES = [RECORDED, ET_SHAPES, INFERRED, ET_VALUES, PROPAGATED]
AMBIGUOUS = "stride/padding unknown: ambiguous"
MIN_LINK_RATE = 0.5  # the paired corpus ETs link 68-83 % of their nodes; an unrelated one links few
_MAX_GAP = 64  # ops between two ET-filled ops of one thread that still belong to one template
_MIN_RUN = 16  # ET-filled ops a template needs
MIN_REPEAT = 0.8  # share of a template's ops another iteration must repeat in order to take its shapes
_STRIDES = (1, 2, 3, 4)
_DILATIONS = (2, 3, 4)
_BACKWARD_OPS = ("aten::cudnn_convolution_backward", "aten::convolution_backward")
_WEIGHT_GRAD_OP = "aten::cudnn_convolution_backward_weight"


@dataclass
class EnrichReport:
    """What `enrich` did: per ET its link, and the counts of ops it filled or could not."""
    execution_traces: List[Dict[str, Any]] = field(default_factory=list)
    et_shapes: int = 0  # ops that got Input Dims from an ET
    et_concrete: int = 0  # ops that had dims and got Concrete Inputs from an ET
    et_propagated: int = 0  # ops of other iterations that took the ET-filled shapes of their twin op
    et_iterations: int = 0  # op sequences (per thread) found repeating the one the ET covers
    et_by_call_stack: int = 0  # ops no iteration match reached, sized by the ET-sized ops of their call stack
    et_by_python_stack: int = 0  # of those, sized with the Python stack (Call stack / module calls) in the key
    et_unmatched: Dict[str, int] = field(default_factory=dict)  # ops of a kind the ET sized left without shapes
    inferred: int = 0  # convolution ops whose parameters were inferred
    ambiguous: int = 0  # convolution ops left unknown (no unique solution)
    graph_capture: Dict[str, Any] = field(default_factory=dict)  # analysis/kernels/graph_capture.py's MergeReport
    shape_codes: Dict[Tuple[bytes, bytes, bytes], int] = field(default_factory=dict, repr=False)  # trace.shapes

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "shape_codes"}


def enrich(trace, execution_traces: Sequence["os.PathLike[str] | str"] = ()) -> EnrichReport:
    """Fill missing shapes of `trace` in place from its Execution Traces, then infer convolution parameters.

    ETs are tried in order (the span's own first, then the run's); the first recorded by the trace's process that
    links at least MIN_LINK_RATE of its nodes is used, since a run-level ET may belong to another trace. An ET that
    cannot be read or links too little is reported in `execution_traces` with the reason and skipped: bad
    companions never fail the analysis.
    The report is also kept on `trace.enrichment`; a trace is enriched once (later calls return that report)."""
    if getattr(trace, "enrichment", None) is not None:
        return trace.enrichment
    report = EnrichReport()
    trace.enrichment = report
    ops = trace.ops
    source = np.where(ops["shape"] >= 0, 0, -1).astype(np.int32) if len(ops) else np.empty(0, np.int32)
    ops.columns["shape_source"] = source
    ops.strings["shape_source"] = list(SOURCES)
    ops.columns["shape_note"] = np.full(len(ops), -1, dtype=np.int32)
    ops.strings["shape_note"] = [AMBIGUOUS]
    et_outputs: Dict[int, Tuple[int, ...]] = {}
    for path in execution_traces:
        if _fill_from_et(trace, os.fspath(path), report, et_outputs):
            break
    if len(ops):
        _infer_convs(trace, report, et_outputs)
    return report


def shape_sources(trace, activities) -> Dict[str, Any]:
    """Where the shapes behind a trace's kernel time came from: the share of kernel time per source ("recorded",
    "ET shapes", "inferred", "graph capture" (replayed kernels rated from their capture's ops), "no shapes",
    "no op"), plus the enrichment report."""
    kinds = activities.strings.get("kind", [])
    is_kernel = activities["kind"] == kinds.index("kernel") if "kernel" in kinds else \
        np.zeros(len(activities), dtype=bool)
    dur, op = activities["dur"][is_kernel], activities["op"][is_kernel]
    total = float(dur.sum())
    labels = SOURCES + ["graph capture", "no shapes", "no op"]
    source = np.full(len(op), len(labels) - 1, dtype=np.int64)
    linked = op >= 0
    if "shape_source" in trace.ops:
        code = trace.ops["shape_source"][op[linked]]
    else:  # not enriched: recorded or nothing
        code = np.where(trace.ops["shape"][op[linked]] >= 0, 0, -1)
    source[linked] = np.where(code >= 0, code, len(SOURCES) + 1)
    sources = activities.strings.get("source", [])
    if "capture" in sources:  # replayed kernels rated from the ops of their graph's capture
        source[activities["source"][is_kernel] == sources.index("capture")] = len(SOURCES)
    shares = np.bincount(source, weights=dur, minlength=len(labels)) / total if total > 0 else \
        np.zeros(len(labels))
    report = trace.enrichment.to_dict() if getattr(trace, "enrichment", None) is not None else EnrichReport().to_dict()
    return {"kernel_time_share": dict(zip(labels, (float(x) for x in shares))), **report}


def shape_sources_section(ctx) -> "Section":
    """Summary section builder: `shape_sources` of the span (see `shape_sources`)."""
    from ..sections import Section

    return Section("shape_sources", info=shape_sources(ctx.trace, ctx.eff.activities))


# ------------------------------------------------------------------------------------------------ ET shapes

def _fill_from_et(trace, path: str, report: EnrichReport, et_outputs: Dict[int, Tuple[int, ...]]) -> bool:
    """Fill from one ET; False when it cannot be read or does not belong to this trace."""
    try:
        et = load_et(path)
    except GpuInsightError as exc:
        report.execution_traces.append({"path": path, "used": False, "reason": str(exc)})
        return False
    if not _same_process(et, trace):
        report.execution_traces.append({"path": path, "used": False,
                                        "reason": f"recorded by another process (pid {et.pid})"})
        return False
    link = link_et(et, trace.ops)
    if link.rate < MIN_LINK_RATE:
        report.execution_traces.append({"path": path, "used": False, **link.to_dict(),
                                        "reason": f"links only {100 * link.rate:.0f}% of its nodes to this trace"})
        return False
    report.execution_traces.append({"path": path, "used": True, **link.to_dict()})
    ops = trace.ops
    n_ops = len(ops)
    filled = []
    for row in np.flatnonzero((link.op >= 0) & (link.op < n_ops)).tolist():
        op_row = int(link.op[row])
        dims, types, concrete = _kineto_args(et, row)
        out = _first_output(et, row)
        if out is not None:
            et_outputs.setdefault(op_row, out)
        code = int(ops["shape"][op_row])
        if code < 0:
            if dims is None:
                continue
            concrete = fold_strides(dims, concrete, et.inputs[row].strides)  # broadcast inputs read their storage
            _set_shape(trace, op_row, (dims, types, concrete), ET_SHAPES)
            report.et_shapes += 1
            filled.append(op_row)
        elif not trace.shapes[code][2] and concrete is not None and _any_value(concrete):
            rec_dims, rec_types, _ = trace.shape(code)
            if isinstance(rec_dims, list) and len(rec_dims) == len(concrete):
                _set_shape(trace, op_row, (rec_dims, rec_types, concrete), ET_VALUES)
                report.et_concrete += 1
                filled.append(op_row)
    _propagate(trace, np.array(filled, dtype=np.int64), report)
    sized = np.isin(ops["shape_source"], [SOURCES.index(s) for s in (ET_SHAPES, ET_VALUES, PROPAGATED)])
    report.et_by_call_stack, report.et_by_python_stack = fill_by_call_stack(
        ops, sized, SOURCES.index(PROPAGATED), lambda: python_stacks(trace))
    report.et_unmatched = _unmatched(trace, np.array(filled, dtype=np.int64))
    return True


def _unmatched(trace, filled: np.ndarray, top: int = 20) -> Dict[str, int]:
    """Op names the ET gave shapes to somewhere, with the count of their ops still without shapes (in iterations
    whose op sequence did not repeat the ET's closely enough to be matched), most first."""
    ops = trace.ops
    if not len(filled):
        return {}
    sized = np.unique(ops["name"][filled])
    left = (ops["shape"] < 0) & np.isin(ops["name"], sized)
    codes, counts = np.unique(ops["name"][left], return_counts=True)
    names = ops.strings["name"]
    order = np.argsort(-counts, kind="stable")[:top]
    return {names[int(codes[i])]: int(counts[i]) for i in order.tolist()}


# ------------------------------------------------------------------------------- shapes across iterations

def _propagate(trace, filled: np.ndarray, report: EnrichReport) -> None:
    """Give the ops of every other iteration the shapes the ET filled in its own (see the module docstring)."""
    ops = trace.ops
    if not len(filled):
        return
    thread = ops["pid"].astype(np.int64) << 32 | ops["tid"].astype(np.int64)
    for key in np.unique(thread[filled]).tolist():
        on_thread = np.flatnonzero(thread == key)
        on_thread = on_thread[np.lexsort((-ops["dur"][on_thread], ops["ts"][on_thread]))]  # parents first
        pos = np.empty(len(ops), dtype=np.int64)
        pos[on_thread] = np.arange(len(on_thread))
        names = ops["name"][on_thread]
        for first, last in _runs(np.sort(pos[filled[thread[filled] == key]])):
            for mine, twins in _iterations(names, first, last):
                report.et_iterations += 1
                _copy_filled(trace, on_thread[mine], on_thread[twins], report)


def _runs(positions: np.ndarray) -> List[Tuple[int, int]]:
    """[first, last) of each run of at least _MIN_RUN filled positions whose consecutive ones lie at most _MAX_GAP
    apart. Nodes linked by name order alone may land in other iterations: they must not stretch a template over
    two iterations (it would then repeat nowhere), and a few stray ops are too short a sequence to be sure of."""
    breaks = np.flatnonzero(np.diff(positions) > _MAX_GAP) + 1
    return [(int(run[0]), int(run[-1]) + 1) for run in np.split(positions, breaks) if len(run) >= _MIN_RUN]


def _iterations(names: np.ndarray, first: int, last: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """(template positions, their twins' positions) for the stretches of `names` before and after the template
    `names[first:last]` that repeat it, walking away from it one stretch at a time until one does not: exactly,
    or with a few ops added or missing (the first iteration often differs a little) when SequenceMatcher pairs at
    least MIN_REPEAT of the template's ops."""
    template, n, k = names[first:last], len(names), last - first
    slack = max(8, k // 8)
    found = []
    cursor = last
    while cursor + MIN_REPEAT * k <= n:  # forward
        mine, twins = _repeat(template, names, cursor, min(cursor + k + slack, n))
        if mine is None:
            break
        found.append((first + mine, twins))
        cursor = int(twins[-1]) + 1
    cursor = first
    while cursor - MIN_REPEAT * k >= 0:  # backward
        mine, twins = _repeat(template, names, max(cursor - k - slack, 0), cursor, from_end=True)
        if mine is None:
            break
        found.append((first + mine, twins))
        cursor = int(twins[0])
    return found


def _repeat(template: np.ndarray, names: np.ndarray, lo: int, hi: int, from_end: bool = False):
    """(template positions, positions in names) of the template repeated in names[lo:hi] (flush with its start,
    or its end when `from_end`), or (None, None) when less than MIN_REPEAT of it repeats."""
    k = len(template)
    start = hi - k if from_end else lo
    if lo <= start and start + k <= hi and np.array_equal(names[start:start + k], template):
        return np.arange(k), np.arange(start, start + k)
    a, b = _matched(template, names[lo:hi])
    return (a, lo + b) if len(a) >= MIN_REPEAT * k else (None, None)


def _matched(a: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Positions in `a` and `b` of the op names SequenceMatcher pairs in order."""
    blocks = difflib.SequenceMatcher(None, a.tolist(), b.tolist(), autojunk=False).get_matching_blocks()
    pa = [blk.a + i for blk in blocks for i in range(blk.size)]
    pb = [blk.b + i for blk in blocks for i in range(blk.size)]
    return np.array(pa, dtype=np.int64), np.array(pb, dtype=np.int64)


def _copy_filled(trace, template: np.ndarray, target: np.ndarray, report: EnrichReport) -> None:
    """Op by op: an op the ET filled gives its shapes to its twin when the twin has none, or has the same recorded
    dims and types but no Concrete Inputs."""
    ops = trace.ops
    source = ops["shape_source"]
    et = (source[template] == SOURCES.index(ET_SHAPES)) | (source[template] == SOURCES.index(ET_VALUES))
    for src, dst in zip(template[et].tolist(), target[et].tolist()):
        code, have = int(ops["shape"][src]), int(ops["shape"][dst])
        if have >= 0 and (trace.shapes[have][2] or trace.shapes[have][:2] != trace.shapes[code][:2]):
            continue
        ops["shape"][dst] = code
        source[dst] = SOURCES.index(PROPAGATED)
        report.et_propagated += 1


def _same_process(et: ExecutionTrace, trace) -> bool:
    """False when both record a process id and the ET's is not among the trace's cpu op processes: a small ET of
    common ops (empty, add...) otherwise links by name to any trace."""
    pids = {str(p) for p in trace.ops.strings.get("pid", [])}
    if et.pid is None or not any(p.isdigit() for p in pids):
        return True
    return str(et.pid) in pids


def _kineto_args(et: ExecutionTrace, row: int) -> Tuple[Optional[list], Optional[list], Optional[list]]:
    """An ET node's inputs as Kineto's (Input Dims, Input type, Concrete Inputs); (None,)*3 without inputs."""
    args = et.inputs[row]
    if not args.types or len(args.types) != len(args.shapes):
        return None, None, None
    dims, types, concrete = [], [], []
    values = list(args.values) + [None] * (len(args.types) - len(args.values))
    for shape, typ, value in zip(args.shapes, args.types, values):
        kind = _kineto_type(typ)
        types.append(kind)
        if typ.startswith("Tensor"):
            dims.append(shape if isinstance(shape, list) else [])
            concrete.append("")
        elif kind == "TensorList":
            dims.append([s for s in shape if isinstance(s, list)] if isinstance(shape, list) else [])
            concrete.append("")
        else:
            dims.append([])
            concrete.append(_concrete_text(value))
    return dims, types, concrete


def _kineto_type(typ: str) -> str:
    if typ.startswith("Tensor(") and typ.endswith(")"):
        return typ[len("Tensor("):-1]
    if typ.startswith("GenericList[Tensor") or typ.startswith("TensorList"):
        return "TensorList"
    if typ.startswith("GenericList"):
        return "ScalarList"
    if typ in ("Int", "Double", "Bool", "SymInt", "SymFloat", "SymBool"):
        return "Scalar"
    return "" if typ == "None" else typ


def _concrete_text(value: Any) -> str:
    """A value as Kineto's Concrete Inputs prints it: "1", "False", "[1, 1]", "" for None/unknown."""
    if value is None or value == "<None>":
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "[" + ", ".join(repr(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return ""


def _any_value(concrete: List[str]) -> bool:
    return any(c != "" for c in concrete)


def _first_output(et: ExecutionTrace, row: int) -> Optional[Tuple[int, ...]]:
    out = et.outputs[row]
    if out.shapes and out.types and out.types[0].startswith("Tensor(") and _is_shape(out.shapes[0]):
        return tuple(out.shapes[0])
    return None


def _set_shape(trace, op_row: int, triple: Tuple[Any, Any, Any], source: str) -> None:
    """Point one op at the shape code of `triple` (interned into trace.shapes) and record its source."""
    raw = tuple(msgspec.json.encode(x) if x is not None else b"" for x in triple)
    codes = trace.enrichment.shape_codes
    if not codes:
        codes.update((r, i) for i, r in enumerate(trace.shapes))
    code = codes.get(raw)
    if code is None:
        code = codes[raw] = len(trace.shapes)
        trace.shapes.append(raw)
    trace.ops["shape"][op_row] = code
    trace.ops["shape_source"][op_row] = SOURCES.index(source)


# ------------------------------------------------------------------------------------ convolution parameters

def _infer_convs(trace, report: EnrichReport, et_outputs: Dict[int, Tuple[int, ...]]) -> None:
    ops = trace.ops
    names = ops.strings["name"]
    name_col = ops["name"]
    conv_codes = [i for i, n in enumerate(names) if n.startswith("aten::") and n[6:] in CONV_FORWARD_OPS]
    weight_codes = [i for i, n in enumerate(names) if n == _WEIGHT_GRAD_OP]
    if not conv_codes and not weight_codes:
        return
    hints = _OutputHints(trace, et_outputs)
    cache: Dict[Tuple[int, Tuple[int, ...]], Optional[list]] = {}
    for row in np.flatnonzero(np.isin(name_col, conv_codes) & (ops["shape"] >= 0)).tolist():
        code = int(ops["shape"][row])
        if trace.shapes[code][2]:
            continue  # Concrete Inputs recorded
        op = names[name_col[row]][6:]
        dims, types, _ = trace.shape(code)
        geo = _untransposed_geometry(op, dims, types)
        if geo is None:
            continue
        out = hints.output(row, geo.x, geo.w)
        if out is None:
            continue
        key = (code, out)
        if key not in cache:
            cache[key] = _conv_concrete(op, dims, types, geo, out)
        concrete = cache[key]
        if concrete is None:
            ops["shape_note"][row] = 0
            report.ambiguous += 1
            continue
        _set_shape(trace, row, (dims, types, concrete), INFERRED)
        report.inferred += 1
    for row in np.flatnonzero(np.isin(name_col, weight_codes) & (ops["shape"] >= 0)).tolist():
        if _fill_weight_size(trace, row, hints):
            report.inferred += 1


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool)
                                                    for d in value)


class _OutputHints:
    """Where a forward convolution's output shape can be read, most direct first."""

    def __init__(self, trace, et_outputs: Dict[int, Tuple[int, ...]]) -> None:
        self.trace = trace
        self.et_outputs = et_outputs
        ops = trace.ops
        names = ops.strings["name"]
        self.backward_by_seq: Dict[int, set] = defaultdict(set)
        self.grad_out: Dict[Tuple[Tuple[int, ...], Tuple[int, ...]], set] = defaultdict(set)
        self.weights: Dict[Tuple[Tuple[int, ...], Tuple[int, ...]], set] = defaultdict(set)
        for row in np.flatnonzero((ops["shape"] >= 0)).tolist():
            name = names[ops["name"][row]]
            if name.startswith("aten::"):
                if name in _BACKWARD_OPS:
                    self._note_backward(name, trace.shape(int(ops["shape"][row]))[0])
                continue
            seq = int(ops["seq"][row])
            if seq >= 0 and "ConvolutionBackward" in name:
                dims = trace.shape(int(ops["shape"][row]))[0]
                if isinstance(dims, list) and dims and _is_shape(dims[0]):
                    self.backward_by_seq[seq].add(tuple(dims[0]))
        self._order: Optional[np.ndarray] = None

    def _note_backward(self, name: str, dims: Any) -> None:
        if not isinstance(dims, list) or len(dims) < 3 or not all(_is_shape(d) for d in dims[:3]):
            return
        a, b, c = (tuple(d) for d in dims[:3])
        x, dy, w = (b, a, c) if name == "aten::convolution_backward" else (a, b, c)
        self.grad_out[(x, w)].add(dy)
        self.weights[(x, dy)].add(w)

    def output(self, row: int, x: Tuple[int, ...], w: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
        hit = self.et_outputs.get(row)
        if hit is None:
            hit = _only(self.backward_by_seq.get(int(self.trace.ops["seq"][row]), ()))
        if hit is None:
            hit = _only(self.grad_out.get((x, w), ()))
        if hit is None:
            hit = self._next_reader(row, x, w)
        if hit is None or len(hit) != len(x) or hit[0] != x[0] or hit[1] != w[0]:
            return None
        return hit

    def _thread_order(self) -> Tuple[np.ndarray, np.ndarray]:
        """Ops sorted by (thread, start) and each op's position in that order."""
        if self._order is None:
            ops = self.trace.ops
            self._order = np.lexsort((ops["ts"], ops["tid"]))
            self._pos = np.empty(len(self._order), dtype=np.int64)
            self._pos[self._order] = np.arange(len(self._order))
        return self._order, self._pos

    def enclosing_weight(self, row: int) -> Optional[Tuple[int, ...]]:
        """The weight shape of the conv backward op that encloses `row` on its thread (its parent)."""
        ops, trace = self.trace.ops, self.trace
        order, pos = self._thread_order()
        names = ops.strings["name"]
        ts, end = ops["ts"][row], ops["ts"][row] + ops["dur"][row]
        for k in order[max(pos[row] - 16, 0): pos[row]][::-1].tolist():
            if ops["tid"][k] != ops["tid"][row] or ops["ts"][k] + ops["dur"][k] < end:
                continue
            if names[ops["name"][k]] in _BACKWARD_OPS and ops["shape"][k] >= 0 and ops["ts"][k] <= ts:
                dims = trace.shape(int(ops["shape"][k]))[0]
                return tuple(dims[2]) if isinstance(dims, list) and len(dims) > 2 and _is_shape(dims[2]) else None
        return None

    def _next_reader(self, row: int, x: Tuple[int, ...], w: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
        """The first input of the next op on the same thread, after this conv ends, if it is (N, C_out, ...)."""
        ops, trace = self.trace.ops, self.trace
        order, pos = self._thread_order()
        end = ops["ts"][row] + ops["dur"][row]
        tid = ops["tid"][row]
        for k in order[pos[row] + 1: pos[row] + 64].tolist():
            if ops["tid"][k] != tid:
                return None
            if ops["ts"][k] < end or ops["shape"][k] < 0:
                continue  # a child of the conv, or an op without shapes
            dims = trace.shape(int(ops["shape"][k]))[0]
            first = next((tuple(d) for d in dims if _is_shape(d) and d), None) if isinstance(dims, list) else None
            if first is None:
                continue
            return first if len(first) == len(x) and first[:2] == (x[0], w[0]) else None
        return None


def _only(found) -> Optional[Tuple[int, ...]]:
    return next(iter(found)) if len(found) == 1 else None


def solve_conv_params(size: int, kernel: int, out: int) -> Optional[Tuple[int, int, int]]:
    """The unique (stride, padding, dilation) of one spatial dim that maps `size` to `out`, or None.

    Dilation 1 is tried first (stride 1..4, padding 0..kernel-1); dilation 2..4 only when no undilated
    conv fits. A kernel of 1 ignores dilation (reported as 1)."""
    for dilations in ((1,), _DILATIONS if kernel > 1 else ()):
        found = {(s, p, d) for d in dilations for s in _STRIDES for p in range(d * (kernel - 1) + 1)
                 if p <= d * (kernel - 1) and (size + 2 * p - d * (kernel - 1) - 1) // s + 1 == out
                 and size + 2 * p - d * (kernel - 1) - 1 >= 0}
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def _untransposed_geometry(op: str, dims: Any, types: Any):
    """The conv's geometry read as a forward (not transposed) convolution; None for transposed ops or bad shapes.
    Ops whose `transposed` flag is an argument (convolution, _convolution) are read with it False; the caller
    accepts them only when the output is not larger than the input, which a transposed conv's would be."""
    spec = _CONV_SPECS[op]
    if spec.transposed is True or not isinstance(dims, list):
        return None
    concrete = [""] * len(dims)
    if not isinstance(spec.transposed, bool) and spec.transposed < len(dims):
        concrete[spec.transposed] = "False"
    try:
        return conv_geometry(op, OpArgs(dims, types, concrete))
    except UnknownEstimate:
        return None


def _conv_concrete(op: str, dims: list, types: Any, geo, out: Tuple[int, ...]) -> Optional[list]:
    """Concrete Inputs for a forward conv that give `out`, or None when ambiguous or inconsistent."""
    if geo.transposed:
        return None
    n = len(geo.x) - 2
    spec = _CONV_SPECS[op]
    if not isinstance(spec.transposed, bool) and any(out[2 + i] > geo.x[2 + i] for i in range(n)):
        return None  # could be a transposed conv: its flag is not recorded
    per_dim = [solve_conv_params(geo.x[2 + i], geo.w[2 + i], out[2 + i]) for i in range(n)]
    if any(p is None for p in per_dim) or geo.x[1] % geo.w[1]:
        return None
    values = {spec.stride: [p[0] for p in per_dim], spec.padding: [p[1] for p in per_dim],
              spec.dilation: [p[2] for p in per_dim], spec.groups: geo.x[1] // geo.w[1],
              spec.output_padding: [0] * n}
    if not isinstance(spec.transposed, bool):
        values[spec.transposed] = False
    if spec.stride is None and any(p[0] != 1 for p in per_dim) or \
            spec.padding is None and any(p[1] != 0 for p in per_dim) or \
            spec.dilation is None and any(p[2] != 1 for p in per_dim):
        return None  # the op cannot express these parameters: the output hint belongs to something else
    concrete = [_concrete_text(values[i]) if i in values else "" for i in range(len(dims))]
    try:
        check = conv_output_shape(op, OpArgs(dims, types, concrete), geo)
    except UnknownEstimate:
        return None
    return concrete if tuple(check) == tuple(out) else None


def _fill_weight_size(trace, row: int, hints: _OutputHints) -> bool:
    """cudnn_convolution_backward_weight(weight_size, grad_output, input, ...): weight_size from the backward op
    that encloses it, else from a backward op with the same input and grad_output (when unique)."""
    code = int(trace.ops["shape"][row])
    if trace.shapes[code][2]:
        return False
    dims, types, _ = trace.shape(code)
    if not isinstance(dims, list) or len(dims) < 3 or not _is_shape(dims[1]) or not _is_shape(dims[2]):
        return False
    weight = hints.enclosing_weight(row) or _only(hints.weights.get((tuple(dims[2]), tuple(dims[1])), ()))
    if weight is None:
        return False
    concrete = [_concrete_text(list(weight))] + [""] * (len(dims) - 1)
    _set_shape(trace, row, (dims, types, concrete), INFERRED)
    return True


__all__ = ["enrich", "EnrichReport", "shape_sources", "shape_sources_section", "solve_conv_params", "RECORDED",
           "ET_SHAPES", "ET_VALUES", "INFERRED", "PROPAGATED", "SOURCES",
           "AMBIGUOUS"]
