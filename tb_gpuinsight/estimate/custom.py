"""Custom ops without a registry entry (a namespace other than aten/prim: vLLM ``_C::``, ``fbgemm::``, a user's
``mylib::``): their bytes are their inputs except the ones they mutate, plus their outputs when recorded, and the
reason says "partial:". FLOPs stay unknown.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, checked_tensors, is_shape, numel, read_bytes
from .schemas import mutated

def is_custom(name: Any) -> bool:
    """A namespaced op outside aten/prim (vLLM's _C_cache_ops::..., fbgemm::..., a user's mylib::...)."""
    return isinstance(name, str) and "::" in name and not name.startswith(("aten::", "prim::", "prims::"))


_PRESUMED_BUFFER_RATIO = 16


def custom_bytes(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    """Bytes of a custom op without an entry: its non-mutated inputs plus outputs (flagged partial)."""
    tensors = checked_tensors(op, args)
    base = op.rsplit("::", 1)[-1].split(".", 1)[0]
    mutated, how = _mutated_args(op, base, tensors)
    read = read_bytes([t for t in tensors if t[0] not in mutated])
    written = numel(tuple(out_dims)) * (args.compute_itemsize() or 4) if is_shape(out_dims) else 0
    parts = ["partial: custom op without a byte rule"]
    if mutated:
        parts.append(f"arguments {sorted(mutated)} {how}, their writes not counted")
    if not written:
        parts.append("outputs not recorded")
    return float(read + written), "; ".join(parts)


def _mutated_args(op: str, base: str, tensors: list) -> tuple[frozenset[int], str]:
    """Arguments not to charge as read: those a custom op mutates per its schema when torch knows it;
    else, when its name says it updates or looks up into something (``cache``, ``update``, ``write``,
    ``embedding``, ``lookup``, a trailing ``_``), the tensors far larger than all the smaller ones together
    (caches, embedding tables and their optimizer state: touched only where indexed). The name condition
    keeps a GEMM's weight (also far larger than its input, e.g. vllm::rocm_unquantized_gemm at decode,
    which does read all of it) counted as read."""
    schema_mutated = mutated(op)
    if schema_mutated is not None:
        return schema_mutated, "are mutated (schema)"
    if not (base.endswith("_") or any(hint in base.lower() for hint in _SPARSE_ACCESS_HINTS)):
        return frozenset(), ""
    return _far_larger(tensors), (f"are over {_PRESUMED_BUFFER_RATIO}x the other inputs, presumed tables or "
                                  "buffers touched only where indexed")


_SPARSE_ACCESS_HINTS = ("cache", "update", "write", "inplace", "in_place", "embedding", "lookup")


def _far_larger(tensors: list) -> frozenset[int]:
    """Indices of the tensors above the last size gap: a tensor over 16x the sum of all smaller ones."""
    sized = sorted((numel(s) * b, i) for i, s, b in tensors)
    smaller, gap = 0, len(sized)
    for rank, (size, _) in enumerate(sized):
        if smaller > 0 and size > _PRESUMED_BUFFER_RATIO * smaller:
            gap = rank
        smaller += size
    return frozenset(i for _, i in sized[gap:])
