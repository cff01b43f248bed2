"""Bytes of an op's helper kernels: the tensor each one moves, from the op's recorded shapes (helpers do no FLOPs
of the op: `roles.py`). Where the trace does not say which tensor, the bytes stay unknown with the reason.

- Layout transform (cuDNN `nchwToNhwcKernel` / `nhwcToNchwKernel`, MIOpen `batched_transpose`...): reads and
  writes the tensor it converts: 2 x that tensor's bytes, in its recorded dtype. Which tensor depends on where the
  transform runs relative to the op's compute kernels: before the first one it converts an input (conv X or W,
  backward dY...), after the last one the output (conv / GEMM output shape from the estimate's shape helpers;
  a convolution backward's gradient from its recorded size). Among those candidates:
  1. cuDNN's `nchwToNhwc` / `nhwcToNchw` launch one block of 32 x 32 elements per (spatial, channel) tile and image:
     grid = (ceil(H*W / 32), ceil(C / 32), N) for an [N, C, H, W] tensor (checked on V100 and H100 traces).
     Exactly one candidate with that grid is the tensor: "matched by its launch grid".
  2. Else a single candidate is the tensor: "inferred from order".
  3. Else candidates all of one size give that size ("one of ...: same size").
  Otherwise (several candidates of different sizes, a transform between compute kernels, an op without a
  compute kernel, an im2col that writes a buffer larger than its input) the bytes are unknown with the reason.
  Several transforms are never matched to several tensors by ranking sizes against durations.
- Split-K reduction (`splitKreduce_kernel`...): reads `splits` partial results (fp32 workspace, or the output's
  dtype when wider) and writes the output: splits x numel x partial itemsize + numel x output itemsize. cuBLAS
  puts the slices of K on the GEMM kernel's grid z, so for a GEMM op (mm, addmm, bmm, linear, matmul...) with
  one compute kernel and a `splitKreduce` reduction, `splits` = grid z / batch when z is a multiple >= 2 of its
  batch (seen from 2 to 216 on V100/A100 traces, the largest for K = 327680). Otherwise (GEMV `reduce_1Block`...)
  a lower bound with 2 partial results (a reduction of fewer is none), and the reason says "lower bound:".
- Bias / epilogue kernels: a copy kernel of a GEMM with a bias (cuBLAS's beta = 1 path: the bias broadcast into
  the output before the GEMM) reads the bias and writes the output; any other epilogue (scaling, bias add, cast)
  reads and writes the output, plus the bias vector when the op has one. cuDNN's `compute*Offsets` kernels build
  index tables whose size the trace does not give: unknown. MIOpen's `SubTensorOpWithScalar*` (SetTensor: zeroing
  before an accumulating kernel) writes the output once without reading it. cuDNN's `scalePackedTensor` scales a convolution
  gradient by beta before accumulating into it; PyTorch always passes beta = 0, which by the BLAS convention
  writes zeros without reading: one write of the gradient (a read + write would put the V100 ResNet-50 calls at
  1.6x DRAM peak on tensors far larger than L2). When the gradient's size is not recorded (pre-2022 traces have
  no Concrete Inputs), the kernel's launch gives it (one thread per element: grid x block threads), accepted only
  as a multiple of N x C_in x grad_output's spatial size (true on every call of that trace, stride 1 and 2):
  "inferred from its launch".
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...estimate.bytes import (CONV_FORWARD_OPS, GEMM_OPERANDS, OpArgs, UnknownEstimate, conv_geometry,
                              conv_output_shape, gemm_output_shape, op_key)
from ...estimate.dtypes import itemsize
from ...estimate.flops import freeze
from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from .roles import EPILOGUE, LAYOUT, ROLES, SPLITK, helper_bytes_reason

_CUDNN_TRANSPOSE = re.compile(r"nchwToNhwc|nhwcToNchw", re.I)
_IM2COL = re.compile(r"im2col|col2im|im[23]d2col|col2im[23]d", re.I)  # MIOpen: Im2d2Col, Col2Im3d...
_FILL = re.compile(r"SubTensorOpWithScalar", re.I)  # MIOpen SetTensor: fills a tensor with a scalar (zeroing)
_OFFSETS = re.compile(r"compute\w*Offsets", re.I)
_COPY = re.compile(r"copy", re.I)
_SPLITK_REDUCE = re.compile(r"splitKreduce", re.I)  # cuBLAS GEMM split-K: the slices of K on the GEMM's grid z
_PER_ELEMENT = re.compile(r"scalePackedTensor", re.I)  # one thread per element of the tensor it scales
_BATCHED_GEMMS = frozenset({"bmm", "baddbmm"})
_BIAS_ARG = {"addmm": 0, "_addmm_activation": 0, "baddbmm": 0, "addbmm": 0, "linear": 2}
_CONV_GRADS = {  # op -> (grad label, its size argument, inputs read (label, arg))
    "cudnn_convolution_backward_input": ("grad_input dX", 0, (("grad_output dY", 1), ("weight W", 2))),
    "cudnn_convolution_backward_weight": ("grad_weight dW", 0, (("grad_output dY", 1), ("input X", 2))),
}
PARTIAL_ITEMSIZE = 4  # cuBLAS / cuDNN split-K workspaces hold fp32 partial sums


@dataclass(frozen=True)
class Tensor:
    """One tensor of an op: what it is, its shape and item size."""
    label: str
    shape: Tuple[int, ...]
    itemsize: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize


@dataclass(frozen=True)
class OpTensors:
    """The tensors a helper of an op may move: its inputs, its output and bias (None when unknown)."""
    inputs: Tuple[Tensor, ...]
    output: Optional[Tensor]
    bias: Optional[Tensor]
    batch: int = 0  # GEMM batch count (a cuBLAS grid z = batch x splits); 0 for other ops


@dataclass(frozen=True)
class HelperLaunch:
    """One helper kernel in its op: role, name, launch grid, and where it runs relative to the compute kernels
    ("before", "after", "between", or "" when the op has none); `compute_grid` when the op has one compute kernel."""
    role: str
    name: str
    grid: Tuple[int, ...]
    position: str
    compute_grid: Tuple[int, ...] = ()
    threads: int = 0  # grid x block


@functools.lru_cache(maxsize=4096)
def op_tensors(name: str, dims: Any, types: Any, concrete: Any) -> OpTensors:
    """The op's input tensors (labelled), its output and bias where its shapes determine them (frozen args)."""
    op, args = op_key(name), OpArgs(dims, types, concrete)
    out_size = args.compute_itemsize() or 4
    if op in CONV_FORWARD_OPS:
        inputs = _labelled(args, (("input X", 0), ("weight W", 1)))
        return OpTensors(inputs, _safe(lambda: Tensor("output Y", conv_output_shape(
            op, args, conv_geometry(op, args)), out_size)), None)
    if op in _CONV_GRADS:
        label, size_arg, reads = _CONV_GRADS[op]
        size = args.opt_value(size_arg)
        out = Tensor(label, tuple(size), out_size) if _is_shape(size) else None
        return OpTensors(_labelled(args, reads), out, None)
    if op in GEMM_OPERANDS or op in ("linear", "matmul"):
        a, b = GEMM_OPERANDS[op][0] if op in GEMM_OPERANDS else (0, 1)
        operands = _labelled(args, (("operand A", a), ("operand B", b)))
        out = _safe(lambda: Tensor("output", gemm_output_shape(op, args), out_size))
        bias = _labelled(args, (("bias", _BIAS_ARG[op]),)) if op in _BIAS_ARG else ()
        batched = op in _BATCHED_GEMMS or (op == "matmul" and all(len(t.shape) >= 3 for t in operands))
        batch = math.prod(out.shape[:-2]) if out is not None and batched else 1
        return OpTensors(operands, out, bias[0] if bias else None, batch)
    inputs = _labelled(args, tuple((f"input {i}", i) for i in range(len(args))))
    return OpTensors(inputs, None, None)


