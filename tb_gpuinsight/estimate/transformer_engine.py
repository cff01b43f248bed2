"""NVIDIA Transformer Engine (PyTorch): the calls a torch.profiler trace records with shapes, and why the rest are not
rated.

How TE shows up in a trace:

* TE 1.x runs its GEMMs, FP8 casts, activations and inference norms through TorchScript ops registered with
  ``TORCH_LIBRARY(tex_ts, m)`` (``transformer_engine/pytorch/csrc/ts_fp8_op.cpp``), called as
  ``torch.ops.tex_ts.te_gemm_ts(...)`` from ``cpp_extensions/gemm.py``: they go through the dispatcher, so each is a
  cpu_op ``tex_ts::<name>`` with every argument's shape, dtype and scalar value. One entry each below.
* TE 2.x calls ``tex.generic_gemm`` / ``tex.fused_attn_fwd`` (pybind11 / nanobind functions, no torch op): the
  kernels run under the module's ``torch.autograd.Function``, which the profiler records by class name
  (``_Linear``, ``_LayerNormLinear``, ``FusedAttnFunc``...) with the shapes of its tensor arguments only (Python
  arguments such as the qkv layout are recorded empty). ``_Linear``'s and ``_LayerNormLinear``'s tensors size their
  GEMM; the others get a reason naming what is missing and the one step that rates their kernels.

TE DType codes (``transformer_engine/common/include/transformer_engine/transformer_engine.h``): kByte 0, kInt32 1,
kInt64 2, kFloat32 3, kFloat16 4, kBFloat16 5, kFloat8E4M3 6, kFloat8E5M2 7. FP8 data is held in uint8 tensors, so
recorded dtypes already give 1 byte per element.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel, read_bytes, stored_numel
from .registry import register

TE_DTYPE_ITEMSIZE = {0: 1, 1: 4, 2: 8, 3: 4, 4: 2, 5: 2, 6: 1, 7: 1}
_TS = "Transformer Engine 1.x TorchScript op (TORCH_LIBRARY(tex_ts), csrc/ts_fp8_op.cpp)"


def _te_itemsize(args: OpArgs, i: int, what: str) -> int:
    """Item size of a TE DType code recorded as scalar argument i."""
    code = args.value(i, what)
    if not isinstance(code, int) or code not in TE_DTYPE_ITEMSIZE:
        raise UnknownEstimate(f"{what} is not a Transformer Engine DType code: {code!r}")
    return TE_DTYPE_ITEMSIZE[code]


def _flag(args: OpArgs, i: int, what: str) -> bool:
    value = args.value(i, what)
    return bool(value) if not isinstance(value, str) else value.lower() in ("1", "true")


# --------------------------------------------------------------------------- GEMM

# te_gemm_ts(A, A_scale_inverse, A_fp8_tensor, A_type, transa, B, B_scale_inverse, B_fp8_tensor, B_type, transb,
#            D, D_scale, D_type, D_amax, bias, bias_type, pre_gelu_out, grad, workspace, workspaceSize,
#            accumulate, use_split_accumulator)
_A, _TRANSA, _B, _TRANSB, _D, _BIAS, _GELU, _ACCUMULATE = 0, 4, 5, 9, 10, 14, 16, 20


def te_gemm_problem(args: OpArgs) -> tuple[int, int, int]:
    """(m, n, k) of ``te_gemm_ts``: cuBLASLt's column-major ``D = op(A) op(B)`` on row-major tensors, so D is
    ``[n, m]``; transa: A is ``[m, k]`` (else ``[k, m]``), transb: B is ``[k, n]`` (else ``[n, k]``)."""
    a, b = args.shape(_A, "te_gemm A"), args.shape(_B, "te_gemm B")
    if len(a) != 2 or len(b) != 2:
        raise UnknownEstimate(f"te_gemm operands are not matrices: A {a}, B {b}")
    m, k = a if _flag(args, _TRANSA, "transa") else a[::-1]
    k_b, n = b if _flag(args, _TRANSB, "transb") else b[::-1]
    d = args.opt_shape(_D)
    if k != k_b or (d is not None and numel(d) != m * n):
        raise UnknownEstimate(f"te_gemm shapes do not agree: A {a}, B {b}, D {d}")
    return m, n, k


def _te_gemm_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    m, n, k = te_gemm_problem(args)
    return 2 * m * n * k


def _te_gemm_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """A and B read, D written (and read when accumulating), bias and the GELU input read or written once. The FP8
    scale vectors (one element used each) and the cuBLAS workspace are not traffic of the product."""
    te_gemm_problem(args)  # the shapes must be those of a GEMM
    by_index = {i: (s, b) for i, s, b in tensors}
    moved = sum(stored_numel(by_index[i][0]) * by_index[i][1] for i in (_A, _B, _BIAS, _GELU) if i in by_index)
    if _D not in by_index:
        raise UnknownEstimate("te_gemm output D not recorded")
    d_shape, d_size = by_index[_D]
    return moved + numel(d_shape) * d_size * (2 if _flag(args, _ACCUMULATE, "accumulate") else 1)


register("tex_ts::te_gemm_ts", "gemm", flops=_te_gemm_flops, bytes=_te_gemm_bytes,
         source=f"{_TS}: 2*m*n*k, m n k from A, B and transa / transb (cuBLASLt column-major)")


# --------------------------------------------------------------------------- casts, activations, inference norms

def _cast_to_fp8_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """cast_to_fp8_ts(input, scale, amax, scale_inv, fp8_tensor, otype): input read, an FP8 copy written."""
    x, size = _first(tensors)
    return stored_numel(x) * size + numel(x) * _te_itemsize(args, 5, "otype")


def _cast_to_fp8_noalloc_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """cast_to_fp8_noalloc_ts(input, scale, output, amax, scale_inv, fp8_tensor, otype): input read, output written."""
    by_index = {i: (s, b) for i, s, b in tensors}
    if 0 not in by_index or 2 not in by_index:
        raise UnknownEstimate("cast_to_fp8_noalloc: input or output not recorded")
    return stored_numel(by_index[0][0]) * by_index[0][1] + numel(by_index[2][0]) * by_index[2][1]


def _cast_from_fp8_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """cast_from_fp8_ts(input, scale_inv, fp8_tensor, itype, otype): FP8 input read, written in otype."""
    x, size = _first(tensors)
    return stored_numel(x) * size + numel(x) * _te_itemsize(args, 4, "otype")


def _first(tensors: list) -> tuple[tuple[int, ...], int]:
    if not tensors or tensors[0][0] != 0:
        raise UnknownEstimate("input tensor not recorded")
    return tensors[0][1], tensors[0][2]


register("tex_ts::cast_to_fp8_ts", "movement", bytes=_cast_to_fp8_bytes, zero_flops=True,
         source=f"{_TS}: a scaled cast, rated on its bytes like any cast")
register("tex_ts::cast_to_fp8_noalloc_ts", "movement", bytes=_cast_to_fp8_noalloc_bytes, zero_flops=True,
         source=f"{_TS}: a scaled cast into a given output")
register("tex_ts::cast_from_fp8_ts", "movement", bytes=_cast_from_fp8_bytes, zero_flops=True,
         source=f"{_TS}: a scaled cast out of FP8")

# <act>_ts(input, scale, amax, scale_inv, fp8_tensor, otype); gated ones (x[..., 2d] -> out[..., d]) halve the width.
_GATED = frozenset({"geglu_ts", "reglu_ts", "swiglu_ts"})
_ACTIVATIONS = ("gelu_ts", "fp8_gelu_ts", "relu_ts", "qgelu_ts", "srelu_ts") + tuple(sorted(_GATED))


def _activation_out(op: str, args: OpArgs) -> tuple[tuple[int, ...], int]:
    x = args.shape(0, "activation input")
    if op.rsplit("::", 1)[-1] in _GATED:
        if not x or x[-1] % 2:
            raise UnknownEstimate(f"gated activation input {x} has no even last dim")
        return x[:-1] + (x[-1] // 2,), 2  # an activation and a multiply per output element
    return x, 1


def _activation_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    out, per_element = _activation_out(op, args)
    return per_element * numel(out)


def _activation_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    out, _ = _activation_out(op, args)
    x, size = _first(tensors)
    return stored_numel(x) * size + numel(out) * _te_itemsize(args, 5, "otype")


register([f"tex_ts::{name}" for name in _ACTIVATIONS], "pointwise", flops=_activation_flops,
         bytes=_activation_bytes, source=f"{_TS}: 1 FLOP per output element (2 when gated), output in otype")

# layernorm_fwd_inf_ts(input, weight, bias, eps, ...), layernorm_fwd_fp8_inf_ts(input, weight, bias, eps, scale,
# amax, scale_inv, fp8_tensor, otype, ...); rmsnorm_* the same without bias. (per element FLOPs, otype position)
_NORMS = {"layernorm_fwd_inf_ts": (5, None), "layernorm_fwd_fp8_inf_ts": (5, 8),
          "rmsnorm_fwd_inf_ts": (4, None), "rmsnorm_fwd_fp8_inf_ts": (4, 7)}


def _norm_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    return _NORMS[op.rsplit("::", 1)[-1]][0] * numel(args.shape(0, "norm input"))


def _norm_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Input, weight and bias read; the normalised input written in its dtype or the FP8 otype. The FP8 scale
    vectors (one element used) are left out."""
    otype = _NORMS[op.rsplit("::", 1)[-1]][1]
    x, size = _first(tensors)
    small = read_bytes([t for t in tensors if t[0] in (1, 2)])  # weight, bias
    out_size = size if otype is None else _te_itemsize(args, otype, "otype")
    return stored_numel(x) * size + small + numel(x) * out_size


