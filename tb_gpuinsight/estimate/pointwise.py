"""Per-element FLOP counts for elementwise, activation, reduction, softmax and normalisation ops.

These ops are memory-bound by orders of magnitude; their FLOPs are small but known, and a count
places them on the roofline (far left of the ridge) instead of leaving them "unknown". The counts
follow the convention of AMD's TraceLens (about 1 FLOP per element for elementwise, activation and
reduction ops, about 5 per element for norms and softmax) rather than a per-instruction model: an
activation such as GELU costs more instructions, but being a few times off changes nothing about
where a memory-bound op sits, and the convention keeps the figures comparable with that peer.

Only floating-point work counts: on integer or bool tensors these ops have no FLOPs (unknown, with
that reason), as they have no floating-point peak to be rated against.

Every entry is data: (FLOPs per element, which elements are counted, why). "output" counts the
broadcast shape of the tensor arguments (the elements written); "input" counts the first tensor
argument (the elements read: reductions and row-wise norms read every element once).

Pure data movement gets no entry and so no FLOPs: copies, casts (``copy_``, ``to``, ``_to_copy``,
``clone``, ``contiguous``), ``cat``/``stack``, views, indexing/gather/scatter, embedding, fills,
``where``/``masked_fill`` selections and nearest-neighbour upsampling.
"""
from __future__ import annotations

from .bytes import OpArgs, UnknownEstimate, broadcast_shapes, numel
from .dtypes import is_floating_type

_ARITH = "1 FLOP per output element (one arithmetic operation)"
_UNARY = "1 FLOP per output element (one math-library call, TraceLens convention)"
_ACT = "1 FLOP per output element (activation, TraceLens convention)"
_ACT_BWD = "1 FLOP per output element (activation gradient, TraceLens convention)"
_CMP = "1 FLOP per output element (one comparison)"
_FMA = "2 FLOPs per output element (a multiply and an add)"
_RED = "1 FLOP per input element (each element is accumulated once)"
_NORM = "5 FLOPs per input element (mean, variance, normalise, scale, shift; TraceLens convention)"
_SOFTMAX = "5 FLOPs per input element (max, subtract, exp, sum, divide)"

POINTWISE_FLOPS: dict[str, tuple[float, str, str]] = {}


def _register(ops: str, per_element: float, basis: str, reason: str) -> None:
    for op in ops.split():
        POINTWISE_FLOPS[op] = (per_element, basis, reason)


_register("add add_ sub sub_ rsub mul mul_ div div_ true_divide floor_divide remainder fmod "
          "maximum minimum fmax fmin pow pow_ square neg neg_ abs abs_ sign reciprocal reciprocal_ "
          "clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ hypot atan2 copysign", 1, "output", _ARITH)
_register("exp exp_ exp2 expm1 log log_ log2 log10 log1p sqrt sqrt_ rsqrt rsqrt_ sin sin_ cos cos_ tan "
          "tanh tanh_ sinh cosh asin acos atan erf erfc erfinv sigmoid sigmoid_ logit floor ceil round "
          "trunc frac", 1, "output", _UNARY)
_register("relu relu_ relu6 gelu gelu_ silu silu_ mish mish_ hardswish hardswish_ hardsigmoid "
          "hardsigmoid_ hardtanh hardtanh_ leaky_relu leaky_relu_ elu elu_ selu celu softplus "
          "softshrink hardshrink log_sigmoid_forward glu prelu _prelu_kernel threshold threshold_",
          1, "output", _ACT)
_register("threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
          "hardswish_backward hardsigmoid_backward leaky_relu_backward elu_backward mish_backward "
          "softplus_backward glu_backward log_sigmoid_backward", 1, "output", _ACT_BWD)
_register("eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ isnan isinf isfinite logical_not logical_and "
          "logical_or logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not", 1, "output", _CMP)
_register("addcmul addcmul_ addcdiv addcdiv_ lerp lerp_", 2, "output", _FMA)
_register("sum mean amax amin max min prod nansum nanmean norm linalg_vector_norm var std var_mean "
          "std_mean logsumexp argmax argmin cumsum cumprod aminmax", 1, "input", _RED)
_register("_softmax softmax _log_softmax log_softmax _softmax_backward_data "
          "_log_softmax_backward_data _safe_softmax", 5, "input", _SOFTMAX)
_register("layer_norm native_layer_norm native_layer_norm_backward group_norm native_group_norm "
          "native_group_norm_backward batch_norm native_batch_norm native_batch_norm_backward "
          "_batch_norm_impl_index _batch_norm_impl_index_backward cudnn_batch_norm "
          "cudnn_batch_norm_backward miopen_batch_norm miopen_batch_norm_backward "
          "_native_batch_norm_legit _native_batch_norm_legit_no_training "
          "_native_batch_norm_legit_functional instance_norm rms_norm _fused_rms_norm "
          "_fused_rms_norm_backward", 5, "input", _NORM)


def estimate(op: str, args: OpArgs) -> tuple[float, str]:
    """(FLOPs, "") for a registered op; raises UnknownEstimate when its tensors are not recorded."""
    per_element, basis, _ = POINTWISE_FLOPS[op]
    shapes = [shape for _, shape, _ in args.tensor_items()]
    if not shapes:
        raise UnknownEstimate("no tensor inputs recorded")
    dtype = args.compute_dtype()
    if dtype is not None and not is_floating_type(dtype):
        raise UnknownEstimate(f"no floating-point work: {op} on {dtype} tensors")
    if basis == "input":
        return per_element * numel(shapes[0]), ""
    out = broadcast_shapes(*shapes)
    if out is None:  # e.g. an index tensor beside the data: the largest operand is the output
        out = max(shapes, key=numel)
    return per_element * numel(out), ""