def _labelled(args: OpArgs, wanted: Tuple[Tuple[str, int], ...]) -> Tuple[Tensor, ...]:
    out = []
    for label, i in wanted:
        shape, size = args.opt_shape(i), itemsize(args.type_at(i))
        if shape is not None and size:
            out.append(Tensor(label, shape, size))
    return tuple(out)


def _safe(make) -> Any:
    try:
        return make()
    except UnknownEstimate:
        return None


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)


def helper_bytes(launch: HelperLaunch, tensors: OpTensors) -> Tuple[Optional[float], str]:
    """(bytes, provenance) of one helper kernel; bytes None with the reason when the trace does not say."""
    if launch.role == LAYOUT:
        return _layout_bytes(launch, tensors)
    if launch.role == SPLITK:
        return _splitk_bytes(launch, tensors)
    if launch.role == EPILOGUE:
        return _epilogue_bytes(launch, tensors)
    return None, helper_bytes_reason(launch.role)


def _layout_bytes(launch: HelperLaunch, tensors: OpTensors) -> Tuple[Optional[float], str]:
    if _IM2COL.search(launch.name):
        return None, "im2col/col2im: writes an expanded buffer whose size (cuDNN's batching) is not in the trace"
    if launch.position == "before":
        candidates = tensors.inputs
    elif launch.position == "after":
        candidates = (tensors.output,) if tensors.output is not None else ()
    else:
        return None, ("layout transform between the op's compute kernels: the tensor it converts is not in the trace"
                      if launch.position == "between" else "layout transform of an op without a compute kernel: "
                      "the tensor it converts is not in the trace")
    what = "input" if launch.position == "before" else "output"
    if _CUDNN_TRANSPOSE.search(launch.name):
        by_grid = [t for t in candidates if cudnn_transpose_grid(t.shape) == launch.grid]
        if len(by_grid) == 1:
            return 2.0 * by_grid[0].nbytes, f"layout transform of {by_grid[0].label}: read + write (matched by " \
                                            f"its launch grid)"
    if len(candidates) == 1:
        return 2.0 * candidates[0].nbytes, f"layout transform of {candidates[0].label}: read + write " \
                                           f"(inferred from order: it runs {launch.position} the compute kernel)"
    if candidates and len({t.nbytes for t in candidates}) == 1:
        labels = " / ".join(t.label for t in candidates)
        return 2.0 * candidates[0].nbytes, f"layout transform of one of {labels} (same size): read + write"
    if not candidates:
        return None, f"layout transform of the op's {what}: its shape is not in the trace"
    return None, (f"layout transform of one of the op's {len(candidates)} {what}s of different sizes "
                  f"({', '.join(t.label for t in candidates)}): the trace does not say which")