register([f"tex_ts::{name}" for name in _NORMS], "norms", flops=_norm_flops, bytes=_norm_bytes,
         source=f"{_TS}: 5 FLOPs per element (layer norm), 4 (RMS norm); input read, result written")


# --------------------------------------------------------------------------- TE 2.x autograd Functions

def linear_problem(args: OpArgs) -> tuple[int, int, int]:
    """(tokens, out_features, in_features) of a ``_Linear`` autograd Function from its recorded tensor arguments: the
    weight is its first matrix ``[out, in]``, the input the last later tensor ``[..., in]`` (TE 1.x passes ``weight,
    weight_fp8, inp, bias``, TE 2.x ``weight, inp, bias``), else an earlier one (other libraries pass ``x, weight,
    bias``; with a 2-D ``x`` first the product is the same either way)."""
    tensors = list(args.tensor_items())
    weight = next(((i, s) for i, s, _ in tensors if len(s) == 2), None)
    if weight is None:
        raise UnknownEstimate("_Linear: no weight matrix among its recorded tensors")
    out_features, in_features = weight[1]
    inputs = [(i > weight[0], i, s) for i, s, _ in tensors if i != weight[0] and len(s) >= 2 and s[-1] == in_features]
    if not inputs:
        raise UnknownEstimate(f"_Linear: no input [..., {in_features}] recorded beside the weight {weight[1]}")
    x = max(inputs)[2]
    return numel(x) // max(in_features, 1), out_features, in_features


