"""Ops whose weights or KV cache are found by layer name, sized from the model's config (`model_config.py`).

One rule per op (a registry like `registry.py`'s, keyed by op name), each reading the recorded activations for the
token count and the config for the hidden sizes. Their figures carry the provenance "model config (<keys used>)".

MoE (vLLM `moe_forward(hidden_states[T, H'], router_logits[T, E], layer_name)`): a gated expert MLP per routed
token, gate and up projections `H x 2I` and the down projection `I x H`, so `2 x T x k x 3 x H x I` FLOPs; each
token runs exactly its top-k experts, so the count is exact for the recorded tokens. `H'` may exceed `hidden_size`
when the kernel pads it (gpt-oss' 2880 -> 3072 for MXFP4 weights): the recorded width is used and the padding said;
`intermediate_size` is the config's (a padding of it is not recorded). Bytes: the weights of the experts the tokens
can reach (`min(E, T x k)` of E: routing is not recorded, an upper bound) in the quantized format, the tokens read
and written, the intermediates written and read once.

Attention over a KV cache found by layer name (vLLM `unified_attention*`): the context lengths live in attention
metadata, not arguments. Only a model whose every layer is a sliding-window layer bounds them (`sliding_window`):
`4 x T x W x Hq x D` FLOPs at most, the query read, the window's K and V read per query token, the output written.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional

from .args import OpArgs, UnknownEstimate, numel
from .flops import OpEstimate
from .model_config import ModelConfig, weight_bytes_per_value

Rule = Callable[[OpArgs, ModelConfig], OpEstimate]
_RULES: Dict[str, Rule] = {}
PROVENANCE = "model config"
MOE_KEYS = ("hidden", "intermediate", "experts", "top_k")
ATTENTION_KEYS = ("sliding_window", "layer_types")


def has_rule(name: str) -> bool:
    """A config rule exists for this op name."""
    return name in _RULES


def needed_keys(name: str) -> str:
    """The config keys that would rate this op, for reasons given without a config."""
    rule = _RULES.get(name)
    return getattr(rule, "keys", "") if rule is not None else ""


def size_from_config(name: str, dims: Any, types: Any, concrete: Any, config: ModelConfig) -> Optional[OpEstimate]:
    """The op's figures from the config (None when no rule covers the op); never raises: an op the config cannot
    size gets unknown figures with the reason."""
    rule = _RULES.get(name)
    if rule is None:
        return None
    try:
        return rule(OpArgs(dims, types, concrete), config)
    except UnknownEstimate as exc:
        reason = f"{PROVENANCE} ({config.label()}): {exc}"[:300]
        return OpEstimate(None, reason, None, reason, None)
    except Exception as exc:  # a malformed record must not stop the analysis
        reason = f"{PROVENANCE}: sizing failed: {type(exc).__name__}: {exc}"[:300]
        return OpEstimate(None, reason, None, reason, None)


def _register(names: str, keys: str) -> Callable[[Rule], Rule]:
    def add(rule: Rule) -> Rule:
        rule.keys = keys  # type: ignore[attr-defined]
        for name in names.split():
            _RULES[name] = rule
        return rule
    return add


def _need(config: ModelConfig, names: tuple) -> Dict[str, int]:
    missing = [config.key(n) for n in names if config.get(n) is None]
    if missing:
        raise UnknownEstimate(f"the config lacks {', '.join(missing)}")
    return {n: int(config.get(n)) for n in names}


def _split(config: ModelConfig, name: str) -> int:
    return max(1, int(config.get(name) or 1))


@_register("vllm::moe_forward vllm::moe_forward_shared",
           "hidden_size, moe_intermediate_size (or intermediate_size), num_local_experts (or num_experts), "
           "num_experts_per_tok")
def _moe(args: OpArgs, config: ModelConfig) -> OpEstimate:
    c = _need(config, MOE_KEYS)
    x, logits = args.shape(0, "hidden_states"), args.shape(1, "router_logits")
    if len(x) < 2 or len(logits) < 2:
        raise UnknownEstimate(f"hidden states {x} / router logits {logits} not understood")
    width, tokens = x[-1], numel(x[:-1])
    if logits[-1] != c["experts"]:
        raise UnknownEstimate(f"the router scores {logits[-1]} experts but {config.key('experts')} is "
                              f"{c['experts']}: a config of another model?")
    if width < c["hidden"] or width > 2 * c["hidden"]:
        raise UnknownEstimate(f"the recorded activation is {width} wide but {config.key('hidden')} is {c['hidden']}")
    tp, ep = _split(config, "tensor_parallel"), _split(config, "expert_parallel")
    inter = math.ceil(c["intermediate"] / tp)
    routed = tokens * c["top_k"] / ep
    flops = 2.0 * routed * 3 * width * inter
    act = next((b for i, _, b in args.tensor_items() if i == 0), None) or 2
    wbytes, wfmt = weight_bytes_per_value(config, act)
    experts = c["experts"] / ep
    reached = min(experts, routed)
    weights = reached * 3 * width * inter * wbytes
    intermediates = 2 * routed * 3 * inter * act  # gate+up written and read, the activation's output likewise
    traffic = weights + intermediates + 2 * tokens * width * act + numel(logits) * act
    used = ", ".join(config.key(n) for n in MOE_KEYS)
    notes = [f"{PROVENANCE} ({used}): gated expert MLP 2 x tokens x top-k x 3 x hidden x intermediate, each "
             f"token runs its top-{c['top_k']} experts"]
    if width != c["hidden"]:
        notes.append(f"{config.key('hidden')} {c['hidden']} padded to {width} by the kernel (recorded activation)")
    if tp > 1:
        notes.append(f"tensor_parallel_size {tp}: intermediate {c['intermediate']} / {tp} per rank")
    if ep > 1:
        notes.append(f"expert_parallel_size {ep}: 1/{ep} of the routed rows, as balanced routing gives")
    bound = "" if experts <= routed else ("upper bound: routing not recorded, every expert the tokens could reach "
                                          f"(min({experts:g}, {routed:g})) counted as read; ")
    flops_note = "; ".join(notes)
    return OpEstimate(flops, flops_note, float(traffic), f"{bound}{flops_note}; {wfmt}", _dtype(args))


@_register("vllm::unified_attention vllm::unified_attention_with_output",
           "sliding_window with every layer sliding (layer_types); otherwise per-sequence context lengths, which "
           "the trace does not record")
def _attention(args: OpArgs, config: ModelConfig) -> OpEstimate:
    window = config.get("sliding_window")
    full = [t for t in config.layer_types if "sliding" not in t]
    if window is None or full:
        why = (f"{len(full)} of {len(config.layer_types)} layers attend the full context" if full and window
               else "no sliding_window")
        raise UnknownEstimate("the KV cache and the context lengths are not arguments of this op (found by layer "
                              f"name), and the config bounds them only for sliding-window layers ({why})")
    q, k = args.shape(0, "query"), args.shape(1, "key")
    heads = config.get("heads")
    dim = config.get("head_dim") or (q[-1] if len(q) == 3 else None)
    if len(q) not in (2, 3) or len(k) not in (2, 3) or not heads or not dim:
        raise UnknownEstimate(f"query {q} / key {k} not understood (num_attention_heads, head_dim needed)")
    tokens = q[0]
    kv_width = numel(k[1:])  # KV heads x head dim of this rank
    size = args.compute_itemsize() or 2
    q_heads = numel(q[1:]) // dim
    flops = 4.0 * tokens * window * q_heads * dim
    traffic = 2 * numel(q) * size + tokens * window * 2 * kv_width * size
    note = (f"upper bound: {PROVENANCE} ({config.key('sliding_window')} {window}): each query token attends at "
            "most the window; context lengths are not recorded")
    return OpEstimate(flops, note, float(traffic), note, _dtype(args))


def _dtype(args: OpArgs) -> Optional[str]:
    try:
        return args.compute_dtype()
    except Exception:
        return None


__all__ = ["has_rule", "needed_keys", "size_from_config", "PROVENANCE"]
