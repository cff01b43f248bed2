"""SGLang's layer-name ops sized from the model's config, padded intermediates read from the sub-ops, and paged
decode attention charged the KV pages it names (estimate/model_sized.py, analysis/kernels/config_sizing.py,
estimate/paged_decode.py).

No SGLang trace is in the corpus: the traces here are synthetic Kineto files written with the fields
torch.profiler records (cpu_op with Input Dims / Input type / Concrete Inputs, its launch call and kernel linked by
correlation id), the op names and argument orders those of SGLang's and aiter's registered custom ops."""
from __future__ import annotations

import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.estimate.flops import estimate_op
from tb_gpuinsight.estimate.model_config import load_model_config
from tb_gpuinsight.estimate.model_sized import size_from_config

BF16, INT = "c10::BFloat16", "int"
MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205_000_000_000, "computeMajor": 9,
          "computeMinor": 4, "numSms": 304}
# Qwen3-30B-A3B's MoE sizes (its Hugging Face config.json): 128 experts, 8 per token, 2048 wide, 768 per expert
QWEN3_MOE = {"hidden_size": 2048, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
             "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48}
T, K = 64, 8


def trace_file(tmp_path, ops, kernel="fused_moe_kernel", kernel_us=500, device=MI300X):
    """`ops`: (name, dims, types, concrete, children) of the top op and its sub-ops; the top op launches one
    kernel (hipLaunchKernel -> kernel by correlation id)."""
    name, dims, types, concrete = ops[0]
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 100, "dur": 400,
               "args": {"External id": 7, "Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}}]
    for i, (sub, sdims, stypes, sconc) in enumerate(ops[1:]):
        events.append({"ph": "X", "cat": "cpu_op", "name": sub, "pid": 1, "tid": 1, "ts": 110 + 10 * i, "dur": 5,
                       "args": {"External id": 20 + i, "Input Dims": sdims, "Input type": stypes,
                                "Concrete Inputs": sconc}})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 300,
                   "dur": 5, "args": {"correlation": 11, "External id": 7}})
    events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 600, "dur": kernel_us,
                   "args": {"correlation": 11, "External id": 7, "device": 0, "stream": 7,
                            "grid": [304, 1, 1], "block": [256, 1, 1]}})
    path = tmp_path / "rank0.1700000000000.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [device], "traceEvents": events}))
    return path


def _row(eff, col):
    acts = eff.activities
    code = int(acts[col][0])
    return acts.strings[col][code] if code >= 0 else ""


def test_sglang_piecewise_moe_reads_its_top_k_from_the_recorded_topk_ids(tmp_path):
    # moe_forward_piecewise_cuda_graph_impl(hidden_states, topk_weights, topk_ids, router_logits, layer_id)
    op = ("sglang::moe_forward_piecewise_cuda_graph_impl", [[T, 2048], [T, K], [T, K], [T, 128], []],
          [BF16, "float", INT, BF16, "Scalar"], ["", "", "", "", "3"])
    config = dict(QWEN3_MOE, num_experts_per_tok=4)  # the recorded top-k (8) wins over the config's
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, [op]), model_config=config)
    assert eff.activities["flops"][0] == 2 * T * K * 3 * 2048 * 768
    reason = _row(eff, "flops_reason")
    assert reason.startswith("model config (hidden_size, moe_intermediate_size, num_experts)")
    assert "top-k 8 from the recorded topk_ids [64, 8]" in reason and _row(eff, "source") == "model config"


def test_sglang_bypassed_moe_reads_its_top_k_argument():
    # fused_moe_bypassed_piecewise_cuda_graph_impl(hidden_states, router_logits, top_k, topk_group, ...)
    est = size_from_config("sglang::fused_moe_bypassed_piecewise_cuda_graph_impl",
                           [[T, 2048], [T, 128], [], [], [], [], [], []],
                           [BF16, BF16, "Scalar", "", "", "", "Scalar", "Scalar"],
                           ["", "", "8", "", "", "", "True", "5"], load_model_config(QWEN3_MOE))
    assert est.flops == 2 * T * 8 * 3 * 2048 * 768 and "from the op's top_k argument" in est.flops_reason


def test_without_a_config_the_sglang_moe_names_the_keys_that_would_rate_it(tmp_path):
    op = ("sglang::moe_forward_piecewise_cuda_graph_impl", [[T, 2048], [T, K], [T, K], [T, 128], []],
          [BF16, "float", INT, BF16, "Scalar"], ["", "", "", "", "3"])
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, [op]), model_config="")
    assert eff.activities["flops"][0] != eff.activities["flops"][0]  # NaN: unknown
    assert "hidden_size, moe_intermediate_size" in _row(eff, "flops_reason") and _row(eff, "gap") == "hidden_size"


