"""Data movement: views, fills, copies and casts, concatenation, gathers and indexed writes, embedding lookups,
upsampling and KV-cache writes. None of them does floating-point work: their FLOPs are 0 (known), and they are
rated on their bytes alone. Bytes count only what the op touches: a gather reads the selected rows, an indexed
write writes the indexed slice (a KV-cache update writes a few hundred KB into a multi-GB cache).
"""
from __future__ import annotations

import math
from typing import Any

from .args import SCALAR_TYPE_CODE_ITEMSIZE, OpArgs, UnknownEstimate, broadcast_shapes, numel, \
    out_arg_positions, read_bytes, stored_numel
from .dtypes import is_floating_type, itemsize
from .registry import register

# --------------------------------------------------------------------------- op classes

VIEW_OPS = frozenset({
    "view", "_unsafe_view", "as_strided", "transpose", "t", "permute", "expand", "expand_as",
    "slice", "select", "unsqueeze", "squeeze", "detach", "alias", "narrow", "split",
    "split_with_sizes", "chunk", "unbind", "unflatten", "view_as", "numpy_T", "_reshape_alias",
    "lift_fresh", "empty", "empty_like", "empty_strided", "resize_", "set_", "as_strided_",
    "_nested_view_from_buffer", "real", "imag", "view_as_real", "view_as_complex", "diagonal",
    "movedim", "swapaxes", "transpose_", "unsqueeze_", "squeeze_", "t_", "mT", "mH",
})
FILL_OPS = frozenset({
    "fill_", "zero_", "normal_", "uniform_", "random_", "exponential_", "bernoulli_",
    "geometric_", "log_normal_", "cauchy_", "zeros_like", "ones_like", "full_like",
    "rand_like", "randn_like",
})
CONCAT_OPS = frozenset({"cat", "_cat", "concat", "concatenate", "stack", "hstack", "vstack"})

# DRAM can carry (an index_select from a 150k-row embedding table reads 141 rows, not the table).
GATHER_OPS = {"index_select", "gather", "take", "index"}


def _gather_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Selected elements read and written, plus the indices (an expanded index: its storage, read once)."""
    (_, src, size) = tensors[0]
    index_elems = sum(numel(s) for _, s, _ in tensors[1:])
    index_bytes = read_bytes(tensors[1:])
    if op == "index_select":
        dim = int(args.opt_value(1, 0) or 0) % max(len(src), 1)
        selected = numel(src) // max(src[dim], 1) * index_elems if src else index_elems
    else:  # gather/take/index: output has the indices' shape (index: the broadcast of its index tensors)
        selected = max((numel(s) for _, s, _ in tensors[1:]), default=0)
        if op == "index" and src and len(tensors) == 2:
            selected *= numel(src[len(tensors[1][1]):]) if len(tensors[1][1]) < len(src) else 1
    return float(index_bytes + 2 * selected * size)


# In-place writes through an index: the op touches the written slice, not the whole destination (a KV-cache
# update writes a few hundred KB into a multi-GB cache). Read-modify-write variants also read that slice.
INDEXED_WRITE_OPS = frozenset({
    "index_put_", "_index_put_impl_", "index_copy_", "index_add_", "index_reduce_",
    "scatter_", "scatter_add_", "scatter_reduce_", "masked_scatter_", "put_",
})
_ACCUMULATING = frozenset({"index_add_", "index_reduce_", "scatter_add_", "scatter_reduce_"})


def _indexed_write_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Source and index read, the written slice written (and read when the op accumulates)."""
    dest_shape, dest_size = tensors[0][1], tensors[0][2]
    others = tensors[1:]
    if op in ("index_put_", "_index_put_impl_"):
        # Kineto records the index list without shapes (Input Dims []): indices count only when recorded
        index_shapes = _index_list_shapes(args)
        index_bytes = sum(stored_numel(s) * 8 for s in index_shapes)  # long indices
        values = next((s for i, s, _ in others if i == 2), None)
        written = _index_put_slice(dest_shape, index_shapes, values)
        source = stored_numel(values) * (itemsize(args.type_at(2)) or dest_size) if values is not None else 0
        accumulate = bool(args.opt_value(3, False))
        return float(source + index_bytes + written * dest_size * (2 if accumulate else 1))
    index_bytes = read_bytes([t for t in others if _is_index_arg(op, t[0])])
    sources = [(s, b) for i, s, b in others if not _is_index_arg(op, i)]
    if op in ("scatter_", "scatter_add_", "scatter_reduce_", "put_"):
        # one element per index: that many of src are read (src may be larger than index) and written
        written = max((numel(s) for i, s, _ in others if _is_index_arg(op, i)), default=0)
        source = sum(min(stored_numel(s), written) * b for s, b in sources)
    else:
        source = sum(stored_numel(s) * b for s, b in sources)
        written = max((numel(s) for s, _ in sources), default=0)  # index_copy_/index_add_: the slice's shape
        if op == "masked_scatter_":  # the mask is read whole (as index_bytes); at most numel(source) written
            written = min(numel(dest_shape), written)
    accumulate = op in _ACCUMULATING
    return float(source + index_bytes + written * dest_size * (2 if accumulate else 1))


