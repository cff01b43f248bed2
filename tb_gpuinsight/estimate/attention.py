"""FLOPs of fused attention ops, counting only the (query, key) pairs the kernel computes.

First principles, per (batch, query head) and per attended (query, key) pair:

* forward: ``S = Q K^T`` (2 x D_qk FLOPs) and ``O = P V`` (2 x D_v);
* backward: the fused kernels (flash, memory-efficient, cuDNN) recompute ``S = Q K^T`` and then
  compute ``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K`` and ``dK = dS^T Q``: 2 x (3 D_qk + 2 D_v),
  i.e. 2.5x the forward when D_qk == D_v. torch.utils.flop_counter's registry agrees on dense inputs
  but ignores every mask (and assumes max-length sequences for varlen), which is why these ops are
  not sent through it.

Masks (the softmax scale, dropout and the exp count nothing):

* causal, top-left aligned (query i attends keys j <= i): PyTorch's SDPA ``is_causal`` (docs: "upper
  left"), ``_cudnn_attention_*`` and efficient attention's ``custom_mask_type`` 1;
* causal, bottom-right aligned (query i attends keys j <= i + Sk - Sq): raw ``_flash_attention_*`` as
  in flash-attention >= 2.1, and ``custom_mask_type`` 2;
* a sliding window (flash's ``window_size_left/right``, -1 meaning unbounded; efficient attention's
  ``window_size``: the query and the ``window_size - 1`` keys before it) bounds the attended keys;
* an explicit ``attn_mask``/``attn_bias`` tensor is arbitrary: the kernel computes every pair (dense).

A square causal mask keeps ``S (S + 1) / 2`` of the ``S^2`` pairs (``(S+1)/(2S)`` of dense); pairs are
counted exactly (closed form, no loop over S), clamped to ``[0, Sk)`` per query.

Varlen (packed, ``cu_seqlens``) inputs count per sequence. The offsets' values are not recorded by the
profiler (only their shape, i.e. the number of sequences), so lengths are taken as the tightest
packing that fits the recorded totals and maxima: as many ``max_seqlen`` sequences as fit, then the
remainder. The result is flagged as an upper bound in the estimate's reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .args import OpArgs, UnknownEstimate, numel, read_bytes
from .registry import register

VARLEN_NOTE = ("upper bound: varlen sequence lengths are not recorded; "
               "sequences assumed packed at max_seqlen")


@dataclass(frozen=True)
class Mask:
    """Which keys a query attends: ``[i + offset - left, i + offset + right]`` within ``[0, Sk)``.

    ``left``/``right`` None means unbounded; ``bottom_right`` sets ``offset = Sk - Sq`` (else 0).
    """

    left: int | None = None
    right: int | None = None
    bottom_right: bool = False

    @property
    def dense(self) -> bool:
        return self.left is None and self.right is None


DENSE = Mask()


def causal_mask(bottom_right: bool, window_left: int | None = None) -> Mask:
    """A causal mask, optionally limited to ``window_left`` keys before the diagonal."""
    return Mask(left=window_left, right=0, bottom_right=bottom_right)


def _sum_clamped(start: int, n: int, lo: int, hi: int) -> int:
    """sum(min(max(start + i, lo), hi) for i in range(n)), in closed form (lo <= hi + 1)."""
    below = min(max(lo - start, 0), n)
    above = n - min(max(hi - start + 1, 0), n)
    middle = n - below - above
    first = start + below
    return below * lo + above * hi + middle * first + middle * (middle - 1) // 2


def attended_pairs(sq: int, sk: int, mask: Mask) -> int:
    """Number of (query, key) pairs a kernel computes for one (batch, head)."""
    if sq <= 0 or sk <= 0:
        return 0
    if mask.dense:
        return sq * sk
    offset = sk - sq if mask.bottom_right else 0
    far = sq + sk  # beyond any key index: an unbounded side
    hi = offset + (mask.right if mask.right is not None else far)
    lo = offset - (mask.left if mask.left is not None else far)
    # per query: clamp(i + hi, -1, sk - 1) - clamp(i + lo, 0, sk) + 1, which is 0 for a fully masked row
    return _sum_clamped(hi, sq, -1, sk - 1) - _sum_clamped(lo, sq, 0, sk) + sq


def attention_flops(batch_heads: int, pairs: int, d_qk: int, d_v: int, backward: bool) -> int:
    """FLOPs of ``batch_heads`` (batch x query heads) attention problems of ``pairs`` pairs each."""
    per_pair = 2 * (3 * d_qk + 2 * d_v) if backward else 2 * (d_qk + d_v)
    return batch_heads * pairs * per_pair


# --------------------------------------------------------------------------- op argument tables

@dataclass(frozen=True)
class AttentionSpec:
    """Where an attention op keeps its arguments (indices into the recorded argument list)."""

    query: int
    causal: int | None = None  # bool is_causal
    mask_tensor: int | None = None  # attn_mask / attn_bias: present -> dense
    mask_type: int | None = None  # efficient attention's custom_mask_type
    window: tuple[int, ...] = ()  # (left, right) for flash, (size,) for efficient attention
    cum_seq: int | None = None  # cu_seqlens_q; cu_seqlens_k follows
    max_seq: int | None = None  # max_seqlen_q; max_seqlen_k follows
    bshd: bool = False  # dense q/k/v are (batch, seq, heads, dim) instead of (batch, heads, seq, dim)
    bottom_right: bool = False  # causal alignment when Sq != Sk
    backward: bool = False
    dense_always: bool = False  # the math reference computes the full score matrix


SPECS: dict[str, AttentionSpec] = {
    "scaled_dot_product_attention": AttentionSpec(0, causal=5, mask_tensor=3),
    "_scaled_dot_product_flash_attention": AttentionSpec(0, causal=4),
    "_scaled_dot_product_flash_attention_for_cpu": AttentionSpec(0, causal=4, mask_tensor=5),
    "_scaled_dot_product_efficient_attention": AttentionSpec(0, causal=6, mask_tensor=3),
    "_scaled_dot_product_cudnn_attention": AttentionSpec(0, causal=6, mask_tensor=3),
    "_scaled_dot_product_fused_attention_overrideable": AttentionSpec(0, causal=5, mask_tensor=3),
    "_scaled_dot_product_attention_math": AttentionSpec(0, dense_always=True),
    "_scaled_dot_product_flash_attention_backward": AttentionSpec(1, causal=11, backward=True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": AttentionSpec(1, causal=7, mask_tensor=8,
                                                                          backward=True),
    "_scaled_dot_product_efficient_attention_backward": AttentionSpec(1, causal=11, mask_tensor=4,
                                                                      backward=True),
    "_scaled_dot_product_cudnn_attention_backward": AttentionSpec(1, causal=14, mask_tensor=8,
                                                                  backward=True),
    "_scaled_dot_product_fused_attention_overrideable_backward": AttentionSpec(1, causal=13, mask_tensor=4,
                                                                               backward=True),
    "_flash_attention_forward": AttentionSpec(0, causal=8, window=(11, 12), cum_seq=3, max_seq=5,
                                              bshd=True, bottom_right=True),
    "_flash_attention_backward": AttentionSpec(1, causal=11, window=(15, 16), cum_seq=6, max_seq=8,
                                               bshd=True, bottom_right=True, backward=True),
    "_efficient_attention_forward": AttentionSpec(0, mask_type=9, mask_tensor=3, window=(13,), cum_seq=4,
                                                  max_seq=6, bshd=True),
    "_efficient_attention_backward": AttentionSpec(1, mask_type=14, mask_tensor=4, window=(18,), cum_seq=6,
                                                   max_seq=8, bshd=True, backward=True),
    "_cudnn_attention_forward": AttentionSpec(0, causal=10, mask_tensor=3, cum_seq=4, max_seq=6),
    "_cudnn_attention_backward": AttentionSpec(1, causal=14, mask_tensor=8, cum_seq=9, max_seq=11,
                                               backward=True),
}
# _flash_attention_forward.quantized carries three descale tensors before scale: its window moves by 3.
_FLASH_QUANTIZED = AttentionSpec(0, causal=8, window=(14, 15), cum_seq=3, max_seq=5, bshd=True,
                                 bottom_right=True)


# flash-attn's own ops (``flash_attn::_flash_attn_*``, flash-attention 2.x ``torch.library`` schemas):
# (q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right, ...) and the varlen form
# (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal, window...);
# backward takes (dout, q, k, v, out, softmax_lse, dq, dk, dv, [cu_seqlens..., max_seqlen...,] dropout_p, ...).
SPECS.update({
    "flash_attn::_flash_attn_forward": AttentionSpec(0, causal=5, window=(6, 7), bshd=True, bottom_right=True),
    "flash_attn::_flash_attn_varlen_forward": AttentionSpec(0, causal=9, window=(10, 11), cum_seq=3, max_seq=5,
                                                             bshd=True, bottom_right=True),
    "flash_attn::_flash_attn_backward": AttentionSpec(1, causal=11, window=(12, 13), bshd=True, bottom_right=True,
                                                      backward=True),
    "flash_attn::_flash_attn_varlen_backward": AttentionSpec(1, causal=15, window=(16, 17), cum_seq=9, max_seq=11,
                                                             bshd=True, bottom_right=True, backward=True),
})


def _spec(op: str, args: OpArgs) -> AttentionSpec:
    if op == "_flash_attention_forward" and args.is_tensor(10):
        return _FLASH_QUANTIZED
    return SPECS[op]


def mask_of(spec: AttentionSpec, args: OpArgs) -> tuple[Mask, str]:
    """The mask the kernel applies, from the recorded flags, and a note when a flag was not recorded
    (then the dense count is used: an upper bound)."""
    if spec.dense_always or (spec.mask_tensor is not None and args.is_tensor(spec.mask_tensor)):
        return DENSE, ""
    try:
        return _flag_mask(spec, args), ""
    except UnknownEstimate as exc:
        return DENSE, f"upper bound: dense count, {exc}"


def _flag_mask(spec: AttentionSpec, args: OpArgs) -> Mask:
    if spec.mask_type is not None:
        kind = args.value(spec.mask_type, "custom_mask_type")
        if kind not in (0, 1, 2):
            raise UnknownEstimate(f"custom_mask_type {kind!r} not understood")
        size = _opt_int(args, spec.window[0]) if spec.window else None
        left = size - 1 if size is not None and size > 0 else None
        if kind == 0:
            return Mask(left=left, right=None) if left is not None else DENSE
        return causal_mask(bottom_right=kind == 2, window_left=left)
    causal = args.flag(spec.causal, "is_causal") if spec.causal is not None else False
    left, right = (_window_side(args, i) for i in spec.window) if spec.window else (None, None)
    if causal:
        return causal_mask(spec.bottom_right, left)
    return Mask(left, right, bottom_right=spec.bottom_right)


def _opt_int(args: OpArgs, i: int) -> int | None:
    value = args.opt_value(i)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _window_side(args: OpArgs, i: int) -> int | None:
    value = _opt_int(args, i)
    return value if value is not None and value >= 0 else None  # -1 / not recorded: unbounded


def estimate(op: str, args: OpArgs) -> tuple[int, str]:
    """(FLOPs, note) of one attention op; the note is "" unless the figure is a bound."""
    spec = _spec(op, args)
    q, k, v = (args.shape(spec.query + j, name) for j, name in enumerate(("query", "key", "value")))
    mask, note = mask_of(spec, args)
    if spec.cum_seq is not None and args.is_tensor(spec.cum_seq):
        return _varlen(spec, args, (q, k, v), mask), "; ".join(filter(None, (VARLEN_NOTE, note)))
    q, k, v = (_as_bhsd(s, name, spec.bshd) for s, name in ((q, "query"), (k, "key"), (v, "value")))
    pairs = attended_pairs(q[2], k[2], mask)
    return attention_flops(q[0] * q[1], pairs, q[3], v[3], spec.backward), note


def _as_bhsd(shape: tuple[int, ...], what: str, bshd: bool) -> tuple[int, ...]:
    """(batch, heads, seq, dim); SDPA also accepts (..., seq, dim): leading dims fold into heads."""
    if bshd:
        if len(shape) != 4:
            raise UnknownEstimate(f"dense attention {what} shape {shape} is not 4-D")
        return (shape[0], shape[2], shape[1], shape[3])
    if len(shape) == 4:
        return shape
    if len(shape) < 2:
        raise UnknownEstimate(f"{what} shape {shape} has fewer than 2 dims")
    prefix = 1
    for d in shape[:-2]:
        prefix *= d
    return (1, prefix) + shape[-2:]


def _varlen(spec: AttentionSpec, args: OpArgs, qkv: tuple, mask: Mask) -> int:
    """Packed (total_tokens, heads, dim) inputs: per-sequence pairs, lengths from the tightest packing."""
    q, k, v = qkv
    if len(q) != 3 or len(k) != 3 or len(v) != 3:
        raise UnknownEstimate(f"packed attention shapes {q}, {k}, {v} are not (tokens, heads, dim)")
    n = args.shape(spec.cum_seq, "cu_seqlens_q")[0] - 1
    max_q = args.value(spec.max_seq, "max_seqlen_q")
    max_k = args.value(spec.max_seq + 1, "max_seqlen_k")
    if not all(isinstance(x, int) and x > 0 for x in (max_q, max_k)) or n <= 0:
        raise UnknownEstimate(f"varlen attention: max_seqlen {max_q!r}/{max_k!r} or {n} sequences not usable")
    pairs = sum(attended_pairs(sq, sk, mask)
                for sq, sk in zip(packed_lengths(q[0], max_q, n), packed_lengths(k[0], max_k, n)))
    return attention_flops(q[1], pairs, q[2], v[2], spec.backward)


def packed_lengths(total: int, longest: int, count: int) -> list[int]:
    """``count`` lengths summing to ``total`` (at most), each <= ``longest``, longest first."""
    full, rest = divmod(total, longest)
    lengths = [longest] * min(full, count)
    if len(lengths) < count and rest:
        lengths.append(rest)
    return lengths + [0] * (count - len(lengths))


def is_attention(op: Any) -> bool:
    """True for the ops this module estimates."""
    return op in SPECS


# --------------------------------------------------------------------------- bytes

PAGED_NOTE = ("upper bound: per-sequence lengths are not recorded; sequences assumed packed at max_seqlen and "
              "every indexed KV page full")

ATTENTION_FORWARD_OPS = frozenset(op for op, spec in SPECS.items() if not spec.backward)
ATTENTION_BACKWARD_OPS = frozenset(op for op, spec in SPECS.items() if spec.backward)


def attention_bytes(args: OpArgs, tensors: list, out_size: int, backward: bool, query: int = 0) -> float:
    """All tensor args read; forward writes out, backward writes dq, dk, dv."""
    read = read_bytes(tensors)  # an expanded attn_mask reads its storage
    q = args.shape(query, "query")
    k = args.shape(query + 1, "key")
    v = args.shape(query + 2, "value")
    written = numel(q) + numel(k) + numel(v) if backward else numel(q[:-1]) * v[-1]
    return read + written * out_size


# flash-attn's varlen forward with a paged KV cache: block_table at 15, k/v as [blocks, block_size, Hk, D].
_BLOCK_TABLE = {"flash_attn::_flash_attn_varlen_forward": 15}


def _paged_varlen(op: str, args: OpArgs) -> tuple[int, tuple[int, ...]] | None:
    """(KV tokens the block table can name, the cache shape) when a varlen op reads a paged cache, else None."""
    at = _BLOCK_TABLE.get(op)
    table = args.opt_shape(at) if at is not None else None
    cache = args.opt_shape(1)
    if table is None or cache is None or len(cache) != 4:
        return None
    return numel(table) * cache[1], cache


def _fused_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float | tuple[float, str]:
    spec = _spec(op, args)
    paged = _paged_varlen(op, args)
    if paged is not None:  # q read, out written, the KV tokens the block table names read (not the cache)
        tokens, cache = paged
        size = args.compute_itemsize() or 2
        q = args.shape(0, "query")
        small = sum(numel(s) * b for i, s, b in tensors if i >= 3)
        return float(2 * numel(q) * size + 2 * tokens * numel(cache[2:]) * size + small), PAGED_NOTE
    return attention_bytes(args, tensors, args.compute_itemsize() or 4, spec.backward, spec.query)


def _fused_flops(op: str, args: OpArgs, out_dims: Any) -> tuple[int, str]:
    paged = _paged_varlen(op, args)
    if paged is not None:
        spec, (tokens, cache) = _spec(op, args), paged
        q, v = args.shape(0, "query"), cache
        mask, note = mask_of(spec, args)
        n = args.shape(spec.cum_seq, "cu_seqlens_q")[0] - 1
        max_q, max_k = args.value(spec.max_seq, "max_seqlen_q"), args.value(spec.max_seq + 1, "max_seqlen_k")
        if len(q) != 3 or n <= 0 or not all(isinstance(x, int) and x > 0 for x in (max_q, max_k)):
            raise UnknownEstimate("paged varlen attention: sequence count or max_seqlen not recorded")
        pairs = sum(attended_pairs(sq, sk, mask) for sq, sk in zip(packed_lengths(q[0], max_q, n),
                                                                   packed_lengths(tokens, max_k, n)))
        return attention_flops(q[1], pairs, q[2], v[-1], False), "; ".join(filter(None, (PAGED_NOTE, note)))
    return estimate(op, args)


register(SPECS, "attention", flops=_fused_flops, bytes=_fused_bytes,
         source="first principles: 4 x D per attended (query, key) pair forward, 2.5x backward; masks counted")


# --------------------------------------------------------------------------- paged attention


def _kv_token_bytes(cache: tuple[int, ...], size: int, layout: str) -> tuple[int, int]:
    """(tokens per page, bytes per cached token) of a paged K or V cache."""
    if layout == "tokens":  # [total_k, heads, dim]: one token per index
        return 1, numel(cache[1:]) * size
    if len(cache) == 5:  # [blocks, heads, dim / x, block_size, x] (K) or [blocks, heads, block / x, dim, x] (V)
        block = cache[3] if layout == "k5" else cache[2] * cache[4]
        return block, numel(cache[1:]) // max(block, 1) * size
    if len(cache) == 4:  # [blocks, heads, dim, block_size] (vLLM V) or [blocks, block_size, heads, dim]
        block = cache[3] if layout == "v4" else cache[1]
        return block, numel(cache[1:]) // max(block, 1) * size
    raise UnknownEstimate(f"paged KV cache shape {cache} not understood")


def _bool_after(args: OpArgs, start: int, nth: int) -> bool | None:
    """The nth recorded bool among the concrete arguments from ``start`` on (schemas move them between versions)."""
    seen = 0
    for i in range(start, len(args.dims)):
        value = args.opt_value(i)
        if isinstance(value, bool) or value in ("True", "False"):
            if seen == nth:
                return value is True or value == "True"
            seen += 1
    return None


def _batch_prefill(op: str, args: OpArgs) -> dict:
    """aiter ``mha_batch_prefill(q[total_q, hq, d], k, v, cu_seqlens_q, kv_indptr, kv_page_indices, max_seqlen_q,
    max_seqlen_k, p_dropout, softmax_scale, [logits_soft_cap,] zero_tensors, is_causal, ...)``: the kernel reads
    only the KV tokens the page indices name."""
    q, k, v = (args.shape(i, n) for i, n in ((0, "query"), (1, "key cache"), (2, "value cache")))
    pages = numel(args.shape(5, "kv_page_indices"))
    size_k, size_v = (b for i, _, b in sorted(t for t in args.tensor_items() if t[0] in (1, 2)))
    layout = "tokens" if len(k) == 3 else "k5"
    tokens, k_bytes = _kv_token_bytes(k, size_k, layout)
    _, v_bytes = _kv_token_bytes(v, size_v, "tokens" if len(v) == 3 else "v5")
    causal = _bool_after(args, 8, 1)  # zero_tensors, then is_causal
    return {"q": q, "kv_tokens": pages * tokens, "kv_bytes": pages * tokens * (k_bytes + v_bytes),
            "seqs": args.shape(3, "cu_seqlens_q")[0] - 1, "max_q": args.value(6, "max_seqlen_q"),
            "max_k": args.value(7, "max_seqlen_k"), "causal": causal, "d_v": v[-1] if len(v) == 3 else q[-1]}


def _paged_flops(op: str, args: OpArgs, out_dims: Any) -> tuple[int, str]:
    p = _batch_prefill(op, args)
    q, n = p["q"], p["seqs"]
    if not all(isinstance(x, int) and x > 0 for x in (p["max_q"], p["max_k"], n)) or len(q) != 3:
        raise UnknownEstimate("paged attention: sequence count or max_seqlen not recorded")
    mask = causal_mask(bottom_right=True) if p["causal"] else DENSE
    pairs = sum(attended_pairs(sq, sk, mask) for sq, sk in zip(packed_lengths(q[0], p["max_q"], n),
                                                               packed_lengths(p["kv_tokens"], p["max_k"], n)))
    note = PAGED_NOTE if p["causal"] is not None else PAGED_NOTE + "; causal flag not recorded (dense assumed)"
    return attention_flops(q[1], pairs, q[2], p["d_v"], False), note


def _paged_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    p = _batch_prefill(op, args)
    q_size = next(b for i, _, b in tensors if i == 0)
    small = sum(numel(s) * b for i, s, b in tensors if i >= 3)  # offsets and page indices
    return float(2 * numel(p["q"]) * q_size + p["kv_bytes"] + small), ""


register("aiter::mha_batch_prefill *::mha_batch_prefill", "attention", flops=_paged_flops, bytes=_paged_bytes,
         source="first principles: q read, out written, only the KV tokens named by kv_page_indices read")


def _cache_by_name(op: str, args: OpArgs, out_dims: Any) -> None:
    raise UnknownEstimate("the KV cache and the context lengths are not arguments of this op (found by layer "
                          "name): attention FLOPs and the KV-cache read are unknown; the attention kernel's own "
                          "launching op (flash_attn, paged_attention, ...) rates it when recorded; a model config "
                          "whose every layer is sliding-window (sliding_window, layer_types) bounds it")


def _cache_by_name_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> None:
    _cache_by_name(op, args, out_dims)


register("vllm::unified_attention vllm::unified_attention_with_output sglang::unified_attention_with_output "
         "sglang::unified_attention_with_output_and_lse", "attention", flops=_cache_by_name,
         bytes=_cache_by_name_bytes, source="vLLM / SGLang schema (query, key, value, output, layer_name or id, ...)")


# vLLM's paged decode attention: paged_attention_v1(out, query[seqs, Hq, D], key_cache[blocks, Hk, D/x, block, x],
# value_cache[blocks, Hk, D, block], num_kv_heads, scale, block_tables[seqs, max_blocks], seq_lens, block_size,
# max_seq_len, ...); v2 adds exp_sums, max_logits and tmp_out before the query (indices shift by 3).
_PAGED_DECODE = {"paged_attention_v1": 1, "paged_attention_v2": 4}
DECODE_NOTE = ("upper bound: per-sequence context lengths are not recorded; every sequence counted at "
               "max_seq_len (at most its block table's capacity)")


def _decode(op: str, args: OpArgs) -> dict:
    first = _PAGED_DECODE[op.rsplit("::", 1)[-1]]
    q = args.shape(first, "query")
    k_cache, v_cache = args.shape(first + 1, "key cache"), args.shape(first + 2, "value cache")
    tables = args.shape(first + 5, "block_tables")
    block = args.value(first + 7, "block_size")
    longest = args.value(first + 8, "max_seq_len")
    if len(q) != 3 or len(tables) != 2 or not all(isinstance(x, int) and x > 0 for x in (block, longest)):
        raise UnknownEstimate(f"paged attention arguments not understood: query {q}, block_tables {tables}")
    context = min(longest, tables[1] * block)
    sizes = {i: b for i, _, b in args.tensor_items()}
    per_token = (numel(k_cache[1:]) * sizes.get(first + 1, 2) + numel(v_cache[1:]) * sizes.get(first + 2, 2)) // block
    return {"q": q, "seqs": q[0], "context": context, "kv_bytes": q[0] * context * per_token,
            "q_size": sizes.get(first, 2)}


def _decode_flops(op: str, args: OpArgs, out_dims: Any) -> tuple[int, str]:
    d = _decode(op, args)
    q = d["q"]
    return attention_flops(d["seqs"] * q[1], d["context"], q[2], q[2], False), DECODE_NOTE


def _decode_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    """The query read and the output written, the KV cache of every context token read (not the whole cache),
    the block tables and lengths read."""
    d = _decode(op, args)
    small = sum(numel(s) * b for _, s, b in tensors if len(s) <= 2)  # block tables, sequence lengths, scales
    return float(2 * numel(d["q"]) * d["q_size"] + d["kv_bytes"] + small), DECODE_NOTE


register([f"*::{name}" for name in _PAGED_DECODE], "attention", flops=_decode_flops, bytes=_decode_bytes,
         source="vLLM schema paged_attention_v1/v2: each query attends its context through the block table")