def test_an_intermediate_padded_by_the_kernel_is_read_from_the_sub_op_buffer(tmp_path):
    # gpt-oss-20b under vLLM's MXFP4 MoE: the sub-ops allocate one row per routed token of the padded width 2944
    # (config 2880), as the corpus' vLLM capture records ([1, 128, 2944] for 32 tokens x top-4)
    config = "tests/data/model_configs/gpt-oss-20b.config.json"
    ops = [("vllm::moe_forward", [[32, 3072], [32, 32], []], [BF16, BF16, "std::string"], ["", "", "layer.0"]),
           ("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "", "", "Scalar", ""],
            ["[1, 128, 2944]", "15", "", "", "False", ""])]
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, ops, kernel="matmul_kernel"), model_config=config)
    assert eff.activities["flops"][0] == 2 * 32 * 4 * 3 * 3072 * 2944
    assert "intermediate_size 2880 padded to 2944 by the kernel" in _row(eff, "flops_reason")
    # a buffer far wider than the config's (not a padding: the gate+up output 2 x I) is not taken as one
    ops[1] = ops[1][:3] + (["[1, 128, 5888]", "15", "", "", "False", ""],)
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, ops, kernel="matmul_kernel"), model_config=config)
    assert eff.activities["flops"][0] == 2 * 32 * 4 * 3 * 3072 * 2880


# ----------------------------------------------------------------------------------- paged decode attention

POOL = 1_600_000  # KV pool tokens of every layer: [pool, 1, 8, 128] bf16 K and V, 3.3 GB each
RAGGED_TYPES = [BF16, "float", BF16, BF16, BF16, "Scalar", INT, INT, INT, "Scalar", "Scalar", "", "std::string",
                "std::string", "Scalar", "float", "float"]


def ragged_op(pages, seqs=32):
    """aiter paged_attention_ragged(out, workspace, query, key_cache, value_cache, scale, kv_indptr,
    kv_page_indices, kv_last_page_lens, block_size, max_num_partitions, alibi, kv_cache_dtype, kv_cache_layout,
    logits_soft_cap, k_scale, v_scale) as SGLang's aiter backend calls it for decode (page size 1)."""
    dims = [[seqs, 32, 128], [4096], [seqs, 32, 128], [POOL, 1, 8, 128], [POOL, 1, 8, 128], [], [seqs + 1],
            [pages], [seqs], [], [], [], [], [], [], [], []]
    concrete = ["", "", "", "", "", "0.088", "", "", "", "1", "16", "", "auto", "NHD", "0", "", ""]
    return "aiter::paged_attention_ragged", dims, RAGGED_TYPES, concrete


def test_paged_decode_is_charged_the_query_the_kv_pages_it_names_and_the_output():
    name, dims, types, concrete = ragged_op(pages=32 * 2000)
    est = estimate_op(name, dims, types, concrete)
    kv = 32 * 2000 * 8 * 128 * 2 * 2  # named tokens x (K + V) x KV heads x head dim x bf16
    small = (33 + 32 * 2000 + 32) * 4 + 2 * 4  # indptr, page indices, last-page lengths (int32), K / V scales
    assert est.bytes == 2 * 32 * 32 * 128 * 2 + kv + small
    assert est.flops == 2 * (128 + 128) * 32 * 1 * 32 * 2000  # Q K^T and P V over each named token, 32 heads
    assert est.bytes < 0.05 * (2 * POOL * 8 * 128 * 2)  # not the pool: every argument would be 6.6 GB
    assert est.bytes_reason.startswith("upper bound: the KV tokens the page list names")


def test_a_page_list_naming_the_whole_cache_is_a_buffer_not_this_calls_read():
    # SGLang's CUDA-graph decode hands a kv_indices buffer of max batch x max context: not the pages read
    name, dims, types, concrete = ragged_op(pages=4 * POOL)
    est = estimate_op(name, dims, types, concrete)
    assert est.flops is None and est.bytes is None and "a buffer sized for the longest contexts" in est.bytes_reason


def test_a_sglang_decode_step_over_a_13_gb_pool_is_not_above_the_dram_roof(tmp_path):
    # 32 sequences of 4k tokens: 0.54 GB of KV read in 300 us = 1.8 TB/s, a third of an MI300X's 5.3 TB/s; every
    # argument (the 6.6 GB pool) would be 22 TB/s, four times over the roof
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, [ragged_op(pages=32 * 4096)], kernel="paged_attention_ll4mi",
                                           kernel_us=300), model_config="")
    acts = eff.activities
    assert acts["bytes"][0] == pytest.approx(2 * 32 * 32 * 128 * 2 + 32 * 4096 * 4096 + (33 + 32 * 4096 + 32) * 4 + 8)
    assert not bool(acts["over_roof"][0]) and 0.3 < acts["pct_dram"][0] < 0.4


def test_aiter_paged_attention_v1_is_read_with_its_own_argument_order():
    # aiter paged_attention_v1(out, workspace, query, key_cache, value_cache, scale, block_tables, cu_query_lens,
    # context_lens, max_context_len, alibi, kv_cache_dtype, kv_cache_layout, ...): not vLLM's v1 layout
    dims = [[8, 32, 128], [1024], [8, 32, 128], [5000, 16, 8, 128], [5000, 16, 8, 128], [], [8, 64], [], [8], [],
            [], [], []]
    types = [BF16, "float", BF16, BF16, BF16, "Scalar", INT, "", INT, "Scalar", "", "std::string", "std::string"]
    concrete = ["", "", "", "", "", "0.088", "", "", "", "700", "", "auto", "NHD"]
    est = estimate_op("aiter::paged_attention_v1", dims, types, concrete)
    assert est.flops == 2 * 256 * 32 * 8 * 700  # min(max_context_len 700, 64 pages x 16) per sequence
    assert est.bytes == 2 * 8 * 32 * 128 * 2 + 8 * 700 * 8 * 128 * 2 * 2 + (8 * 64 + 8) * 4
    assert "max_context_len 700" in est.bytes_reason


