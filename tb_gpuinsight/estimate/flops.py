"""FLOP and byte estimates for one Kineto ``cpu_op`` from the shapes it carries.

GEMMs and forward convolutions use torch's own formula registry,
``torch.utils.flop_counter.flop_registry`` (keyed by ``torch.ops.aten.<op>`` overload packets), so
they match what ``FlopCounterMode`` counts for the same op. The formulas are called with shapes, as
``FlopCounterMode`` does after its ``shape_wrapper``: ``formula(*shapes, out_val=out_shape)``.
Small adapters pick the right arguments out of the trace's argument list, because:

* trace ops are often not the op the registry expects with that argument order
  (``cudnn_convolution`` puts padding before stride and has no bias/transposed; fed
  positionally to the registry's conv formula its ``groups`` would land on ``transposed``);
* convolution formulas need the output shape, computed here from stride/padding/dilation
  (``Concrete Inputs``, mid-2024+ traces); without them the FLOPs are unknown;
* composite ops the registry does not cover (``linear``, ``matmul``, ``conv2d``...) are computed
  through the formula of the op they decompose into (linear -> mm with the weight transposed;
  matmul -> mm/bmm by rank).

Where the registry is wrong for what the kernel does, first-principles formulas replace it:

* attention (every SDPA variant, raw flash/efficient/cuDNN kernels): causal and sliding-window
  masks count only the computed (query, key) pairs, backward counts the recomputed ``Q K^T``
  (2.5x the forward), varlen inputs count per sequence: :mod:`.attention`;
* convolution backward: each gradient costs the forward's count; the registry does not divide the
  weight gradient by ``groups`` (:func:`_conv_backward`).

Elementwise, activation, reduction, softmax and normalisation ops get a small documented count per
element (:mod:`.pointwise`) so that they sit on the roofline as memory-bound; pure data movement
(copy, cat, views, casts, indexing) gets no FLOPs.

Policy:

* Every op reports its full FLOPs, children included: ``aten::linear`` and its child
  ``aten::addmm`` report the same number. Attribute FLOPs to kernels through the innermost
  op that launched them (the caller's job) to avoid double counting.
* Ops without a formula (``mv``/``dot``, einsum, custom ops...) are unknown with a reason; their
  bytes still count.
* A known figure that is only a bound (varlen attention, an attention flag not recorded) carries
  a note starting with "upper bound:" in ``flops_reason``; an exact figure carries "".
* ``estimate_op`` never raises and is memoised on its (hashable) arguments: pass tuples, e.g.
  through :func:`freeze`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

from . import attention, pointwise
from .bytes import (
    CONV_FORWARD_OPS, GEMM_OPERANDS, OpArgs, UnknownEstimate, broadcast_shapes, check_arg_count,
    conv_geometry, conv_output_shape, estimate_bytes, op_key,
)


@dataclass(frozen=True)
class OpEstimate:
    """Estimated work of one op; a None number comes with a short reason."""

    flops: float | None
    flops_reason: str
    bytes: float | None
    bytes_reason: str
    dtype: str | None


def freeze(obj: Any) -> Any:
    """Lists (nested) -> tuples, so trace args can key the memo; other values unchanged."""
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(item) for item in obj)
    if isinstance(obj, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in obj.items()))
    return obj


def estimate_op(name: str, dims: tuple | None, types: tuple | None, concrete: tuple | None,
                out_dims: tuple | None = None) -> OpEstimate:
    """FLOPs, bytes and compute dtype of one trace op. Never raises.

    ``dims``/``types``/``concrete`` are the op's ``Input Dims``, ``Input type`` and
    ``Concrete Inputs`` (None when absent). ``out_dims`` is optional: the op's output shape
    when the caller knows it from elsewhere (e.g. a conv's grad_output in its backward op);
    it is used only where the inputs do not determine it.
    """
    try:
        return _estimate_cached(name, dims, types, concrete, out_dims)
    except TypeError:  # unhashable (lists): freeze and retry
        pass
    try:
        return _estimate_cached(freeze(name), freeze(dims), freeze(types), freeze(concrete),
                                freeze(out_dims))
    except Exception as exc:  # e.g. a dict inside dims: still never raise
        reason = f"estimate failed: {type(exc).__name__}"
        return OpEstimate(None, reason, None, reason, None)


@functools.lru_cache(maxsize=65536)
def _estimate_cached(name: Any, dims: Any, types: Any, concrete: Any, out_dims: Any) -> OpEstimate:
    try:
        args = OpArgs(dims, types, concrete)
        flops, flops_reason = _flops(name, args, out_dims)
        nbytes, bytes_reason = estimate_bytes(name, dims, types, concrete, out_dims)
        return OpEstimate(flops, flops_reason, nbytes, bytes_reason, _dtype(args))
    except Exception as exc:  # defensive: the parts below catch their own errors
        reason = f"estimate failed: {type(exc).__name__}: {exc}"[:200]
        return OpEstimate(None, reason, None, reason, None)


def _dtype(args: OpArgs) -> str | None:
    try:
        return args.compute_dtype()
    except Exception:
        return None


def _flops(name: Any, args: OpArgs, out_dims: Any) -> tuple[float | None, str]:
    """(FLOPs, "") or (None, reason); a known figure that is only a bound carries a note instead of ""."""
    op = op_key(name)
    adapter = _ADAPTERS.get(op) if isinstance(name, str) and name.startswith("aten::") else None
    if adapter is None:
        return None, _no_formula_reason(name, op)
    if not args.dims:
        return None, "no input shapes recorded"
    try:
        check_arg_count(op, args)
        result = adapter(op, args, out_dims)
        value, note = result if isinstance(result, tuple) else (result, "")
        value = float(value)
    except UnknownEstimate as exc:
        return None, str(exc)
    except AssertionError as exc:  # torch's formulas assert on inconsistent shapes
        return None, f"inconsistent shapes (corrupted record?): {exc}"[:200]
    except Exception as exc:  # e.g. a shape too large for a float
        return None, f"FLOP formula failed: {type(exc).__name__}: {exc}"[:200]
    if not math.isfinite(value) or value < 0:
        return None, f"FLOP formula returned {value!r}"
    return value, note


def _no_formula_reason(name: Any, op: str) -> str:
    # Deliberately not a registry lookup: importing torch only to word a reason would cost every trace ~1 s.
    label = name if isinstance(name, str) and name else "<unnamed op>"
    return f"no FLOP formula for {label}"[:200]


# --------------------------------------------------------------------------- registry access

@functools.lru_cache(maxsize=1)
def _registry() -> dict | None:
    """torch's flop_registry, or None when torch is not installed."""
    try:
        from torch.utils.flop_counter import flop_registry
    except Exception:
        return None
    return flop_registry


def torch_available() -> bool:
    """Whether torch's FLOP formulas can be used here (without torch every FLOP count is unknown)."""
    return _registry() is not None


def _packet(op: str) -> Any:
    try:
        import torch
        return getattr(torch.ops.aten, op)
    except Exception:
        return None


@functools.lru_cache(maxsize=128)
def _formula(op: str) -> Callable[..., int]:
    """The registered formula for ``torch.ops.aten.<op>``; raises UnknownEstimate if none."""
    registry = _registry()
    if registry is None:
        raise UnknownEstimate("torch is not installed (FLOP formulas come from torch.utils.flop_counter)")
    formula = registry.get(_packet(op))
    if formula is None:
        raise UnknownEstimate(f"torch {_torch_version()} has no FLOP formula for aten::{op}")
    return formula


def _torch_version() -> str:
    try:
        import torch
        return torch.__version__
    except Exception:
        return "?"


# --------------------------------------------------------------------------- GEMM adapters

def _gemm(op: str, args: OpArgs, out_dims: Any) -> int:
    """mm/addmm/bmm/baddbmm/_scaled_mm, and ops that decompose into them."""
    (ia, ib), _ = GEMM_OPERANDS[op]
    a, b = args.shape(ia, "first matrix"), args.shape(ib, "second matrix")
    if op in ("mm", "_int_mm"):
        return _formula("mm")(a, b)
    if op in ("addmm", "_addmm_activation"):
        return _formula("addmm")(args.opt_shape(0) or (), a, b)
    if op == "bmm":
        return _formula("bmm")(a, b)
    if op in ("baddbmm", "addbmm"):  # addbmm = bmm then a sum over the batch
        return _formula("baddbmm")(args.opt_shape(0) or (), a, b)
    scales = (args.opt_shape(2) or (), args.opt_shape(3) or ())
    return _formula("_scaled_mm")(a, b, *scales)


def _linear(op: str, args: OpArgs, out_dims: Any) -> int:
    """linear(x[..., K], W[N, K]) = mm(x folded to [M, K], W^T [K, N])."""
    x, w = args.shape(0, "linear input"), args.shape(1, "linear weight")
    if len(w) != 2:
        raise UnknownEstimate("linear with a 1-D weight is a matrix-vector product (no registry formula)")
    m = math.prod(x[:-1]) if len(x) > 1 else 1
    return _formula("mm")((m, x[-1]), (w[1], w[0]))


def _matmul(op: str, args: OpArgs, out_dims: Any) -> int:
    """torch.matmul's dispatch by rank: mm for <=2-D (and folded N-D @ 2-D), else bmm."""
    a, b = args.shape(0, "matmul self"), args.shape(1, "matmul other")
    if len(a) == 2 and len(b) == 2:
        return _formula("mm")(a, b)
    if len(a) == 1 and len(b) == 2:
        return _formula("mm")((1,) + a, b)
    if len(a) < 2 or len(b) < 2:
        raise UnknownEstimate("matmul with a vector operand runs mv/dot (no registry formula)")
    batch = broadcast_shapes(a[:-2], b[:-2])
    if batch is None:
        raise UnknownEstimate(f"matmul batch dims of {a} and {b} do not broadcast")
    if len(b) == 2:  # folded into one mm
        return _formula("mm")((math.prod(a[:-1]), a[-1]), b)
    n = math.prod(batch)
    return _formula("bmm")((n,) + a[-2:], (n,) + b[-2:])


# --------------------------------------------------------------------------- conv adapters

def _conv(op: str, args: OpArgs, out_dims: Any) -> int:
    """Every forward convolution through the registry's aten.convolution formula."""
    geo = conv_geometry(op, args)
    try:
        out = conv_output_shape(op, args, geo)
    except UnknownEstimate as exc:
        out = _given_output(out_dims, geo.unbatched)
        if out is None:
            if not geo.transposed:
                raise UnknownEstimate(f"conv output shape unknown: {exc}") from None
            out = geo.x  # the transposed formula reads only input and weight
    return _formula("convolution")(geo.x, geo.w, None, None, None, None, geo.transposed,
                                   out_val=out)


def _given_output(out_dims: Any, unbatched: bool) -> tuple[int, ...] | None:
    if not isinstance(out_dims, tuple) or not all(isinstance(d, int) for d in out_dims):
        return None
    return (1,) + out_dims if unbatched else out_dims


def _conv_backward(op: str, args: OpArgs, out_dims: Any) -> int:
    """aten.convolution_backward and its 2021 cuDNN forms, from first principles.

    Each computed gradient (grad_input, grad_weight; ``output_mask``) costs as much as the forward:
    ``2 x N x Cout x prod(out spatial) x (Cin / groups) x prod(kernel)``, i.e. 2 x numel(grad_output)
    x numel(weight[1:]) (the weight's dim 1 already is Cin / groups); for a transposed conv the roles of
    input and output swap. torch.utils.flop_counter's registry does not divide the weight gradient by
    ``groups`` (it counts ``groups`` times too much for grouped and depthwise convs), so it is not used
    here. The bias gradient (a reduction of grad_output) is not counted.
    """
    if op == "convolution_backward":
        grad_out, x, w = (args.shape(i, n) for i, n in ((0, "grad_output"), (1, "input"), (2, "weight")))
        transposed = args.flag(7, "conv 'transposed' flag")
        mask = _mask(args.value(10, "convolution_backward output_mask"))
    elif op == "cudnn_convolution_backward":
        x, grad_out, w = (args.shape(i, n) for i, n in ((0, "input"), (1, "grad_output"), (2, "weight")))
        transposed, mask = False, _mask(args.value(10, "cudnn_convolution_backward output_mask"))
    elif op == "cudnn_convolution_backward_input":
        grad_out, w = args.shape(1, "grad_output"), args.shape(2, "weight")
        x, transposed, mask = grad_out, False, (True, False, False)  # x is not read when not transposed
    else:  # cudnn_convolution_backward_weight(weight_size, grad_output, self, ...)
        grad_out, x = args.shape(1, "grad_output"), args.shape(2, "input")
        w = _weight_size(args, out_dims)
        transposed, mask = False, (False, True, False)
    return conv_gradient_flops(grad_out, x, w, transposed) * (int(mask[0]) + int(mask[1]))


def conv_gradient_flops(grad_out: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...],
                        transposed: bool) -> int:
    """FLOPs of one convolution gradient (input or weight): the forward's count."""
    if len(w) < 3:
        raise UnknownEstimate(f"conv weight shape {w} has no spatial dims")
    small = x if transposed else grad_out  # the side the weight's dim 0 channels live on
    return 2 * math.prod(small) * math.prod(w[1:])


