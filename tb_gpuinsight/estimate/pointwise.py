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

from typing import Any

from .args import OpArgs, UnknownEstimate, broadcast_shapes, numel, read_bytes
from .dtypes import is_floating_type
from .registry import register

_ARITH = "1 FLOP per output element (one arithmetic operation)"
_UNARY = "1 FLOP per output element (one math-library call, TraceLens convention)"
_ACT = "1 FLOP per output element (activation, TraceLens convention)"
_ACT_BWD = "1 FLOP per output element (activation gradient, TraceLens convention)"
_CMP = "1 FLOP per output element (one comparison)"
_FMA = "2 FLOPs per output element (a multiply and an add)"
_RED = "1 FLOP per input element (each element is accumulated once)"
_NORM = "5 FLOPs per input element (mean, variance, normalise, scale, shift; TraceLens convention)"
_SOFTMAX = "5 FLOPs per input element (max, subtract, exp, sum, divide)"
_RMS = "4 FLOPs per input element (square, sum, scale by the row's reciprocal RMS, scale by the weight)"

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
          "_native_batch_norm_legit_functional instance_norm _fused_rms_norm_backward", 5, "input", _NORM)
_register("rms_norm _fused_rms_norm", 4, "input", _RMS)


def estimate(op: str, args: OpArgs) -> tuple[float, str]:
    """(FLOPs, "") for a registered op; raises UnknownEstimate when its tensors are not recorded."""
    per_element, basis, _ = POINTWISE_FLOPS[op]
    shapes = [shape for _, shape, _ in args.tensor_items()]
    if not shapes:
        raise UnknownEstimate("no tensor inputs recorded")
    dtype = args.compute_dtype()
    if dtype is not None and not is_floating_type(dtype):
        return 0.0, ""  # integer or bool work: no floating-point operations, rated on its bytes
    if basis == "input":
        return per_element * numel(shapes[0]), ""
    out = broadcast_shapes(*shapes)
    if out is None:  # e.g. an index tensor beside the data: the largest operand is the output
        out = max(shapes, key=numel)
    return per_element * numel(out), ""


# Reductions read every input element; the output is far smaller than the input and is not counted.
REDUCTION_OPS = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "aminmax", "prod", "norm", "linalg_vector_norm",
    "var", "std", "var_mean", "std_mean", "argmax", "argmin", "all", "any", "logsumexp",
    "count_nonzero", "nansum", "nanmean", "mse_loss", "l1_loss", "nll_loss", "nll_loss_forward",
    "nll_loss2d_forward", "cross_entropy_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div", "topk",
    "_foreach_norm", "dot", "vdot", "equal",
})


def _reduction_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    return float(read_bytes(tensors))


def _flops(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    return estimate(op, args)


_SOURCE = "a documented count per element (TraceLens convention); bytes: inputs read, result written"
for _op, (_per, _basis, _why) in POINTWISE_FLOPS.items():
    if not (_per in (4, 5) and "norm" in _op):  # norms: see norms.py
        register(_op, "pointwise", flops=_flops, bytes=_reduction_bytes if _op in REDUCTION_OPS else None,
                 source=_SOURCE)
_SELECTION = {"topk"}  # comparisons, no arithmetic: movement.py
register(sorted(REDUCTION_OPS - set(POINTWISE_FLOPS) - _SELECTION), "pointwise", bytes=_reduction_bytes,
         source="inputs read; no FLOP formula")


# --------------------------------------------------------------------------- fused activations and rotary

# FLOPs per output element of the fused gated activations, counted from their definitions (exp, erf and tanh one
# each), then one multiply by the up half: silu(g) = g / (1 + exp(-g)) is neg, exp, add, divide (4); gelu(g) =
# 0.5 g (1 + erf(g / sqrt 2)) is scale, erf, add, multiply, halve (5); the tanh form 0.5 g (1 + tanh(c (g +
# 0.044715 g^3))) is two multiplies for g^3, scale, add, scale, tanh, add, multiply, halve (9); quick gelu
# g / (1 + exp(-1.702 g)) is 5; FATReLU (g > t ? g : 0) one compare; gpt-oss' swiglu clamps g (1) and u (2), then
# g / (1 + exp(-alpha g)) (5) and (u + 1) (1) before the multiply.
GATED_FLOPS = {"silu_and_mul": 5, "mul_and_silu": 5, "gelu_and_mul": 6, "gelu_tanh_and_mul": 10,
               "gelu_quick_and_mul": 6, "fatrelu_and_mul": 2, "swigluoai_and_mul": 10}


def _gated_flops(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    """``silu_and_mul(out, x[..., 2d])``: the activation of the gate half and a multiply per output element (the
    output is ``d`` per row: half the gate-and-up input)."""
    per = GATED_FLOPS[op.rsplit("::", 1)[-1]]
    return per * (_largest(args) // 2), ""


def _gated_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """The gate-and-up input read once, the half-width result written once (an ``out`` argument is that write)."""
    _, x, size = max(tensors, key=lambda t: numel(t[1]))
    return numel(x) * size + numel(x) // 2 * size


def _largest(args: OpArgs) -> int:
    sizes = [numel(s) for _, s, _ in args.tensor_items()]
    if not sizes:
        raise UnknownEstimate("no tensor inputs recorded")
    return max(sizes)


register([f"*::{name}" for name in GATED_FLOPS], "pointwise", flops=_gated_flops, bytes=_gated_bytes,
         source="vLLM / SGLang schemas: x[..., 2d] -> out[..., d]; FLOPs per output from the activation's definition")


def _rotary_parts(args: OpArgs) -> tuple[int, int, int, int]:
    """(tokens, rotated elements of query + key, bytes of query + key, bytes of the cos/sin rows read) of
    ``rotary_embedding(positions, query!, key?!, head_size, cos_sin_cache, is_neox)``."""
    by_index = {i: (s, b) for i, s, b in args.tensor_items()}
    if 0 not in by_index or 1 not in by_index or 4 not in by_index:
        raise UnknownEstimate("rotary_embedding: positions, query or cos_sin_cache not recorded")
    tokens = numel(by_index[0][0])
    head = args.value(3, "rotary head_size")
    cache, cache_size = by_index[4]
    if not isinstance(head, int) or head <= 0 or len(cache) != 2:
        raise UnknownEstimate(f"rotary_embedding: head_size {head!r} or cos_sin_cache {cache} not understood")
    qk = [by_index[i] for i in (1, 2) if i in by_index]
    rotated = sum(numel(s) // head * cache[1] for s, _ in qk)
    return tokens, rotated, sum(numel(s) * b for s, b in qk), tokens * cache[1] * cache_size


def _rotary_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    """Each rotated pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s): 6 FLOPs, 3 per rotated element."""
    return 3 * _rotary_parts(args)[1]


def _rotary_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Query and key read and written in place, the positions and the cos/sin rows they index read (not the
    whole cache: it is a table looked up by position)."""
    tokens, _, qk_bytes, cache_bytes = _rotary_parts(args)
    positions = next((numel(s) * b for i, s, b in tensors if i == 0), 0)
    return 2 * qk_bytes + positions + cache_bytes


register("*::rotary_embedding *::batched_rotary_embedding", "pointwise", flops=_rotary_flops, bytes=_rotary_bytes,
         source="vLLM / SGLang schema: rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)")
