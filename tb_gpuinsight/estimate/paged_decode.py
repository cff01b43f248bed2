"""Paged decode attention of ROCm's aiter library (what SGLang's and vLLM's aiter attention backends call): each
query reads the KV pages its block table or page-index list names, never the whole cache.

The cache is an argument of these ops (the engine's KV pool: every layer's pages, gigabytes), so charging every
argument counts the pool once per call, tens of times the physical read. Instead, per call:

    KV tokens read = pages named x page size     (an upper bound: the list may be a buffer the engine sized for its
                                                  longest contexts; one naming the whole cache or more is such a
                                                  buffer, not this call's pages: then unknown)
    FLOPs = 2 x (D + D_v) x Hq x query rows per sequence x KV tokens     (Q K^T and P V)
    bytes = query read + output written + KV tokens x (K + V bytes per token) + page lists and lengths read

Schemas (aiter `ops/attention.py`; the positions are those recorded in `Input Dims`):
- `paged_attention_ragged(out, workspace, query[S, Hq, D], key_cache, value_cache, scale, kv_indptr[B+1],
  kv_page_indices[P], kv_last_page_lens[B], block_size, ...)`: P pages named.
- `paged_attention_v1(out, workspace, query, key_cache, value_cache, scale, block_tables[B, M], cu_query_lens,
  context_lens[B], max_context_len, alibi, kv_cache_dtype, kv_cache_layout, ...)`: each sequence at most
  min(max_context_len, M pages).
- `pa_fwd_asm(Q, K[blocks, Hk, D/x, page, x], V, block_tables[B, M], context_lens[B], max_num_blocks, ...)` and the
  op it wraps, `_pa_fwd_asm` (same arguments): each sequence at most its block table's M pages.
"""
from __future__ import annotations

from typing import Any, Optional

from .args import OpArgs, UnknownEstimate, numel
from .registry import register

NAMED = ("upper bound: the KV tokens the page list names (the engine may size it for its longest contexts); "
         "per-sequence lengths are not recorded")
TABLE = ("upper bound: every sequence counted at its block table's capacity{cap}; per-sequence context lengths "
         "are not recorded")


def _sizes(args: OpArgs) -> dict:
    return {i: b or 2 for i, _, b in args.tensor_items()}


def _per_token(cache: tuple, size: int, page: int) -> float:
    """Bytes one cached token takes in a paged K or V cache of any layout (a page holds `page` tokens)."""
    return numel(cache[1:]) * size / page


def _page_of(cache: tuple, layout: Optional[str]) -> int:
    """Tokens per page of a paged cache: [blocks, Hk, D/x, page, x] (5-D), [blocks, page, Hk, D] (NHD) or
    [blocks, Hk, page, D] (HND)."""
    if len(cache) == 5:
        return cache[3]
    if len(cache) == 4 and layout in ("NHD", "HND"):
        return cache[1] if layout == "NHD" else cache[2]
    raise UnknownEstimate(f"paged KV cache shape {list(cache)} (layout {layout or 'not recorded'}) not understood")


def _problem(args: OpArgs, q_at: int, tokens: float, page: int, note: str) -> dict:
    q, k, v = (args.shape(i, n) for i, n in ((q_at, "query"), (q_at + 1, "key cache"), (q_at + 2, "value cache")))
    if len(q) != 3:
        raise UnknownEstimate(f"query {list(q)} is not [rows, heads, head dim]")
    sizes = _sizes(args)
    capacity = k[0] * page
    if tokens >= capacity:  # a CUDA-graph buffer sized for max batch x max context, not what this call reads
        raise UnknownEstimate(f"the page list or block tables name {tokens:,.0f} KV tokens, the whole cache "
                              f"({capacity:,} tokens) or more: a buffer sized for the longest contexts, not this "
                              "call's pages; per-sequence lengths are not recorded")
    kv_tokens = tokens
    per_token = _per_token(k, sizes.get(q_at + 1, 2), page) + _per_token(v, sizes.get(q_at + 2, 2), page)
    return {"q": q, "kv_tokens": kv_tokens, "kv_bytes": kv_tokens * per_token, "q_size": sizes.get(q_at, 2),
            "d_v": v[-1] if len(v) == 4 else q[2], "note": note, "q_at": q_at}


def _ragged(args: OpArgs) -> dict:
    indptr, pages = args.shape(6, "kv_indptr"), args.shape(7, "kv_page_indices")
    page = args.value(9, "block_size")
    if not isinstance(page, int) or page <= 0 or len(indptr) != 1:
        raise UnknownEstimate(f"paged_attention_ragged: block_size {page!r} / kv_indptr {list(indptr)} not understood")
    p = _problem(args, 2, numel(pages) * page, page, NAMED)
    p["seqs"] = max(indptr[0] - 1, 1)
    return p


def _table(args: OpArgs, q_at: int, tables_at: int, longest: Optional[int], layout: Optional[str]) -> dict:
    tables = args.shape(tables_at, "block_tables")
    k = args.shape(q_at + 1, "key cache")
    page = _page_of(k, layout)
    if len(tables) != 2 or page <= 0:
        raise UnknownEstimate(f"block tables {list(tables)} not understood")
    context = tables[1] * page if not longest else min(longest, tables[1] * page)
    cap = f" (min(max_context_len {longest}, {tables[1]} pages x {page}))" if longest else \
        f" ({tables[1]} pages x {page} tokens)"
    p = _problem(args, q_at, tables[0] * context, page, TABLE.format(cap=cap))
    p["seqs"] = tables[0]
    return p


def _v1(args: OpArgs) -> dict:
    longest = args.opt_value(9)
    layout = args.opt_value(12)
    return _table(args, 2, 6, longest if isinstance(longest, int) and longest > 0 else None,
                  layout if isinstance(layout, str) else None)


def _asm(args: OpArgs) -> dict:
    return _table(args, 0, 3, None, None)


_LAYOUTS = {"paged_attention_ragged": _ragged, "paged_attention_v1": _v1, "pa_fwd_asm": _asm, "_pa_fwd_asm": _asm}


def _read(op: str) -> Any:
    return _LAYOUTS[op.rsplit("::", 1)[-1]]


def _flops(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    p = _read(op)(args)
    q = p["q"]
    rows_per_seq = max(q[0] // p["seqs"], 1)  # 1 in decode; more with multi-token prediction
    return 2.0 * (q[2] + p["d_v"]) * q[1] * rows_per_seq * p["kv_tokens"], p["note"]


def _bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    p = _read(op)(args)
    # page lists, lengths and scales after the caches (not the output or a workspace before the query)
    small = sum(numel(s) * b for i, s, b in tensors if i > p["q_at"] + 2 and len(s) <= 2 and b)
    return float(2 * numel(p["q"]) * p["q_size"] + p["kv_bytes"] + small), p["note"]


register("aiter::paged_attention_ragged *::paged_attention_ragged aiter::paged_attention_v1 *::pa_fwd_asm "
         "*::_pa_fwd_asm", "attention", flops=_flops, bytes=_bytes,
         source="aiter schemas: query read, output written, only the KV pages the block table or page list names")
