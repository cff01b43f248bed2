"""Ops whose weights or KV cache are found by layer name, sized from the model's config (`model_config.py`).

One rule per op (a registry like `registry.py`'s, keyed by op name), each reading the recorded activations for the
token count and the config for the hidden sizes. Their figures carry the provenance "model config (<keys used>)".

MoE ops found by layer name (the arguments as each engine records them, `Layout` below):
vLLM `moe_forward(hidden_states[T, H'], router_logits[T, E], layer_name)`; SGLang's piecewise-graph ops
`sglang::moe_forward_piecewise_cuda_graph_impl(hidden_states, topk_weights[T, k], topk_ids[T, k], router_logits,
layer_id)` (top-k recorded), `sglang::fused_moe_bypassed_piecewise_cuda_graph_impl` and
`sglang::flashinfer_fp4_moe_forward_piecewise_cuda_graph_impl(hidden_states, router_logits, top_k, ...)` (top-k a
scalar argument, in Concrete Inputs). A gated expert MLP per routed token, gate and up projections `H x 2I` and the
down projection `I x H`, so `2 x T x k x 3 x H x I` FLOPs; each token runs exactly its top-k experts, so the count
is exact for the recorded tokens. `H'` may exceed `hidden_size` when the kernel pads it (gpt-oss' 2880 -> 3072 for
MXFP4 weights): the recorded width is used and the padding said. The intermediate width is the config's (over the
tensor-parallel size), unless the op's sub-ops recorded a buffer of one row per routed token (`T x k` rows) a little
wider (at most 25 %: kernels pad to a tile multiple, gpt-oss' 2880 -> 2944): that recorded width is used, said so.
Bytes: the weights of the experts the tokens can reach (`min(E, T x k)` of E: routing is not recorded, an upper
bound) in the quantized format, the tokens read and written, the intermediates written and read once.

Attention over a KV cache found by layer name (vLLM `unified_attention*`, SGLang's piecewise-graph
`sglang::unified_attention_with_output*(query, key, value, output, save_kv_cache, layer_id)`): the context lengths live in attention
metadata, not arguments. Only a model whose every layer is a sliding-window layer bounds them (`sliding_window`):
`4 x T x W x Hq x D` FLOPs at most, the query read, the window's K and V read per query token, the output written.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

from .args import OpArgs, UnknownEstimate, numel
from .flops import OpEstimate
from .model_config import ModelConfig, weight_bytes_per_value

Rule = Callable[[OpArgs, ModelConfig, Sequence[Tuple[int, ...]], str], OpEstimate]
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


def size_from_config(name: str, dims: Any, types: Any, concrete: Any, config: ModelConfig,
                     sub_shapes: Sequence[Tuple[int, ...]] = ()) -> Optional[OpEstimate]:
    """The op's figures from the config (None when no rule covers the op); never raises: an op the config cannot
    size gets unknown figures with the reason. `sub_shapes`: shapes the op's sub-ops recorded (tensors and
    allocation sizes), where a kernel's padding of the config's sizes shows."""
    rule = _RULES.get(name)
    if rule is None:
        return None
    try:
        return rule(OpArgs(dims, types, concrete), config, sub_shapes, name)
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


class Layout(NamedTuple):
    """Where an MoE op records its tokens, router scores and top-k (argument indices; None: not an argument)."""
    hidden: int
    logits: int
    topk_ids: Optional[int] = None  # a [T, k] tensor
    top_k: Optional[int] = None  # a scalar argument


MOE_LAYOUTS = {
    "vllm::moe_forward": Layout(0, 1), "vllm::moe_forward_shared": Layout(0, 1),
    "sglang::moe_forward_piecewise_cuda_graph_impl": Layout(0, 3, topk_ids=2),
    "sglang::fused_moe_bypassed_piecewise_cuda_graph_impl": Layout(0, 1, top_k=2),
    "sglang::flashinfer_fp4_moe_forward_piecewise_cuda_graph_impl": Layout(0, 1, top_k=2),
}
MOE_OPS = tuple(MOE_LAYOUTS)
_PAD_LIMIT = 1.25  # a kernel pads a size to its tile multiple: a few percent, never a quarter more


@_register(" ".join(MOE_OPS),
           "hidden_size, moe_intermediate_size (or intermediate_size), num_local_experts (or num_experts), "
           "num_experts_per_tok (unless the op records its top-k)")
def _moe(args: OpArgs, config: ModelConfig, sub_shapes: Sequence[Tuple[int, ...]] = (),
         name: str = "vllm::moe_forward") -> OpEstimate:
    layout = MOE_LAYOUTS.get(name, MOE_LAYOUTS["vllm::moe_forward"])
    top_k, top_k_note = _recorded_top_k(args, layout)
    c = _need(config, MOE_KEYS if top_k is None else MOE_KEYS[:3])
    c["top_k"] = top_k if top_k is not None else c["top_k"]
    x, logits = args.shape(layout.hidden, "hidden_states"), args.shape(layout.logits, "router_logits")
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
    padded = _padded_intermediate(sub_shapes, tokens * c["top_k"], inter)
    routed = tokens * c["top_k"] / ep
    flops = 2.0 * routed * 3 * width * (padded or inter)
    act = next((b for i, _, b in args.tensor_items() if i == layout.hidden), None) or 2
    wbytes, wfmt = weight_bytes_per_value(config, act)
    experts = c["experts"] / ep
    reached = min(experts, routed)
    weights = reached * 3 * width * (padded or inter) * wbytes
    intermediates = 2 * routed * 3 * (padded or inter) * act  # gate+up written and read, the activation's output
    traffic = weights + intermediates + 2 * tokens * width * act + numel(logits) * act
    used = ", ".join(config.key(n) for n in (MOE_KEYS if top_k is None else MOE_KEYS[:3]))
    notes = [f"{PROVENANCE} ({used}): gated expert MLP 2 x tokens x top-k x 3 x hidden x intermediate, each "
             f"token runs its top-{c['top_k']} experts"]
    if top_k_note:
        notes.append(top_k_note)
    if width != c["hidden"]:
        notes.append(f"{config.key('hidden')} {c['hidden']} padded to {width} by the kernel (recorded activation)")
    if padded:
        notes.append(f"{config.key('intermediate')} {inter} padded to {padded} by the kernel (a sub-op's buffer of "
                     f"{tokens * c['top_k']} routed rows x {padded})")
    if tp > 1:
        notes.append(f"tensor_parallel_size {tp}: intermediate {c['intermediate']} / {tp} per rank")
    if ep > 1:
        notes.append(f"expert_parallel_size {ep}: 1/{ep} of the routed rows, as balanced routing gives")
    bound = "" if experts <= routed else ("upper bound: routing not recorded, every expert the tokens could reach "
                                          f"(min({experts:g}, {routed:g})) counted as read; ")
    flops_note = "; ".join(notes)
    return OpEstimate(flops, flops_note, float(traffic), f"{bound}{flops_note}; {wfmt}", _dtype(args))


def _recorded_top_k(args: OpArgs, layout: Layout) -> Tuple[Optional[int], str]:
    """The op's own top-k (its topk_ids' width, or its top_k argument) and how it was read; (None, "") when the
    op does not record it (the config's num_experts_per_tok then)."""
    if layout.topk_ids is not None:
        ids = args.opt_shape(layout.topk_ids)
        if ids and len(ids) == 2 and ids[1] > 0:
            return ids[1], f"top-k {ids[1]} from the recorded topk_ids {list(ids)}"
    if layout.top_k is not None:
        value = args.opt_value(layout.top_k)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"top-k {value} from the op's top_k argument"
    return None, ""


def _padded_intermediate(sub_shapes: Sequence[Tuple[int, ...]], routed_rows: int, inter: int) -> Optional[int]:
    """The intermediate width a sub-op recorded for the routed rows (one row per token and expert), when it is a
    padding of the config's (wider by at most a quarter); None otherwise."""
    widths = [s[-1] for s in sub_shapes if len(s) >= 2 and numel(s[:-1]) == routed_rows
              and inter < s[-1] <= _PAD_LIMIT * inter]
    return min(widths) if widths else None


@_register("vllm::unified_attention vllm::unified_attention_with_output sglang::unified_attention_with_output "
           "sglang::unified_attention_with_output_and_lse",
           "sliding_window with every layer sliding (layer_types); otherwise per-sequence context lengths, which "
           "the trace does not record")
def _attention(args: OpArgs, config: ModelConfig, sub_shapes: Sequence[Tuple[int, ...]] = (),
               name: str = "") -> OpEstimate:
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


__all__ = ["has_rule", "needed_keys", "size_from_config", "PROVENANCE", "MOE_OPS", "MOE_LAYOUTS"]