def _mask(value: Any) -> tuple[bool, bool, bool]:
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise UnknownEstimate(f"output_mask not understood: {value!r}")
    flags = [bool(v) for v in value] + [False]
    return flags[0], flags[1], flags[2]


def _weight_size(args: OpArgs, out_dims: Any) -> tuple[int, ...]:
    value = args.opt_value(0)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(out_dims, tuple) and out_dims and all(isinstance(d, int) for d in out_dims):
        return out_dims
    raise UnknownEstimate("weight size not recorded (trace has no Concrete Inputs)")


# --------------------------------------------------------------------------- attention adapter

def _attention(op: str, args: OpArgs, out_dims: Any) -> tuple[int, str]:
    """Fused attention (SDPA variants and the raw flash/efficient/cuDNN kernels): attention.py."""
    return attention.estimate(op, args)


# --------------------------------------------------------------------------- pointwise adapter

def _pointwise(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    """Elementwise, activation, reduction, softmax and norm ops: a documented count per element."""
    return pointwise.estimate(op, args)


# --------------------------------------------------------------------------- adapter table

_Adapter = Callable[[str, OpArgs, Any], int]
_ADAPTERS: dict[str, _Adapter] = {op: _gemm for op in GEMM_OPERANDS}
_ADAPTERS.update({"linear": _linear, "matmul": _matmul})
_ADAPTERS.update({op: _conv for op in CONV_FORWARD_OPS})
_ADAPTERS.update({op: _conv_backward for op in (
    "convolution_backward", "cudnn_convolution_backward", "cudnn_convolution_backward_input",
    "cudnn_convolution_backward_weight")})
_ADAPTERS.update({op: _attention for op in attention.SPECS})
_ADAPTERS.update({op: _pointwise for op in pointwise.POINTWISE_FLOPS})

COVERED_OPS: tuple[str, ...] = tuple(sorted(f"aten::{op}" for op in _ADAPTERS))
"""Trace op names with a FLOP estimate (when their shapes and needed scalars are recorded)."""


# --------------------------------------------------------------------------- inductor

def flops_from_inductor(args: Any) -> float | None:
    """FLOPs from an Inductor kernel's ``kernel_flop`` arg (a number or numeric string)."""
    if not isinstance(args, dict):
        return None
    value = args.get("kernel_flop")
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None
