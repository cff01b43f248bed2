"""GEMMs: ``mm``/``addmm``/``bmm``/``baddbmm``/``_scaled_mm``/``_int_mm`` (2 x m x n x k, as torch.utils.flop_counter
counts them: a test holds the two equal on every shape it tries), ``linear`` and ``matmul`` through the GEMM they
dispatch to, grouped GEMMs (``_grouped_mm``, ``_scaled_grouped_mm``: the sum over groups of 2 x m x k x n) and the
custom GEMM ops of vLLM, SGLang and aiter (2 x M x N x K from their operand shapes). Bytes: every operand (and scale)
read once, the output written once in its own dtype; FP4 operands pack two values per byte (``K`` is twice the
recorded inner dim)."""
from __future__ import annotations

import math
from typing import Any, Optional

from .args import SCALAR_TYPE_CODE_ITEMSIZE, OpArgs, UnknownEstimate, broadcast_shapes, numel, read_bytes
from .dtypes import itemsize
from .registry import register


# --------------------------------------------------------------------------- GEMM shapes

# op -> (indices of the two matrix operands, number of tensor inputs before an out= tensor)
GEMM_OPERANDS: dict[str, tuple[tuple[int, int], int]] = {
    "mm": ((0, 1), 2), "_int_mm": ((0, 1), 2), "addmm": ((1, 2), 3),
    "_addmm_activation": ((1, 2), 3), "bmm": ((0, 1), 2), "baddbmm": ((1, 2), 3),
    "addbmm": ((1, 2), 3), "_scaled_mm": ((0, 1), 6),
}


def gemm_output_shape(op: str, args: OpArgs) -> tuple[int, ...]:
    """Output shape of a GEMM-family op from its operand shapes."""
    if op == "linear":
        x, w = args.shape(0, "linear input"), args.shape(1, "linear weight")
        _check_inner(x, w[-1:] + w[:1] if len(w) == 2 else w)
        return x[:-1] + ((w[0],) if len(w) == 2 else ())
    if op == "matmul":
        return matmul_output_shape(args.shape(0, "matmul self"), args.shape(1, "matmul other"))
    (ia, ib), _ = GEMM_OPERANDS[op]
    a, b = args.shape(ia, "first matrix"), args.shape(ib, "second matrix")
    _check_inner(a, b)
    if op == "addbmm":
        return (a[-2], b[-1])
    return a[:-1] + (b[-1],)