def _is_index_arg(op: str, i: int) -> bool:
    """index_copy_(self, dim, index, source), scatter_(self, dim, index, src), masked_scatter_(self, mask, ...)."""
    return i == 1 if op in ("masked_scatter_", "put_") else i == 2


def _index_list_shapes(args: OpArgs) -> list[tuple[int, ...]]:
    """Shapes of index_put_'s ``indices`` (a list of optional tensors, recorded as a list of shapes)."""
    value = args.dims[1] if len(args.dims) > 1 else None
    if isinstance(value, (list, tuple)) and all(isinstance(m, (list, tuple)) for m in value):
        return [m for m in args.member_shapes(1) if m]
    return []


def _index_put_slice(dest: tuple[int, ...], index_shapes: list, values: tuple[int, ...] | None) -> int:
    """Elements written: the broadcast index shape times the destination dims not indexed."""
    if index_shapes:
        indexed = broadcast_shapes(*index_shapes)
        if indexed is not None and len(index_shapes) <= len(dest):
            return numel(indexed) * numel(dest[len(index_shapes):])
    return numel(values) if values is not None else numel(dest)


UPSAMPLE_OPS = frozenset({
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa",
})


def _upsample_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Input read, output written: its spatial size from output_size, else from the scale factors."""
    (_, x, size) = tensors[0]
    return float(stored_numel(x) * size + numel(upsample_output_shape(args, x)) * size)


def upsample_output_shape(args: OpArgs, x: tuple[int, ...]) -> tuple[int, ...]:
    """(N, C, *out_spatial) of an upsample op from ``output_size`` or its scale factors."""
    n = len(x) - 2
    if n < 1:
        raise UnknownEstimate(f"upsample input {x} has no spatial dims")
    size = args.opt_value(1)
    if isinstance(size, (list, tuple)) and len(size) == n and all(isinstance(v, int) for v in size):
        return x[:2] + tuple(size)
    scales = _upsample_scales(args, n)
    if scales is None:
        raise UnknownEstimate("upsample output_size and scale factors not recorded")
    return x[:2] + tuple(int(math.floor(d * f)) for d, f in zip(x[2:], scales))


def _upsample_scales(args: OpArgs, n: int) -> tuple[float, ...] | None:
    """scale_factors (a list, .vec overloads) or scales_h/scales_w... (trailing float scalars)."""
    values = [args.opt_value(i) for i in range(2, len(args.dims))]
    for value in values:
        if isinstance(value, (list, tuple)) and len(value) == n and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return tuple(float(v) for v in value)
    floats = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return tuple(floats[-n:]) if len(floats) >= n else None


def _cast_bytes(args: OpArgs, tensors: list) -> float:
    """_to_copy(self, dtype, ...): read self, write it in the target dtype (self's when not given)."""
    (_, x, size) = tensors[0]
    code = args.opt_value(1)
    out_size = SCALAR_TYPE_CODE_ITEMSIZE.get(code, size) if isinstance(code, int) and not isinstance(
        code, bool) else size
    return float(stored_numel(x) * size + numel(x) * out_size)




def _zero_read(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    return 0.0


def _fill_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    return numel(tensors[0][1]) * tensors[0][2]


def _copy_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """copy_(self, src): src read (a broadcast src: its storage) and self written, each in its own dtype."""
    if len(tensors) < 2:
        raise UnknownEstimate("copy_ without both tensors recorded")
    (_, dst, dst_size), (_, src, src_size) = tensors[:2]
    return numel(dst) * dst_size + stored_numel(src) * src_size


ASSUMED_LIST_DTYPE = ("upper bound: the TensorList's element dtype is not recorded (4-byte elements assumed; "
                      "bf16/fp16 lists move half)")


def _concat_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    """Every input read once (a broadcast view: its storage) and written once into the output (an out= tensor is
    that write, not a read)."""
    outs = out_arg_positions_of(op, args)
    note = ASSUMED_LIST_DTYPE if args.compute_dtype() is None else ""
    inputs = [t for t in tensors if t[0] not in outs]
    return read_bytes(inputs) + sum(numel(s) * b for _, s, b in inputs), note


def out_arg_positions_of(op: str, args: OpArgs) -> frozenset:
    return out_arg_positions(op, len(args.dims))


def _embedding_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """The looked-up rows read and written, plus the indices (an expanded index: its storage)."""
    if len(tensors) < 2:
        raise UnknownEstimate("embedding without weight and indices recorded")
    (_, weight, wsize), (_, idx, isize) = tensors[0], tensors[1]
    return stored_numel(idx) * isize + 2 * numel(idx) * weight[-1] * wsize


def _gather_family_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    outs = out_arg_positions_of(op, args)
    inputs = [t for t in tensors if t[0] not in outs]
    if len(inputs) < 2 and op == "index":  # index(self, indices): the index list recorded as a list of shapes
        return _index_list_bytes(args, inputs[0])
    if len(inputs) < 2:
        raise UnknownEstimate(f"{op} without its source and index recorded")
    return _gather_bytes(op, args, inputs)


def _index_list_bytes(args: OpArgs, source: tuple) -> float:
    """``index(self, [idx, ...])``: the (long) indices read, the selected elements read and written."""
    _, src, size = source
    shapes = _index_list_shapes(args)
    indexed = broadcast_shapes(*shapes) if shapes else None
    if indexed is None or len(shapes) > len(src):
        raise UnknownEstimate("index: the index tensors' shapes are not recorded")
    selected = numel(indexed) * numel(src[len(shapes):])
    return float(sum(stored_numel(s) * 8 for s in shapes) + 2 * selected * size)


_MOVE = "first principles: bytes touched; no floating-point work"
register(VIEW_OPS, "movement", bytes=_zero_read, zero_flops=True, source="views move no data")
register(FILL_OPS, "movement", bytes=_fill_bytes, zero_flops=True, source="one write of the filled tensor")
register("copy_", "movement", bytes=_copy_bytes, zero_flops=True, source=_MOVE)
register("clone contiguous to", "movement", zero_flops=True, source=_MOVE)
register("_to_copy", "movement", bytes=lambda op, args, tensors, out_dims: _cast_bytes(args, tensors),
         zero_flops=True, source="read, then write in the target dtype")
register(CONCAT_OPS, "movement", bytes=_concat_bytes, zero_flops=True, source=_MOVE)
register("embedding", "movement", bytes=_embedding_bytes, zero_flops=True, source=_MOVE)
register(GATHER_OPS, "movement", bytes=_gather_family_bytes, zero_flops=True, source=_MOVE)
register(INDEXED_WRITE_OPS, "movement", bytes=lambda op, args, tensors, out_dims: _indexed_write_bytes(
    op, args, tensors), zero_flops=True, source=_MOVE)
_NEAREST = frozenset(op for op in UPSAMPLE_OPS if "nearest" in op)
register(UPSAMPLE_OPS - _NEAREST, "movement", bytes=lambda op, args, tensors, out_dims: _upsample_bytes(
    op, args, tensors), source="input read, output written")  # bilinear/bicubic interpolation: FLOPs not modelled
register(_NEAREST, "movement", bytes=lambda op, args, tensors, out_dims: _upsample_bytes(op, args, tensors),
         zero_flops=True, source="nearest-neighbour upsampling copies elements")
register("where masked_fill masked_fill_ flip roll repeat tile tril triu tril_ triu_ narrow_copy index_fill_ "
         "constant_pad_nd reflection_pad1d reflection_pad2d replication_pad2d slice_scatter select_scatter "
         "diagonal_scatter split_with_sizes_copy unbind_copy", "movement", zero_flops=True, source=_MOVE)


# --------------------------------------------------------------------------- KV-cache writes

# (source tensor indices, destination indices, slot index). They write each source token into the cache (in the
# cache's dtype, fp8 caches included) and read nothing else of it.
_CACHE_WRITES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "reshape_and_cache": ((0, 1), (2, 3), 4),
    "reshape_and_cache_flash": ((0, 1), (2, 3), 4),
    "concat_and_cache_mla": ((0, 1), (2,), 3),
}


def _cache_write_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    base = op.rsplit("::", 1)[-1]
    sources, caches, slots = _CACHE_WRITES[base]
    by_index = {i: (s, b) for i, s, b in tensors}
    source_elems = sum(numel(by_index[i][0]) for i in sources if i in by_index)
    read = sum(numel(by_index[i][0]) * by_index[i][1] for i in sources + (slots,) if i in by_index)
    cache_size = min((by_index[i][1] for i in caches if i in by_index), default=None)
    if cache_size is None:
        raise UnknownEstimate(f"{base}: cache tensor not recorded")
    return float(read + source_elems * cache_size)


register([f"*::{name}" for name in _CACHE_WRITES], "movement", bytes=_cache_write_bytes, zero_flops=True,
         source="vLLM schema: key/value and slots read, each token written once into the cache")


def _store_cache_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """SGLang ``store_cache(k_cache, v_cache, indices, k, v)`` (argument order varies by version): the two largest
    tensors are the caches, written only at the indexed slots; k and v read once and written once into the caches
    in the caches' dtype; the slot indices read."""
    if len(tensors) < 4:
        raise UnknownEstimate(f"{op}: caches, slots, k and v not all recorded")
    caches = sorted(tensors, key=lambda t: numel(t[1]))[-2:]
    rest = [t for t in tensors if t not in caches]
    slots = [t for t in rest if len(t[1]) == 1 and not is_floating_type(args.type_at(t[0]) or "")]
    sources = [t for t in rest if t not in slots]
    written = sum(numel(s) for _, s, _ in sources) * min(b for _, _, b in caches)
    return float(read_bytes(rest) + written)


register("*::store_cache", "movement", bytes=_store_cache_bytes, zero_flops=True,
         source="SGLang schema: k, v and slots read, each token written once into the caches")


# Sorting, selection and counting compare or count; they do no floating-point arithmetic to rate.
def _inputs_only(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    return float(read_bytes(tensors))


register("sort argsort msort", "movement", zero_flops=True, source="comparisons only: input read, sorted output "
                                                                  "written")
register("topk kthvalue bincount histc nonzero unique _unique2 unique_consecutive searchsorted bucketize "
         "TopK SortTokens",  # the last two: triton_kernels' routing steps (vLLM's MoE), as their record names
         "movement", bytes=_inputs_only, zero_flops=True,
         source="comparisons and counts only: input read (the selected output is far smaller)")
