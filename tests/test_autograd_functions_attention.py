"""flash-attn's attention autograd Functions (flash-attn 2 and 3 ``FlashAttn*Func``, renamed forks) rated from the
arguments the profiler records on them (estimate/attention_functions.py), and their backward nodes' kernels at 2.5x
the forward (analysis/kernels/backward_sizing.py). Figures are (query, key) pairs counted by hand times 4 x D per
pair and query head; a trace recorded here by real torch runs CPU Functions named and called like flash-attn's,
whose aten::bmm FLOPs are the cross-check (the bound from max_seqlen is at least what they computed)."""
from __future__ import annotations

import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.backward_sizing import backward_estimate, find_forward
from tb_gpuinsight.estimate.attention_functions import SOURCE, V2, V3, layout_of
from tb_gpuinsight.estimate.args import OpArgs
from tb_gpuinsight.estimate.flops import estimate_op, freeze
from tb_gpuinsight.estimate.registry import lookup
from tests.test_backward_sizing import H100, _kernels, _launched, _op, _rows, _text

BF16, F32, FP8, I32 = "c10::BFloat16", "float", "c10::Float8_e4m3fn", "int"
B, S, HQ, HK, D = 2, 6, 4, 2, 8  # batch, sequence, query heads, KV heads (GQA), head dim
Q, KV = [B, S, HQ, D], [B, S, HK, D]


def _est(name, args):
    """args: (dims, type, concrete) per forward argument after ctx."""
    dims, types, concrete = zip(*args) if args else ((), (), ())
    return estimate_op(name, freeze(list(dims)), freeze(list(types)), freeze(list(concrete)))


def t(shape, dtype=BF16):
    return (shape, dtype, "")


def scalar(text):
    return ([], "Scalar", text)


NONE = ([], "", "")  # None, or a tuple such as window_size=(-1, -1): recorded empty


def flops(batch_heads, pairs, d=D, dv=D):
    """4 x D FLOPs per attended pair (QK^T and PV, a multiply-add each) and (batch, query head)."""
    return batch_heads * pairs * 2 * (d + dv)


def v2_dense(causal="True", window=NONE, q=Q, k=KV, dtype=BF16):
    # FlashAttnFunc.forward(ctx, q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
    #                       deterministic, return_softmax)
    return [t(q, dtype), t(k, dtype), t(k, dtype), scalar("0."), scalar("0.35"), scalar(causal), window,
            scalar("0."), NONE, scalar("False"), scalar("False")]


def v3_dense(causal="False", dtype=BF16, descale=NONE, qv=NONE, chunk="0"):
    # FlashAttnFunc.forward(ctx, q, k, v, softmax_scale, causal, qv, q_descale, k_descale, v_descale, window_size,
    #                       attention_chunk, softcap, num_splits, pack_gqa, deterministic, sm_margin, return_softmax)
    return [t(Q, dtype), t(KV, dtype), t(KV, dtype), NONE, scalar(causal), qv, descale, descale, descale, NONE,
            scalar(chunk), scalar("0."), scalar("1"), NONE, scalar("False"), scalar("0"), scalar("False")]


# Varlen: three sequences of 2, 5 and 3 tokens (10 in all, the longest 5), 2 heads of dim 4.
VH, VD, LENGTHS = 2, 4, (2, 5, 3)
TOKENS, LONGEST = sum(LENGTHS), max(LENGTHS)
CU = "[0, 2, 7, 10]"


def v2_varlen(causal="True", cu="", window=NONE):
    # FlashAttnVarlenFunc.forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
    #                             softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
    #                             return_softmax, block_table)
    qkv = t([TOKENS, VH, VD])
    return [qkv, qkv, qkv, ([4], I32, cu), ([4], I32, cu), scalar(str(LONGEST)), scalar(str(LONGEST)), scalar("0."),
            scalar("0.5"), scalar(causal), window, scalar("0."), NONE, scalar("False"), scalar("False"), NONE]