def _check_inner(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """GEMM operands must share the inner dim (a[..., K] @ b[..., K, N] or b[K])."""
    if not a or not b:
        raise UnknownEstimate("GEMM operand is 0-dim")
    inner_b = b[-2] if len(b) >= 2 else b[0]
    if a[-1] != inner_b:
        raise UnknownEstimate(f"GEMM operand shapes {a} and {b} are inconsistent (corrupted record?)")


def matmul_output_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """torch.matmul's output shape (vector operands drop their dim)."""
    if not a or not b:
        raise UnknownEstimate("matmul of a 0-dim tensor")
    _check_inner(a, b)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    if batch is None:
        raise UnknownEstimate(f"matmul batch dims {a} and {b} do not broadcast")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _gemm_bytes(op: str, args: OpArgs, tensors: list, out_size: int) -> float:
    """Operands read once, output written once; a trailing out= tensor is the write."""
    n_inputs = GEMM_OPERANDS[op][1] if op in GEMM_OPERANDS else 3
    reads = [(i, s, b) for i, s, b in tensors if i < n_inputs]
    out_shape = gemm_output_shape(op, args)
    if op == "_int_mm":
        out_size = 4
    elif op == "_scaled_mm":
        code = args.opt_value(6)
        out_size = SCALAR_TYPE_CODE_ITEMSIZE.get(code, out_size) if isinstance(code, int) else out_size
    return read_bytes(reads) + numel(out_shape) * out_size


def _mm_flops(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """a[m, k] @ b[k, n]: one multiply and one add per term of each of the m x n sums."""
    if len(a) != 2 or len(b) != 2:
        raise UnknownEstimate(f"matrix product of shapes {a} and {b}: both must be 2-D")
    _check_inner(a, b)
    return 2 * a[0] * b[1] * a[1]


def _bmm_flops(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """a[B, m, k] @ b[B, k, n]: B matrix products."""
    if len(a) != 3 or len(b) != 3 or a[0] != b[0]:
        raise UnknownEstimate(f"batched matrix product of shapes {a} and {b}: both must be 3-D with one batch")
    return a[0] * _mm_flops(a[1:], b[1:])


def _gemm(op: str, args: OpArgs, out_dims: Any) -> int:
    """mm/addmm/bmm/baddbmm/_scaled_mm, and ops that decompose into them."""
    (ia, ib), _ = GEMM_OPERANDS[op]
    a, b = args.shape(ia, "first matrix"), args.shape(ib, "second matrix")
    if op in ("bmm", "baddbmm", "addbmm"):  # addbmm = bmm then a sum over the batch; the added term is not counted
        return _bmm_flops(a, b)
    return _mm_flops(a, b)  # mm, _int_mm, addmm, _addmm_activation, _scaled_mm (its scales are not counted)


def _linear(op: str, args: OpArgs, out_dims: Any) -> int:
    """linear(x[..., K], W[N, K]) = mm(x folded to [M, K], W^T [K, N])."""
    x, w = args.shape(0, "linear input"), args.shape(1, "linear weight")
    if len(w) != 2:
        raise UnknownEstimate("linear with a 1-D weight is a matrix-vector product (no registry formula)")
    m = math.prod(x[:-1]) if len(x) > 1 else 1
    return _mm_flops((m, x[-1]), (w[1], w[0]))


def _matmul(op: str, args: OpArgs, out_dims: Any) -> int:
    """torch.matmul's dispatch by rank: mm for <=2-D (and folded N-D @ 2-D), else bmm."""
    a, b = args.shape(0, "matmul self"), args.shape(1, "matmul other")
    if len(a) == 2 and len(b) == 2:
        return _mm_flops(a, b)
    if len(a) == 1 and len(b) == 2:
        return _mm_flops((1,) + a, b)
    if len(a) < 2 or len(b) < 2:
        raise UnknownEstimate("matmul with a vector operand runs mv/dot (no registry formula)")
    batch = broadcast_shapes(a[:-2], b[:-2])
    if batch is None:
        raise UnknownEstimate(f"matmul batch dims of {a} and {b} do not broadcast")
    if len(b) == 2:  # folded into one mm
        return _mm_flops((math.prod(a[:-1]), a[-1]), b)
    n = math.prod(batch)
    return _bmm_flops((n,) + a[-2:], (n,) + b[-2:])




def _gemm_family_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    return _gemm_bytes(op, args, tensors, args.compute_itemsize() or 4)


register(GEMM_OPERANDS, "gemm", flops=_gemm, bytes=_gemm_family_bytes,
         source="2 x M x N x K per batch, as torch.utils.flop_counter counts it")
register("linear", "gemm", flops=_linear, bytes=_gemm_family_bytes, source="mm with the weight transposed")
register("matmul", "gemm", flops=_matmul, bytes=_gemm_family_bytes, source="mm or bmm by operand rank")


# --------------------------------------------------------------------------- grouped GEMMs

# op -> (index of the offsets, index of the out_dtype argument, index of the first scale or None)
_GROUPED = {"_grouped_mm": (2, 4, None), "_scaled_grouped_mm": (4, 7, 2), "_scaled_grouped_mm_v2": (8, 10, 2)}


def _packing(args: OpArgs, i: int) -> int:
    """Values per stored element: 2 for packed FP4 (``Float4_e2m1fn_x2``), else 1."""
    type_str = (args.type_at(i) or "").lower()
    return 2 if "float4" in type_str or "fp4" in type_str else 1


def grouped_mm_problem(op: str, args: OpArgs) -> tuple[int, tuple[int, ...]]:
    """(multiply-adds, output shape) of a grouped GEMM, per torch's four layouts: 2-D x 3-D (rows of ``self``
    split into groups by ``offs``, one weight per group), 3-D x 3-D (a batch), 2-D x 2-D (the inner dim split:
    one output per group, e.g. MoE weight gradients) and 3-D x 2-D (the columns of ``mat2`` split)."""
    a, b = args.shape(0, "grouped GEMM self"), args.shape(1, "grouped GEMM mat2")
    k_pack = _packing(args, 0)
    if len(a) == 2 and len(b) == 3:
        _inner(a[1], b[1], a, b)
        return a[0] * a[1] * k_pack * b[2], (a[0], b[2])
    if len(a) == 3 and len(b) == 3:
        _inner(a[2], b[1], a, b)
        return a[0] * a[1] * a[2] * k_pack * b[2], (a[0], a[1], b[2])
    if len(a) == 2 and len(b) == 2:
        _inner(a[1], b[0], a, b)
        offs = args.opt_shape(_GROUPED.get(op, (2,))[0])
        if offs is None or len(offs) != 1:
            raise UnknownEstimate("2-D x 2-D grouped GEMM without recorded offsets: the group count is unknown")
        return a[0] * a[1] * k_pack * b[1], (offs[0], a[0], b[1])
    if len(a) == 3 and len(b) == 2:
        _inner(a[2], b[0], a, b)
        return a[1] * a[2] * k_pack * b[1], (a[1], b[1])
    raise UnknownEstimate(f"grouped GEMM operands {a} and {b}: no such layout")


def _inner(ka: int, kb: int, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    if ka != kb:
        raise UnknownEstimate(f"grouped GEMM operand shapes {a} and {b} are inconsistent (corrupted record?)")


def _grouped_flops(op: str, args: OpArgs, out_dims: Any) -> int:
    return 2 * grouped_mm_problem(op, args)[0]


def _out_itemsize(args: OpArgs, dtype_index: Optional[int], default: int) -> int:
    code = args.opt_value(dtype_index) if dtype_index is not None else None
    return SCALAR_TYPE_CODE_ITEMSIZE.get(code, default) if isinstance(code, int) and not isinstance(code, bool) \
        else default


def _grouped_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Operands, scales, offsets and bias read once; the output written once (bf16 unless out_dtype says)."""
    _, out_shape = grouped_mm_problem(op, args)
    offs_index, dtype_index, scale_index = _GROUPED[op]
    default = 2 if scale_index is not None else (args.compute_itemsize() or 2)
    return read_bytes(tensors) + numel(out_shape) * _out_itemsize(args, dtype_index, default)


register(_GROUPED, "gemm", flops=_grouped_flops, bytes=_grouped_bytes,
         source="first principles: sum over groups of 2 x m x k x n (torch has no formula)")


# --------------------------------------------------------------------------- custom GEMM ops

def _custom_mm(a_index: int, b_index: int, *, b_nk: bool, out_index: Optional[int] = None,
               out_dtype_index: Optional[int] = None, packed: int = 0):
    """FLOP and byte formulas for a custom ``out = a[M, K] @ b`` with ``b`` as ``[K, N]`` or (``b_nk``) ``[N, K]``,
    possibly written into an ``out`` argument; every other tensor argument (scales, bias) is read once. ``packed``:
    values per stored element when the op always packs (FP4 in uint8), else taken from the recorded dtype."""

    def problem(args: OpArgs) -> tuple[int, int, int]:
        a, b = args.shape(a_index, "GEMM input"), args.shape(b_index, "GEMM weight")
        if len(b) != 2 or not a:
            raise UnknownEstimate(f"GEMM operands {a} and {b}: expected [..., K] and a 2-D weight")
        k_b, n = (b[1], b[0]) if b_nk else (b[0], b[1])
        if a[-1] != k_b:
            raise UnknownEstimate(f"GEMM operand shapes {a} and {b} are inconsistent (corrupted record?)")
        return math.prod(a[:-1]), a[-1] * (packed or _packing(args, a_index)), n

    def flops(op: str, args: OpArgs, out_dims: Any) -> int:
        m, k, n = problem(args)
        return 2 * m * k * n

    def nbytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
        m, _, n = problem(args)
        read = read_bytes([t for t in tensors if t[0] != out_index])
        if out_index is not None and args.opt_shape(out_index) is not None:
            out_size = itemsize(args.type_at(out_index)) or 2
        else:
            low_precision = packed > 1 or _packing(args, a_index) > 1 or (args.compute_itemsize() or 2) < 2
            out_size = _out_itemsize(args, out_dtype_index, 2 if low_precision else (args.compute_itemsize() or 2))
        return read + m * n * out_size

    return flops, nbytes


def _register_custom_mm(names: str, source: str, **layout: Any) -> None:
    flops, nbytes = _custom_mm(**layout)
    register(names, "gemm", flops=flops, bytes=nbytes, source=source)


# vLLM: rocm_unquantized_gemm(x, weight[N, K], bias) is F.linear; cutlass_scaled_mm(out, a, b[K, N], scales..., bias)
_register_custom_mm("*::rocm_unquantized_gemm *::rocm_unquantized_gemm_impl *::unquantized_gemm",
                    "vLLM schema: linear(x, weight[N, K], bias)", a_index=0, b_index=1, b_nk=True)
_register_custom_mm("*::cutlass_scaled_mm *::cutlass_scaled_mm_azp", "vLLM schema: out = a @ b[K, N] (scaled)",
                    a_index=1, b_index=2, b_nk=False, out_index=0)
_register_custom_mm("*::cutlass_scaled_fp4_mm", "vLLM schema: out = a[M, K/2] @ b[N, K/2]^T (FP4, block scales)",
                    a_index=1, b_index=2, b_nk=True, out_index=0, packed=2)
# SGLang sgl_kernel: fp8_scaled_mm(mat_a, mat_b[K, N], scales_a, scales_b, out_dtype, bias), int8 likewise
_register_custom_mm("*::fp8_scaled_mm *::int8_scaled_mm *::fp8_blockwise_scaled_mm",
                    "sgl_kernel schema: mat_a @ mat_b[K, N] (scaled), out in out_dtype", a_index=0, b_index=1,
                    b_nk=False, out_dtype_index=4)
# aiter: gemm_a8w8(XQ, WQ[N, K], x_scale, w_scale, out), tuned bf16 GEMMs take (input, weight[N, K])
_register_custom_mm("aiter::gemm_a8w8 aiter::gemm_a8w8_CK aiter::gemm_a8w8_blockscale aiter::gemm_a16w16",
                    "aiter schema: XQ @ WQ[N, K]^T", a_index=0, b_index=1, b_nk=True, out_index=4)
