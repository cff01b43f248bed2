"""FlashAttention-3's forward op as SGLang (`sgl_kernel::fwd`), vLLM (`_vllm_fa3_C::fwd`) and flash-attn
(`flash_attn_3::fwd`) register it: SGLang's default attention backend on Hopper, for prefill, extend and decode.

Arguments (flash-attention `hopper/flash_api.cpp` `mha_fwd`; positions as recorded in `Input Dims`): q 0, k 1, v 2,
k_new 3, v_new 4, q_v 5, out 6, cu_seqlens_q 7, cu_seqlens_k 8, cu_seqlens_k_new 9, seqused_q 10, seqused_k 11,
max_seqlen_q 12, max_seqlen_k 13, page_table 14, ..., softmax_scale 23, is_causal 24.

- Paged KV cache (decode and extend over SGLang's pool: k `[pages, page_size, Hk, D]`, `page_table[B, P]`): each
  sequence reads at most its page table's `P x page_size` tokens (an upper bound: the lengths, `seqused_k`, are a
  tensor); a page table naming the whole cache or more is a CUDA-graph buffer sized for the longest contexts, not
  this call's pages: unknown. Bytes: q read, out written, those KV tokens, the page table and lengths.
- Varlen (k `[total_k, Hk, D]`, cu_seqlens): the sequences packed at their max lengths, causal where flagged, as
  flash-attn's varlen forward (`attention.py`); bytes: q, k, v read and out written once.
FLOPs `2 x (D + D_v) x Hq` per attended (query, key) pair.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel
from .attention import DENSE, attended_pairs, causal_mask, packed_lengths
from .registry import register

PAGED = ("upper bound: every sequence at its page table's capacity ({pages} pages x {page} tokens); per-sequence "
         "lengths (seqused_k) are not recorded")
VARLEN = "upper bound: varlen sequence lengths are not recorded; sequences assumed packed at max_seqlen"


def _problem(args: OpArgs) -> dict:
    q, k, v = (args.shape(i, n) for i, n in ((0, "q"), (1, "k"), (2, "v")))
    heads, d, d_v = q[-2], q[-1], v[-1]
    rows = numel(q[:-2])
    sizes = {i: b or 2 for i, _, b in args.tensor_items()}
    small = sum(numel(s) * (b or 4) for i, s, b in args.tensor_items() if i >= 7 and len(s) <= 2)
    base = {"heads": heads, "d": d, "d_v": d_v, "q_bytes": 2 * numel(q) * sizes.get(0, 2), "small": small}
    table = args.opt_shape(14)
    if len(k) == 4 and table and len(table) == 2:  # paged KV cache
        seqs, pages = table
        page = k[1]
        tokens, capacity = seqs * pages * page, k[0] * page
        if tokens >= capacity:
            raise UnknownEstimate(f"the page table names {tokens:,} KV tokens, the whole cache ({capacity:,}) or "
                                  "more: a buffer sized for the longest contexts, not this call's pages; "
                                  "per-sequence lengths are not recorded")
        per_token = numel(k[2:]) * sizes.get(1, 2) + numel(v[2:]) * sizes.get(2, 2)
        per_seq_q = max(rows // max(seqs, 1), 1)
        return {**base, "pairs": seqs * per_seq_q * pages * page, "kv_bytes": tokens * per_token,
                "note": PAGED.format(pages=pages, page=page)}
    if len(k) == 3 and len(q) == 3:  # varlen, sequences packed along dim 0
        cu = args.shape(7, "cu_seqlens_q")
        longest_q, longest_k = args.value(12, "max_seqlen_q"), args.value(13, "max_seqlen_k")
        count = cu[0] - 1 if len(cu) == 1 else 0
        if count <= 0 or not all(isinstance(x, int) and x > 0 for x in (longest_q, longest_k)):
            raise UnknownEstimate("FA3 varlen: sequence count or max_seqlen not recorded")
        causal = args.opt_value(24)
        mask = causal_mask(bottom_right=True) if causal in (True, "True") else DENSE
        pairs = sum(attended_pairs(sq, sk, mask) for sq, sk in zip(packed_lengths(q[0], longest_q, count),
                                                                   packed_lengths(k[0], longest_k, count)))
        kv = numel(k) * sizes.get(1, 2) + numel(v) * sizes.get(2, 2)
        return {**base, "pairs": pairs, "kv_bytes": kv, "note": VARLEN}
    raise UnknownEstimate(f"FA3 q {list(q)} / k {list(k)} layout not understood")


def _flops(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    p = _problem(args)
    return 2.0 * (p["d"] + p["d_v"]) * p["heads"] * p["pairs"], p["note"]


def _bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    p = _problem(args)
    return float(p["q_bytes"] + p["kv_bytes"] + p["small"]), p["note"]


register("sgl_kernel::fwd _vllm_fa3_C::fwd flash_attn_3::fwd", "attention", flops=_flops, bytes=_bytes,
         source="flash-attention hopper mha_fwd schema: q, out, the KV tokens the page table or cu_seqlens name")
