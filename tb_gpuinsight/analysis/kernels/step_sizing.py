"""Attention over a KV cache found by layer name, sized from the serving step that ran it.

vLLM's `unified_attention*(query, key, value, output, layer_name)` records the step's new tokens, not the KV cache
or the context lengths (they are attention metadata). vLLM's step annotation (`analysis/serving.py`) gives them for
the whole step: `sq` query tokens, `sk` KV tokens, `sqsq` = sum of sq^2 and `sqsk` = sum of sq x sk over the
step's requests. Per attention call (one layer), with the recorded query `[T, Hq, D]` and key `[T, Hkv, D]`:

    (query, key) pairs = sqsk - (sqsq - sq) / 2     (causal: each query token attends the keys up to its own)
    FLOPs = 4 x Hq x D x pairs                       (Q K^T and P V, 2 FLOPs per multiply-add)
    bytes = query read + output written + sk x Hkv x D x 2 (K and V) x element size

Exact for a full-attention layer. A sliding-window layer attends at most its window: with the model's config
(`sliding_window`, `layer_types`) each call takes the mean over the model's layers, with the sliding layers bounded
by the window (an upper bound); without a config the figure is that of full attention, said so (an upper bound for
a model with sliding layers). Each attention call is one compute kernel of the op (split-KV reductions are
helpers): the kernel takes the call's figures.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np

from ...estimate.args import OpArgs, numel
from ...estimate.model_config import ModelConfig
from ...trace.table import Table
from ..serving import serving_annotations
from .roles import COMPUTE, ROLES

ATTENTION_OPS = ("vllm::unified_attention", "vllm::unified_attention_with_output")
SOURCE = "step annotation"


def size_attention_from_steps(annotations: Table, acts: Table, shape_of: Callable[[int], Any],
                              config: Optional[ModelConfig] = None, prefix: str = "") -> int:
    """Fill the FLOPs and bytes of unified-attention compute kernels without FLOPs from the vLLM step they ran
    in (`shape_of(op_shape code)` -> (dims, types, concrete)); `prefix` starts their reasons and keeps their
    source (a graph capture's). Returns how many kernels were sized."""
    start, _, meta, _ = serving_annotations(annotations)
    if not len(start) or not any(m.get("attended_pairs") is not None for m in meta):
        return 0
    from .subop_sizing import EstimateWriter
    from ...estimate.flops import OpEstimate

    names = acts.strings.get("op_name", [])
    wanted = [i for i, n in enumerate(names) if n in ATTENTION_OPS]
    rows = np.flatnonzero(np.isin(acts["op_name"], wanted) & np.isnan(acts["flops"]) &
                          (acts["role"] == ROLES.index(COMPUTE)) & (acts["op_shape"] >= 0))
    step = np.searchsorted(start, acts["ts"][rows], side="right") - 1
    writer, memo, sized = EstimateWriter(acts), {}, 0
    for row, s in zip(rows.tolist(), step.tolist()):
        if s < 0 or meta[s].get("attended_pairs") is None:
            continue
        key = (s, int(acts["op_shape"][row]))
        if key not in memo:
            memo[key] = _per_call(meta[s], shape_of(key[1]), config)
        figures = memo[key]
        if figures is None:
            continue
        flops, nbytes, note, dtype = figures
        source = acts["source"][row]
        writer.write(row, OpEstimate(flops, prefix + note, nbytes, prefix + note, dtype))
        if prefix:
            acts["source"][row] = source
        sized += 1
    return sized


def _per_call(step: Dict[str, Any], shape: Any, config: Optional[ModelConfig]):
    """(FLOPs, bytes, note, dtype) of one layer's attention in this step, or None when the shapes do not say."""
    if not shape:
        return None
    args = OpArgs(*shape)
    q, k = args.opt_shape(0), args.opt_shape(1)
    if not q or not k or len(q) != 3 or len(k) != 3:
        return None
    _, heads, dim = q
    kv_heads = k[1]
    size = args.compute_itemsize() or 2
    sq, sk = step["tokens"] or 0, step["kv_tokens"] or 0
    pairs = step["attended_pairs"] - (step.get("sqsq", sq) - sq) / 2
    full_flops, full_kv = 4.0 * heads * dim * pairs, float(sk)
    flops, kv, note = full_flops, full_kv, (f"{SOURCE} (vLLM sq {sq}, sk {sk}): causal (query, key) pairs of "
                                            "the step's requests, every layer over the full context")
    window = config.get("sliding_window") if config is not None else None
    if window and config.layer_types:
        share = sum("sliding" in t for t in config.layer_types) / len(config.layer_types)
        flops = (1 - share) * full_flops + share * 4.0 * heads * dim * min(pairs, sq * window)
        kv = (1 - share) * full_kv + share * min(full_kv, (step["batch"] or 0) * window)
        note = (f"upper bound: {SOURCE} (vLLM sq {sq}, sk {sk}) and model config ({config.key('sliding_window')} "
                f"{window}, layer_types): mean over the layers, sliding ones at most the window")
    elif config is None:
        note = "upper bound: " + note + " (a sliding-window layer attends fewer: give the model config)"
    nbytes = 2 * numel(q) * size + kv * 2 * kv_heads * dim * size
    return flops, float(nbytes), note, args.compute_dtype()


__all__ = ["size_attention_from_steps", "ATTENTION_OPS"]