def test_a_wrapper_launching_its_childs_kernel_is_rated_through_the_child(tmp_path):
    """A Python wrapper op (no rule of its own: every argument it gets, the 6.6 GB KV pool included, would be
    charged) whose child records the paged decode's arguments and launches nothing: the kernel takes the
    child's figures, said so."""
    name, dims, types, concrete = ragged_op(pages=32 * 4096)
    wrapper = ("sglang::paged_decode_wrapper", dims[2:5] + [[33], [32 * 4096]], types[2:5] + [INT, INT],
               [""] * 5)
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, [wrapper, (name, dims, types, concrete)],
                                           kernel="paged_attention_ll4mi", kernel_us=300), model_config="")
    child = estimate_op(name, dims, types, concrete)
    acts = eff.activities
    assert acts["bytes"][0] == child.bytes and acts["flops"][0] == child.flops
    assert _row(eff, "bytes_reason").startswith("through its sub-op aiter::paged_attention_ragged: upper bound")
    assert not bool(acts["over_roof"][0])
    alone = tb_gpuinsight.analyze(trace_file(tmp_path, [wrapper], kernel="paged_attention_ll4mi", kernel_us=300),
                                  model_config="")
    assert alone.activities["bytes"][0] > 10 * child.bytes and bool(alone.activities["over_roof"][0])
    # a child whose rule cannot size the call (its page list is a whole-cache buffer): unknown, not every argument
    name, dims, types, concrete = ragged_op(pages=4 * POOL)
    wrapper = ("sglang::paged_decode_wrapper", dims[2:5] + [[33], [4 * POOL]], types[2:5] + [INT, INT], [""] * 5)
    eff = tb_gpuinsight.analyze(trace_file(tmp_path, [wrapper, (name, dims, types, concrete)],
                                           kernel="paged_attention_ll4mi", kernel_us=300), model_config="")
    assert eff.activities["bytes"][0] != eff.activities["bytes"][0] and not bool(eff.activities["over_roof"][0])
    assert "through its sub-op aiter::paged_attention_ragged: the page list" in _row(eff, "bytes_reason")


# --------------------------------------------------------------- FlashAttention-3 (SGLang's backend on Hopper)

def fa3_op(q, k, table=None, cu=None, max_q="", max_k="", causal="True"):
    """sgl_kernel::fwd(q, k, v, k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q,
    seqused_k, max_seqlen_q, max_seqlen_k, page_table, ..., softmax_scale 23, is_causal 24, ...)."""
    dims = [q, k, k, [], [], [], [], cu or [], cu or [], [], [], [q[0]] if table else [], [], [], table or []]
    dims += [[]] * 20
    paged = INT if table else ""  # an absent (None) argument records no type
    types = [BF16, BF16, BF16, "", "", "", "", INT, INT, "", "", paged, "Scalar", "Scalar", paged] + [""] * 20
    concrete = [""] * 12 + [str(max_q), str(max_k), ""] + [""] * 8 + ["0.088", causal] + [""] * 10
    return "sgl_kernel::fwd", dims, types, concrete


def test_fa3_paged_decode_reads_each_sequences_page_table_capacity_at_most():
    est = estimate_op(*fa3_op([32, 32, 128], [20000, 16, 8, 128], table=[32, 256], cu=[33], max_q=1))
    assert est.flops == 2 * 256 * 32 * 32 * 256 * 16  # 32 sequences x 4096 tokens, 32 heads, D = D_v = 128
    assert est.bytes == 2 * 32 * 32 * 128 * 2 + 32 * 4096 * 8 * 128 * 2 * 2 + (33 + 33 + 32 + 32 * 256) * 4
    assert "page table's capacity (256 pages x 16 tokens)" in est.bytes_reason
    # a CUDA-graph page table as large as the cache: not this call's pages
    est = estimate_op(*fa3_op([32, 32, 128], [20000, 16, 8, 128], table=[160, 2560], cu=[33], max_q=1))
    assert est.bytes is None and "a buffer sized for the longest contexts" in est.bytes_reason


def test_fa3_varlen_prefill_counts_causal_pairs_of_packed_sequences():
    est = estimate_op(*fa3_op([1000, 32, 128], [1000, 8, 128], cu=[5], max_q=250, max_k=250))
    assert est.flops == 2 * 256 * 32 * 4 * (250 * 251 // 2)  # 4 sequences of 250, causal
    assert est.bytes == 2 * 1000 * 32 * 128 * 2 + 2 * 1000 * 8 * 128 * 2 + 2 * 5 * 4