def _linear_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    tokens, out_features, in_features = linear_problem(args)
    return 2 * tokens * out_features * in_features


def _linear_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    """Every recorded tensor read once (weight, input, bias), the output written in the input's dtype."""
    tokens, out_features, _ = linear_problem(args)
    size = max((b for _, s, b in tensors if len(s) >= 2), default=2)
    note = ("partial: the GEMM's operands; FP8 casts of input and weight (when fp8_autocast is on, which the trace "
            "does not record) move more")
    return read_bytes(tensors) + tokens * out_features * size, note


register("_Linear", "gemm", flops=_linear_flops, bytes=_linear_bytes,
         source="Transformer Engine te.Linear's autograd Function (and other libraries' _Linear of a weight [out, in] "
                "and an input [..., in]; tensor arguments recorded by torch.profiler): 2 * tokens * out * in")

def _ln_linear_parts(args: OpArgs) -> tuple[int, int, int, int]:
    """(tokens, out_features, in_features, norm FLOPs per element) of TE's ``_LayerNormLinear(inp, ln_weight, ln_bias,
    weight, ...)`` (every TE release keeps these four first): the weight is the first matrix ``[out, in]`` after
    ``ln_bias``; a norm without bias is TE's RMSNorm (4 FLOPs per element), else LayerNorm (5)."""
    x, gamma = args.shape(0, "_LayerNormLinear input"), args.shape(1, "ln_weight")
    in_features = x[-1] if x else 0
    if gamma != (in_features,):
        raise UnknownEstimate(f"_LayerNormLinear: ln_weight {gamma} does not match the input {x}")
    weight = next((s for i, s, _ in args.tensor_items() if i >= 3 and len(s) == 2 and s[1] == in_features), None)
    if weight is None:
        raise UnknownEstimate(f"_LayerNormLinear: no weight [out, {in_features}] recorded")
    return numel(x) // max(in_features, 1), weight[0], in_features, 5 if args.opt_shape(2) else 4


