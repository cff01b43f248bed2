"""Normalisation: aten's layer / batch / group / RMS norms (forward and backward) and the fused norms of vLLM,
SGLang, aiter and apex.

FLOPs: 5 per input element for layer / batch / group norms (mean, variance, normalise, scale, shift; the house
convention of :mod:`.pointwise`), 4 for RMS norms (square, sum, scale by the reciprocal RMS, scale by the weight),
5 for a fused residual add + RMS norm. Bytes: the activation read and the result written in the activation's own
dtype (a bf16 gradient stays bf16 beside fp32 statistics), plus every smaller tensor (weights, statistics) read;
in-place fused forms (``fused_add_rms_norm``: the input and the residual both read and written) count both ways.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel, read_bytes
from .pointwise import POINTWISE_FLOPS, estimate as pointwise_estimate
from .registry import register

ATEN_NORMS = tuple(op for op, (per, basis, _) in POINTWISE_FLOPS.items() if per in (4, 5) and "norm" in op)


def _main(tensors: list) -> tuple[tuple[int, ...], int]:
    """The activation: the largest tensor argument (its shape and item size)."""
    if not tensors:
        raise UnknownEstimate("no tensor inputs recorded")
    _, shape, size = max(tensors, key=lambda t: numel(t[1]))
    return shape, size


def _norm_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Every argument read once; one activation-sized result written in the activation's dtype."""
    shape, size = _main(tensors)
    return read_bytes(tensors) + numel(shape) * size


def _norm_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    return pointwise_estimate(op, args)[0]


register(ATEN_NORMS, "norms", flops=_norm_flops, bytes=_norm_bytes,
         source="5 FLOPs per element (house convention); activation read, result written in its dtype")


def _custom_rms_flops(per_element: float):
    def flops(op: str, args: OpArgs, out_dims: Any) -> float:
        return per_element * numel(_main(list(args.tensor_items()))[0])
    return flops


def _out_first_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """``rms_norm(out, input, weight, eps)`` (vLLM, SGLang) or ``rms_norm(input, weight, eps) -> out`` (aiter):
    the input read and the output written once either way, the weight read."""
    shape, size = _main(tensors)
    small = sum(numel(s) * b for _, s, b in tensors if s != shape)
    return 2 * numel(shape) * size + small


def _fused_add_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """``fused_add_rms_norm(input!, residual!, weight, eps)``: input and residual read, the normalised input and
    the updated residual written, the weight read."""
    shape, size = _main(tensors)
    big = [b for _, s, b in tensors if s == shape]
    if len(big) < 2:
        raise UnknownEstimate(f"{op}: input and residual not both recorded")
    small = sum(numel(s) * b for _, s, b in tensors if s != shape)
    return 2 * numel(shape) * sum(big[:2]) + small


def _each_once_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Schemas that pass every result as an argument (``add_rmsnorm(out, input, residual_in, residual_out, weight,
    eps)``): each buffer is touched once, the inputs read and the results written."""
    return float(read_bytes(tensors))


def _group_norm_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """aiter ``_groupnorm_run(input, groups, weight, bias, eps) -> y`` or ``_groupnorm_run(y, workspace, input,
    groups, weight, bias, eps)``: x read, y written (an argument or the result), weight and bias read, the per-group
    workspace touched once."""
    shape, size = _main(tensors)
    passed = sum(1 for _, s, _ in tensors if s == shape)
    return float(read_bytes(tensors) + (numel(shape) * size if passed < 2 else 0))


register("*::layer_norm_fwd *::fused_layer_norm", "norms", flops=_custom_rms_flops(5), bytes=_out_first_bytes,
         source="apex / fused layer-norm schemas: input read, output written, weight and bias read")
register("*::rms_norm *::rmsnorm *::rmsnorm2d_fwd *::rmsnorm2d_fwd_ck *::rms_norm_cu *::gemma_rmsnorm "
         "*::fused_rms_norm *::poly_norm", "norms", flops=_custom_rms_flops(4), bytes=_out_first_bytes,
         source="vLLM / SGLang / aiter / apex schemas: input read, output written, weight read")
register("*::fused_add_rms_norm *::fused_add_rmsnorm *::gemma_fused_add_rmsnorm *::rmsnorm2d_fwd_with_add "
         "*::rmsnorm2d_fwd_with_add_ck *::fused_add_rms_norm_cu",
         "norms", flops=_custom_rms_flops(5), bytes=_fused_add_bytes,
         source="vLLM / SGLang schemas: residual add then RMS norm, both tensors updated in place")
register("*::add_rmsnorm", "norms", flops=_custom_rms_flops(5), bytes=_each_once_bytes,
         source="aiter schema add_rmsnorm(out, input, residual_in, residual_out, weight, eps): residual add then RMS "
                "norm, 5 FLOPs per element; input, residual and weight read, out and residual_out written")
register("*::_groupnorm_run *::groupnorm_run", "norms", flops=_custom_rms_flops(5), bytes=_group_norm_bytes,
         source="aiter group norm: 5 FLOPs per element (house convention for norms); x read, y written once")