def v3_varlen(causal="True"):
    # FlashAttnVarlenFunc.forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
    #                             max_seqlen_k, softmax_scale, causal, qv, q/k/v_descale, window_size, ...)
    qkv = t([TOKENS, VH, VD])
    return [qkv, qkv, qkv, t([4], I32), t([4], I32), NONE, NONE, scalar(str(LONGEST)), scalar(str(LONGEST)), NONE,
            scalar(causal), NONE, NONE, NONE, NONE, NONE, scalar("0"), scalar("0."), scalar("1"), NONE,
            scalar("False"), scalar("0"), scalar("False")]


# Without the cu_seqlens values, 10 tokens in 3 sequences of at most 5 pack as 5, 5 and 0: an upper bound.
PACKED = (5, 5, 0)
CAUSAL_BOUND = sum(n * (n + 1) // 2 for n in PACKED)  # 30 pairs
CAUSAL_TRUE = sum(n * (n + 1) // 2 for n in LENGTHS)  # 3 + 15 + 6 = 24 pairs
DENSE_BOUND, DENSE_TRUE = sum(n * n for n in PACKED), sum(n * n for n in LENGTHS)  # 50 and 38 pairs


# ---------------------------------------------------------------------------------------------- the forward entries

def test_flash_attn_2_dense_causal_counts_the_lower_triangle_per_query_head():
    est = _est("FlashAttnFunc", v2_dense())
    assert est.flops == flops(B * HQ, S * (S + 1) // 2) == 2 * 4 * 21 * 4 * 8  # 21 of the 36 pairs
    assert est.flops_reason.startswith("upper bound: window_size is a Python tuple")  # a window computes fewer
    # q, k, v read; out [B, S, HQ, D] written in bf16 and the float32 log-sum-exp per query and head
    assert est.bytes == (2 * B * S * HQ * D + 2 * B * S * HK * D) * 2 + B * S * HQ * 4 and est.bytes_reason == ""
    assert layout_of("FlashAttnFunc", OpArgs(*zip(*v2_dense()))).version == V2
    assert lookup("FlashAttnFunc").source == SOURCE and lookup("FlashAttnFunc").family == "attention"


def test_a_window_recorded_as_a_list_is_counted_and_exact():
    est = _est("FlashAttnFunc", v2_dense(window=([], "ScalarList", "[2, 0]")))
    assert est.flops == flops(B * HQ, 1 + 2 + 3 + 3 + 3 + 3)  # each query and at most 2 keys before it
    assert est.flops_reason == ""


def test_causal_not_recorded_counts_every_pair_as_a_bound():
    est = _est("FlashAttnFunc", [(d, ty, "") for d, ty, _ in v2_dense()])  # no Concrete Inputs
    assert est.flops == flops(B * HQ, S * S)
    assert "dense count, causal not recorded" in est.flops_reason and est.flops_reason.startswith("upper bound:")


def test_flash_attn_3_dense_fp8_reads_one_byte_and_writes_bf16():
    scales = t([B, HK], F32)
    est = _est("FlashAttnFunc", v3_dense(dtype=FP8, descale=scales))
    assert est.flops == flops(B * HQ, S * S)
    assert est.bytes == B * S * HQ * D + 2 * B * S * HK * D + 3 * B * HK * 4 + B * S * HQ * (D * 2 + 4)
    assert layout_of("FlashAttnFunc", OpArgs(*zip(*v3_dense()))).version == V3


def test_flash_attn_3_qv_adds_its_dim_to_the_scores():
    est = _est("FlashAttnFunc", v3_dense(qv=t([B, S, HQ, 16])))
    assert est.flops == B * HQ * S * S * 2 * (D + 16 + D)


def test_flash_attn_3_attention_chunk_is_named_in_the_bound():
    est = _est("FlashAttnFunc", v3_dense(chunk="4"))
    assert est.flops == flops(B * HQ, S * S) and "attention_chunk 4 limits each query" in est.flops_reason
    assert "attention_chunk" not in _est("FlashAttnFunc", v3_dense()).flops_reason


def test_varlen_without_offsets_is_an_upper_bound_from_max_seqlen():
    est = _est("FlashAttnVarlenFunc", v2_varlen())
    assert est.flops == flops(VH, CAUSAL_BOUND, VD, VD) == 2 * 30 * 16
    assert est.flops >= flops(VH, CAUSAL_TRUE, VD, VD)
    assert est.flops_reason.startswith("upper bound: inferred from the recorded token totals and max_seqlen")
    assert est.bytes == 3 * TOKENS * VH * VD * 2 + 2 * 4 * 4 + TOKENS * VH * (VD * 2 + 4)


def test_varlen_with_recorded_offsets_is_exact():
    est = _est("FlashAttnVarlenFunc", v2_varlen(cu=CU, window=([], "ScalarList", "[-1, -1]")))
    assert est.flops == flops(VH, CAUSAL_TRUE, VD, VD) and est.flops_reason == ""
    dense = _est("FlashAttnVarlenFunc", v2_varlen(causal="False", cu=CU, window=([], "ScalarList", "[-1, -1]")))
    assert dense.flops == flops(VH, DENSE_TRUE, VD, VD)


def test_flash_attn_3_varlen_reads_max_seqlen_after_seqused():
    est = _est("FlashAttnVarlenFunc", v3_varlen())
    assert est.flops == flops(VH, CAUSAL_BOUND, VD, VD)
    assert layout_of("FlashAttnVarlenFunc", OpArgs(*zip(*v3_varlen()))).version == V3


@pytest.mark.parametrize("name, args, pairs, batch", [
    # FlashAttnQKVPackedFunc(qkv [b, s, 3, h, d], dropout_p, softmax_scale, causal, window_size, ...)
    ("FlashAttnQKVPackedFunc", [t([B, S, 3, HK, D]), scalar("0."), NONE, scalar("True"), NONE], 21, B * HK),
    # flash-attn 3: (qkv [b, s, Hq + 2 Hk, d], softmax_scale, causal, q/k/v_descale, window_size, attention_chunk,
    # softcap, deterministic, num_heads_q, ...)
    ("FlashAttnQKVPackedFunc", [t([B, S, HQ + 2 * HK, D]), NONE, scalar("False"), NONE, NONE, NONE, NONE,
                                scalar("0"), scalar("0."), scalar("False"), scalar(str(HQ))], 36, B * HQ),
    # FlashAttnKVPackedFunc(q, kv [b, s, 2, hk, d], dropout_p, softmax_scale, causal, ...)
    ("FlashAttnKVPackedFunc", [t(Q), t([B, S, 2, HK, D]), scalar("0."), NONE, scalar("True"), NONE], 21, B * HQ),
    # FlashAttnVarlenQKVPackedFunc(qkv [t, 3, h, d], cu_seqlens, max_seqlen, dropout_p, softmax_scale, causal, ...)
    ("FlashAttnVarlenQKVPackedFunc", [t([TOKENS, 3, VH, VD]), t([4], I32), scalar(str(LONGEST)), scalar("0."),
                                      NONE, scalar("True"), NONE], CAUSAL_BOUND, VH),
    # FlashAttnVarlenKVPackedFunc(q, kv [t, 2, hk, d], cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal)
    ("FlashAttnVarlenKVPackedFunc", [t([TOKENS, VH, VD]), t([TOKENS, 2, VH, VD]), t([4], I32), t([4], I32),
                                     scalar(str(LONGEST)), scalar(str(LONGEST)), scalar("0."), NONE, scalar("True"),
                                     NONE], CAUSAL_BOUND, VH),
])
def test_packed_functions_count_the_unpacked_pairs(name, args, pairs, batch):
    d = args[0][0][-1]
    assert _est(name, args).flops == flops(batch, pairs, d, d)


@pytest.mark.parametrize("name", ["_FlashAttnVarlenFunc", "MegatronFlashAttnVarlenFunc"])
def test_forks_that_prefix_the_name_share_the_entry(name):
    assert lookup(name) is lookup("FlashAttnVarlenFunc")
    assert _est(name, v2_varlen()).flops == flops(VH, CAUSAL_BOUND, VD, VD)
    assert lookup("FlashAttnVarlenQKVPackedFunc") is not lookup("FlashAttnVarlenFunc")


def test_arguments_that_fit_no_version_are_refused_with_the_reason():
    est = _est("FlashAttnVarlenFunc", [t([TOKENS, VH, VD])] * 3 + [NONE] * 8)
    assert est.flops is None
    assert "fit no flash-attn 2 or flash-attn 3 FlashAttnVarlenFunc.forward layout" in est.flops_reason


def test_backward_node_has_no_estimate_of_its_own():
    est = _est("FlashAttnVarlenFuncBackward", [t([TOKENS, VH, VD])])
    assert est.flops is None and "same sequence number" in est.flops_reason


# ---------------------------------------------------------------------------------------------- recorded by torch

def _record(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    def probs(q, k, scale, causal):
        """softmax(q k^T) per head of one sequence, q [sq, h, d], k [sk, h, d], bottom-right causal mask."""
        scores = torch.matmul(q.transpose(0, 1), k.permute(1, 2, 0)) * scale
        if causal:
            sq, sk = q.shape[0], k.shape[0]
            keep = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores.softmax(-1)

    def attend(q, k, v, cu, scale, causal):
        """out per sequence: P v (the forward's two matmuls)."""
        bounds = cu.tolist()
        return torch.cat([torch.matmul(probs(q[a:b], k[a:b], scale, causal), v[a:b].transpose(0, 1)).transpose(0, 1)
                          for a, b in zip(bounds, bounds[1:])])

    def grads(q, k, v, cu, scale, causal, dout):
        """flash-attn's backward per sequence: P recomputed, then dV, dP, dQ and dK (five matmuls)."""
        bounds, parts = cu.tolist(), []
        for a, b in zip(bounds, bounds[1:]):
            p = probs(q[a:b], k[a:b], scale, causal)
            do = dout[a:b].transpose(0, 1)
            dv = torch.matmul(p.transpose(1, 2), do)
            dp = torch.matmul(do, v[a:b].permute(1, 2, 0))
            ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * scale
            dq = torch.matmul(ds, k[a:b].transpose(0, 1))
            dk = torch.matmul(ds.transpose(1, 2), q[a:b].transpose(0, 1))
            parts.append([x.transpose(0, 1) for x in (dq, dk, dv)])
        return [torch.cat(list(x)) for x in zip(*parts)]

    class FlashAttnVarlenFunc(torch.autograd.Function):
        """flash-attn 2's signature; plain torch attention inside."""

        @staticmethod
        def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                    causal, window_size, softcap, alibi_slopes, deterministic, return_softmax, block_table):
            ctx.save_for_backward(q, k, v, cu_seqlens_q)
            ctx.scale, ctx.causal = softmax_scale, causal
            return attend(q, k, v, cu_seqlens_q, softmax_scale, causal)

        @staticmethod
        def backward(ctx, dout):
            q, k, v, cu = ctx.saved_tensors
            return (*grads(q, k, v, cu, ctx.scale, ctx.causal, dout),) + (None,) * 13

    q, k, v = (torch.randn(TOKENS, VH, VD, requires_grad=True) for _ in range(3))
    cu = torch.tensor([0, 2, 7, 10], dtype=torch.int32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out = FlashAttnVarlenFunc.apply(q, k, v, cu, cu, LONGEST, LONGEST, 0.0, VD ** -0.5, False, (-1, -1), 0.0,
                                        None, False, False, None)
        out.sum().backward()
    first = torch.nn.functional.scaled_dot_product_attention(*(x[:2].transpose(0, 1) for x in (q, k, v)))
    assert torch.allclose(out[:2], first.transpose(0, 1), atol=1e-5)  # the Function computes attention
    path = tmp_path / "flash_attn_varlen.json"
    prof.export_chrome_trace(str(path))
    return tb_gpuinsight.load(path)


def _bmm_flops_within(trace, row):
    ops = trace.ops
    lo, hi = ops["ts"][row], ops["ts"][row] + ops["dur"][row]
    inside = [r for r in _rows(trace, "aten::bmm").tolist() if lo <= ops["ts"][r] <= hi]
    return sum(estimate_op("aten::bmm", *trace.shape(int(ops["shape"][r]))).flops for r in inside)


def test_recorded_varlen_function_is_rated_forward_and_backward(tmp_path):
    trace = _record(tmp_path)
    (fwd,), (bwd,) = _rows(trace, "FlashAttnVarlenFunc"), _rows(trace, "FlashAttnVarlenFuncBackward")
    assert find_forward(trace, bwd) == fwd
    est = estimate_op("FlashAttnVarlenFunc", *trace.shape(int(trace.ops["shape"][fwd])))
    assert est.flops == flops(VH, DENSE_BOUND, VD, VD) == 2 * 50 * 16  # lengths 5, 5, 0 from max_seqlen 5
    assert "inferred from the recorded token totals and max_seqlen" in est.flops_reason
    computed = _bmm_flops_within(trace, fwd)
    assert computed == flops(VH, DENSE_TRUE, VD, VD) <= est.flops  # 2, 5 and 3 tokens: 38 pairs of the bound's 50
    back = backward_estimate(trace, bwd)
    assert back.flops == 2.5 * est.flops
    assert _bmm_flops_within(trace, bwd) == 2.5 * computed  # flash-attn's five backward matmuls
    assert back.flops_reason.startswith("upper bound: ")
    assert f"(sequence number {int(trace.ops['seq'][bwd])}), whose figure is an upper bound (inferred" \
        in back.flops_reason
    assert back.bytes == 2 * est.bytes


# ---------------------------------------------------------------------------------------------- GPU trace built here

FLASH_KERNEL = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, "
                "cutlass::bfloat16_t>>")
FLASH_BWD = "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8>>"


def _gpu_trace(tmp_path, args):
    """The Function launches its kernel itself (30 us); its backward node launches two (60 and 20 us)."""
    dims, types, concrete = (list(x) for x in zip(*args))
    fwd = _op("FlashAttnVarlenFunc", 100, 50, 1, dims, types, seq=5, fwd_tid=0)
    fwd["args"]["Concrete Inputs"] = concrete
    events = [fwd] + _launched(110, 1, 1, 30, name=FLASH_KERNEL)
    events.append(_op("FlashAttnVarlenFuncBackward", 500, 100, 2, [[TOKENS, VH, VD]], [BF16], seq=5, fwd_tid=1))
    events += _launched(510, 2, 2, 60, name=FLASH_BWD) + _launched(590, 3, 2, 20, name=FLASH_BWD)
    path = tmp_path / "flash_varlen.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [H100], "traceEvents": events}))
    return tb_gpuinsight.analyze(path)


def test_kernels_of_the_function_and_its_backward_node_are_rated(tmp_path):
    eff = _gpu_trace(tmp_path, v2_varlen())
    acts = eff.activities
    fwd, first, second = _kernels(eff).tolist()
    forward = flops(VH, CAUSAL_BOUND, VD, VD)
    assert acts["flops"][fwd] == forward
    assert acts["bytes"][fwd] == 3 * TOKENS * VH * VD * 2 + 2 * 4 * 4 + TOKENS * VH * (VD * 2 + 4)
    assert acts["flops"][first] == pytest.approx(2.5 * forward * 0.75)  # 60 of the node's 80 us
    assert acts["flops"][second] == pytest.approx(2.5 * forward * 0.25)
    assert acts["bytes"][first] + acts["bytes"][second] == pytest.approx(2 * acts["bytes"][fwd])
    assert _text(eff, "flops_reason", fwd).startswith("upper bound: inferred")
    for row in (first, second):
        assert _text(eff, "flops_reason", row).startswith("upper bound: 2.5x the forward")
        assert "FlashAttnVarlenFunc (sequence number 5)" in _text(eff, "flops_reason", row)
        assert _text(eff, "source", row) == "formula" and _text(eff, "dtype", row) == "bf16"
    for row in (fwd, first, second):
        assert acts["efficiency"][row] > 0  # rated against the H100