def _ln_linear_flops(op: str, args: OpArgs, out_dims: Any) -> float:
    tokens, out_features, in_features, per_element = _ln_linear_parts(args)
    return 2 * tokens * out_features * in_features + per_element * tokens * in_features


def _ln_linear_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    """Every recorded tensor read once, the normalised input written and read back by the GEMM, the output written
    (both in the input's dtype)."""
    tokens, out_features, in_features, _ = _ln_linear_parts(args)
    size = tensors[0][2]
    note = "partial: the norm and GEMM operands in the input's dtype; FP8 runs move the normalised input in 1 byte"
    return read_bytes(tensors) + (2 * tokens * in_features + tokens * out_features) * size, note


register("_LayerNormLinear", "gemm", flops=_ln_linear_flops, bytes=_ln_linear_bytes,
         source="Transformer Engine te.LayerNormLinear's autograd Function (inp, ln_weight, ln_bias, weight, ...): "
                "2 * tokens * out * in + the norm's 5 (4 for RMSNorm) FLOPs per input element")

_RECORD_FORWARD = ("the backward node records only grad_output; its dgrad and wgrad GEMMs are 2x the FLOPs of the "
                   "forward op with the same sequence number (rated for _Linear and _LayerNormLinear)")
_NO_LAYOUT = ("its Python arguments (qkv layout, mask type, sequence lengths) are recorded empty, so batch, heads "
              "and the causal pair count are unknown; run the profiled steps with NVTE_FUSED_ATTN=0 (TE then calls "
              "flash-attn, whose ops are recorded with shapes and rated)")
_FUSED = ("a fused norm + two GEMMs + activation Function without a model yet; its kernels run from TE's C++ "
          "extension, so no op inside it has shapes: profile with te.LayerNormLinear + te.Linear in its place "
          "(rated) or measure the kernels with Nsight Compute")
_GROUPED = ("its per-group token counts (m_splits) are a Python list recorded empty, so each GEMM's size is "
            "unknown; measure the grouped kernels with Nsight Compute")
_UNRATED = {
    "_LinearBackward": _RECORD_FORWARD,
    "_LayerNormLinearBackward": _RECORD_FORWARD,
    "_LayerNormMLP": _FUSED, "_LayerNormMLPBackward": _RECORD_FORWARD,
    "_GroupedLinear": _GROUPED, "_GroupedLinearBackward": _RECORD_FORWARD,
    "FusedAttnFunc": _NO_LAYOUT, "FusedAttnFuncBackward": _NO_LAYOUT,
    "FusedAttnFunc_qkvpacked": _NO_LAYOUT, "FusedAttnFunc_qkvpackedBackward": _NO_LAYOUT,
    "FusedAttnFunc_kvpacked": _NO_LAYOUT, "FusedAttnFunc_kvpackedBackward": _NO_LAYOUT,
}


def _unrated(op: str, args: OpArgs, *_: Any) -> float:
    raise UnknownEstimate(f"Transformer Engine {op}: {_UNRATED[op]}")


for _name in _UNRATED:
    register(_name, "attention" if _name.startswith("FusedAttn") else "gemm", flops=_unrated, bytes=_unrated,
             source="Transformer Engine autograd Function: recorded without the sizes its kernels need")