def cudnn_transpose_grid(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """Launch grid of cuDNN's nchwToNhwc / nhwcToNchw for an [N, C, *spatial] tensor: 32 x 32 tiles of
    (spatial, channel) per image."""
    if len(shape) < 3:
        return ()
    spatial = math.prod(shape[2:])
    return (-(-spatial // 32), -(-shape[1] // 32), shape[0])


def _splitk_bytes(launch: HelperLaunch, tensors: OpTensors) -> Tuple[Optional[float], str]:
    out = tensors.output
    if out is None:
        return None, helper_bytes_reason(SPLITK) + " and the op's output shape is not known"
    numel = math.prod(out.shape)
    partial = max(PARTIAL_ITEMSIZE, out.itemsize)
    z = launch.compute_grid[2] if len(launch.compute_grid) == 3 and _SPLITK_REDUCE.search(launch.name) else 0
    splits = z // tensors.batch if z and tensors.batch and z % tensors.batch == 0 else 0
    if splits >= 2:
        return float(splits * numel * partial + out.nbytes), \
            f"split-K reduction: reads {splits} partial {out.label}s ({partial}-byte), writes the {out.label} " \
            f"(split count from the GEMM kernel's grid z)"
    return float(2 * numel * partial + out.nbytes), \
        f"lower bound: split-K reduction of at least 2 partial {out.label}s ({partial}-byte) into the " \
        f"{out.label}; the split count is not in the trace"


def _epilogue_bytes(launch: HelperLaunch, tensors: OpTensors) -> Tuple[Optional[float], str]:
    if _OFFSETS.search(launch.name):
        return None, "offset-table kernel of a cuDNN call: its size is not in the trace"
    out, bias = tensors.output, tensors.bias
    if _PER_ELEMENT.search(launch.name):
        return _zeroed_gradient_bytes(launch, tensors)
    if out is None:
        return None, helper_bytes_reason(EPILOGUE)
    if _FILL.search(launch.name):
        return float(out.nbytes), f"fill of the {out.label} with a scalar (MIOpen SetTensor): written, not read"
    if bias is not None and _COPY.search(launch.name) and launch.position != "after":
        return float(bias.nbytes + out.nbytes), f"bias broadcast into the {out.label}: bias read + {out.label} written"
    extra = bias.nbytes if bias is not None else 0
    with_bias = " + bias read" if bias is not None else ""
    return float(2 * out.nbytes + extra), f"epilogue on the {out.label}: read + write{with_bias}"


def _zeroed_gradient_bytes(launch: HelperLaunch, tensors: OpTensors) -> Tuple[Optional[float], str]:
    """cuDNN's beta = 0 scaling of a convolution gradient: one write of it (its size recorded, else its thread
    count when that is consistent with the op's shapes)."""
    if tensors.output is not None:
        return float(tensors.output.nbytes), f"zeroing of {tensors.output.label} (beta = 0): written, not read"
    by_label = {t.label: t for t in tensors.inputs}
    dy, w = by_label.get("grad_output dY"), by_label.get("weight W")
    if dy is None or w is None or len(dy.shape) < 3 or not launch.threads:
        return None, helper_bytes_reason(EPILOGUE)
    unit = dy.shape[0] * w.shape[1] * math.prod(dy.shape[2:])  # N x C_in x output spatial
    if launch.threads % unit:
        return None, helper_bytes_reason(EPILOGUE)
    return float(launch.threads * dy.itemsize), \
        "zeroing of grad_input dX (beta = 0): written, not read (its size inferred from its launch: one thread " \
        "per element)"


# ------------------------------------------------------------------------------------------ activity table

@functools.lru_cache(maxsize=4096)
def parse_grid(text: str) -> Tuple[int, ...]:
    """A launch grid as the trace records it (JSON list text) -> tuple of ints (() when absent or malformed)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return ()
    return tuple(int(v) for v in value) if isinstance(value, list) and all(
        isinstance(v, int) for v in value) else ()


def helper_rows_bytes(acts: Table, op: np.ndarray, role: np.ndarray, helper: np.ndarray,
                      trace: KinetoTrace) -> Tuple[np.ndarray, Dict[int, str]]:
    """Bytes (NaN when unknown) of every helper row with a tensor rule, and per such row its provenance or reason.

    `op`: launching op per activity (-1: none), `role`: role codes, `helper`: helper rows of an estimated op."""
    nbytes = np.full(len(op), np.nan)
    notes: Dict[int, str] = {}
    ruled = helper & np.isin(role, [ROLES.index(r) for r in (LAYOUT, SPLITK, EPILOGUE)])
    if not ruled.any():
        return nbytes, notes
    compute = (op >= 0) & (role == ROLES.index("compute"))
    spans = _compute_spans(op[compute], acts["ts"][compute], np.flatnonzero(compute))
    names, grids, blocks = acts.strings["name"], acts.strings.get("grid", []), acts.strings.get("block", [])
    by_op: Dict[Tuple[int, int], OpTensors] = {}
    ops = trace.ops
    for row in np.flatnonzero(ruled).tolist():
        o = int(op[row])
        first, last, rows = spans.get(o, (None, None, []))
        ts = acts["ts"][row]
        position = "" if first is None else "before" if ts < first else "after" if ts > last else "between"
        compute_grid = _grid(grids, acts["grid"][rows[0]]) if len(rows) == 1 else ()
        grid = _grid(grids, acts["grid"][row])
        threads = math.prod(grid) * math.prod(_grid(blocks, acts["block"][row])) if grid else 0
        launch = HelperLaunch(ROLES[role[row]], names[acts["name"][row]], grid, position, compute_grid, threads)
        key = (int(ops["name"][o]), int(ops["shape"][o]))  # distinct ops are few: estimate each once
        tensors = by_op.get(key)
        if tensors is None:
            tensors = by_op[key] = _op_tensors_of(trace, o)
        value, note = helper_bytes(launch, tensors)
        nbytes[row] = np.nan if value is None else value
        notes[row] = note
    return nbytes, notes


def _op_tensors_of(trace: KinetoTrace, op: int) -> OpTensors:
    ops = trace.ops
    code = int(ops["shape"][op])
    if code < 0:
        return OpTensors((), None, None)
    return op_tensors(ops.strings["name"][ops["name"][op]], *(freeze(x) for x in trace.shape(code)))


def _compute_spans(op: np.ndarray, ts: np.ndarray, rows: np.ndarray) -> Dict[int, Tuple[float, float, List[int]]]:
    spans: Dict[int, Tuple[float, float, List[int]]] = {}
    for o, t, r in zip(op.tolist(), ts.tolist(), rows.tolist()):
        first, last, mine = spans.get(o, (t, t, []))
        mine.append(r)
        spans[o] = (min(first, t), max(last, t), mine)
    return spans


def _grid(grids: List[str], code: int) -> Tuple[int, ...]:
    return parse_grid(grids[code]) if 0 <= code < len(grids) else ()


__all__ = ["Tensor", "OpTensors", "HelperLaunch", "op_tensors", "helper_bytes", "helper_rows_bytes",
           "cudnn_transpose_grid", "parse_grid", "PARTIAL_ITEMSIZE"]
