"""Mixture of experts: the fused-expert ops of vLLM / SGLang (two grouped GEMMs with a gated activation between
them), their routing helpers, and the ops whose expert weights are not arguments.

``fused_experts(hidden[T, K], w1[E, 2N, K], w2[E, K, N], topk_weights[T, k], topk_ids[T, k], ...)``: each of the
``T x k`` routed tokens runs ``x @ w1[e]^T`` (2 x 2N x K FLOPs), the gated activation (2 per intermediate element)
and ``h @ w2[e]^T`` (2 x K x N). Bytes: the tokens read, the weights of the experts the tokens reach read once
(at most ``min(E, T x k)`` experts: the routing is not recorded, so this is an upper bound on the weight traffic,
exact whenever every expert receives a token), the intermediates written and read once, the output written.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel
from .registry import register

UPPER = "upper bound: routing not recorded, every expert a token could reach is counted as read"


def _problem(args: OpArgs) -> dict:
    hidden, w1, w2 = (args.shape(i, n) for i, n in ((0, "hidden_states"), (1, "w1"), (2, "w2")))
    topk = args.shape(4, "topk_ids")
    if len(hidden) != 2 or len(w1) != 3 or len(w2) != 3 or len(topk) != 2:
        raise UnknownEstimate(f"fused experts shapes {hidden}, {w1}, {w2}, {topk} not understood")
    tokens, k_dim = hidden
    experts, n2 = w1[0], w1[1]
    if w2[0] != experts or topk[0] != tokens:
        raise UnknownEstimate(f"fused experts shapes {hidden}, {w1}, {w2}, {topk} are inconsistent")
    sizes = {i: b for i, _, b in args.tensor_items()}
    return {"T": tokens, "K": k_dim, "E": experts, "N2": n2, "N": w2[2], "k": topk[1],
            "x": sizes.get(0) or 2, "w1": sizes.get(1) or 2, "w2": sizes.get(2) or 2, "w1_shape": w1,
            "w2_shape": w2}


def _experts_flops(op: str, args: OpArgs, out_dims: Any) -> int:
    p = _problem(args)
    routed = p["T"] * p["k"]
    return routed * (2 * p["N2"] * p["K"] + 2 * p["N"] + 2 * p["K"] * p["N"])


def _experts_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    p = _problem(args)
    routed = p["T"] * p["k"]
    reached = min(p["E"], routed) / p["E"]
    weights = reached * (numel(p["w1_shape"]) * p["w1"] + numel(p["w2_shape"]) * p["w2"])
    intermediates = 2 * routed * (p["N2"] + p["N"] + p["K"]) * p["x"]  # written, then read by the next kernel
    routing = sum(numel(s) * b for i, s, b in tensors if i in (3, 4))
    tokens = 2 * p["T"] * p["K"] * p["x"]  # read, and the output written
    note = "" if p["E"] <= routed and reached == 1 else UPPER
    return float(weights + intermediates + routing + tokens), note


register("*::fused_experts *::inplace_fused_experts *::outplace_fused_experts *::fused_experts_impl",
         "moe", flops=_experts_flops, bytes=_experts_bytes,
         source="vLLM schema fused_experts(hidden, w1[E, 2N, K], w2[E, K, N], topk_weights, topk_ids, ...)")


def _hidden_weights(op: str, args: OpArgs, out_dims: Any) -> None:
    raise UnknownEstimate("MoE expert weights are not arguments of this op (found by layer name): FLOPs and "
                          "bytes unknown; its fused-experts sub-op, or the sizes its sub-ops record before each launch "
                          "(triton_kernels matmul_ogs), rate the expert GEMMs when recorded; or the model's config "
                          "(--model-config, model_config.json in the run directory) with hidden_size, "
                          "moe_intermediate_size, num_local_experts, num_experts_per_tok")


register("vllm::moe_forward vllm::moe_forward_shared", "moe", flops=_hidden_weights,
         bytes=lambda op, args, tensors, out_dims: _hidden_weights(op, args, out_dims),
         source="vLLM schema moe_forward(hidden_states, router_logits, layer_name)")
register("sglang::moe_forward_piecewise_cuda_graph_impl sglang::fused_moe_bypassed_piecewise_cuda_graph_impl "
         "sglang::flashinfer_fp4_moe_forward_piecewise_cuda_graph_impl", "moe", flops=_hidden_weights,
         bytes=lambda op, args, tensors, out_dims: _hidden_weights(op, args, out_dims),
         source="SGLang schema *_piecewise_cuda_graph_impl(hidden_states, ..., router_logits, ..., layer_id)")


def _topk_softmax_flops(op: str, args: OpArgs, out_dims: Any) -> int:
    """``topk_softmax(topk_weights!, topk_ids!, token_expert_indices!, gating_output[T, E])``: a softmax over the
    logits (5 FLOPs per element, the house convention)."""
    return 5 * numel(args.shape(3, "gating_output"))


register("*::topk_softmax", "moe", flops=_topk_softmax_flops, source="vLLM schema; softmax 5 FLOPs per element")
register("*::moe_align_block_size *::sgl_moe_align_block_size *::moe_align_block_size_triton", "moe",
         zero_flops=True, source="routing bookkeeping: sorts token ids, no floating-point work")


def _moe_sum_flops(op: str, args: OpArgs, out_dims: Any) -> int:
    """``moe_sum(input[T, k, K], output[T, K])``: k - 1 adds per output element."""
    x = args.shape(0, "moe_sum input")
    return numel(x) - numel(x[:1] + x[2:]) if len(x) == 3 else numel(x)


register("*::moe_sum", "moe", flops=_moe_sum_flops, source="vLLM schema moe_sum(input[T, k, K], output[T, K])")
