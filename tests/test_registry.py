"""The performance-model registry: every family's FLOP and byte formulas against first principles (numbers worked
out by hand from the op's definition, not from the code under test)."""
from __future__ import annotations

import pytest

from tb_gpuinsight.estimate import registry
from tb_gpuinsight.estimate.flops import estimate_op

BF16, F32, FP8, I32, I64, U8 = "c10::BFloat16", "float", "c10::Float8_e4m3fn", "int", "long int", "unsigned char"


def est(name, dims, types, concrete=None):
    return estimate_op(name, tuple(dims), tuple(types), tuple(concrete) if concrete is not None else None)


def test_every_family_registers_documented_entries():
    entries = registry.registered()
    assert {m.family for m in entries.values()} >= set(registry.FAMILIES)
    for name, model in entries.items():
        assert model.source, f"{name} has no source"
        assert model.flops is not None or model.zero_flops or model.bytes is not None, name


def test_any_namespace_entries_match_by_base_name():
    assert registry.lookup("sgl_kernel::rmsnorm") is registry.lookup("_C::rmsnorm")
    assert registry.lookup("_C::rms_norm").family == "norms"
    assert registry.lookup("mylib::not_an_op") is None


# ------------------------------------------------------------------------------------------------ GEMM

def test_grouped_mm_2d_by_3d_sums_the_groups():
    """96 tokens split over 4 experts, each [64 -> 32]: 2 x 96 x 64 x 32 FLOPs whatever the split; every expert
    weight, the tokens and the offsets read, [96, 32] written."""
    e = est("aten::_grouped_mm", [(96, 64), (4, 64, 32), (4,), (), ()], [BF16, BF16, I32, "", ""])
    assert e.flops == 2 * 96 * 64 * 32
    assert e.bytes == (96 * 64 + 4 * 64 * 32) * 2 + 4 * 4 + 96 * 32 * 2


def test_grouped_mm_other_layouts():
    batched = est("aten::_grouped_mm", [(4, 8, 64), (4, 64, 32), (), (), ()], [BF16, BF16, "", "", ""])
    assert batched.flops == 2 * 4 * 8 * 64 * 32
    # weight gradient of a MoE layer: the inner (token) dim split in 4 groups, one [64, 32] result per group
    wgrad = est("aten::_grouped_mm", [(64, 96), (96, 32), (4,), (), ()], [BF16, BF16, I32, "", ""])
    assert wgrad.flops == 2 * 64 * 96 * 32 and wgrad.bytes == (64 * 96 + 96 * 32) * 2 + 16 + 4 * 64 * 32 * 2
    bad = est("aten::_grouped_mm", [(96, 64), (4, 48, 32), (4,), (), ()], [BF16, BF16, I32, "", ""])
    assert bad.flops is None and "inconsistent" in bad.flops_reason


def test_scaled_grouped_mm_fp8_writes_bf16():
    e = est("aten::_scaled_grouped_mm", [(96, 64), (4, 64, 32), (96,), (4, 32), (4,), (), (), (), ()],
            [FP8, FP8, F32, F32, I32, "", "", "", "Scalar"])
    assert e.flops == 2 * 96 * 64 * 32
    assert e.bytes == 96 * 64 + 4 * 64 * 32 + 96 * 4 + 4 * 32 * 4 + 4 * 4 + 96 * 32 * 2


def test_custom_gemms_write_their_output():
    # vLLM cutlass_scaled_mm(out[M, N], a[M, K], b[K, N], a_scales[M, 1], b_scales[1, N], bias=None)
    e = est("_C::cutlass_scaled_mm", [(16, 256), (16, 128), (128, 256), (16, 1), (1, 256), ()],
            [BF16, FP8, FP8, F32, F32, ""])
    assert e.flops == 2 * 16 * 128 * 256
    assert e.bytes == 16 * 128 + 128 * 256 + 16 * 4 + 256 * 4 + 16 * 256 * 2
    # FP4 packs two values per byte: a[M, K/2], b[N, K/2]
    fp4 = est("_C::cutlass_scaled_fp4_mm", [(16, 256), (16, 64), (256, 64), (16, 8), (256, 8), ()],
              [BF16, U8, U8, U8, U8, F32])
    assert fp4.flops == 2 * 16 * 128 * 256


# ------------------------------------------------------------------------------------------------ attention

def test_flash_attn_varlen_matches_the_aten_flash_op():
    """flash-attn's own varlen op and aten's _flash_attention_forward on the same packed inputs: same pairs."""
    q, k = (512, 8, 64), (512, 8, 64)
    ours = est("flash_attn::_flash_attn_varlen_forward",
               [q, k, k, (3,), (3,), (), (), (), (), (), (), ()],
               [BF16, BF16, BF16, I32, I32, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
               ["", "", "", "", "", "256", "256", "0.0", "0.125", "True", "-1", "0"])
    # two sequences of 256, causal: 256 x 257 / 2 pairs each, 4 x D FLOPs per pair and head
    assert ours.flops == 2 * 8 * (256 * 257 // 2) * 4 * 64


def test_paged_prefill_reads_only_the_indexed_kv_tokens():
    """aiter mha_batch_prefill over a 1M-token KV cache with 15,616 indexed tokens: q read, out written and only
    those tokens of K and V read (not the whole cache)."""
    q, cache = (4096, 32, 128), (1_000_000, 8, 128)
    dims = [q, cache, cache, (9,), (9,), (15616,)] + [()] * 12
    types = [BF16, BF16, BF16, I32, I32, I32] + ["Scalar"] * 12
    concrete = ["", "", "", "", "", "", "512", "2048", "0.0", "0.088", "0.0", "False", "True", "-1", "-1",
                "False", "False", ""]
    e = est("aiter::mha_batch_prefill", dims, types, concrete)
    token = 8 * 128 * 2
    assert e.bytes == 2 * 4096 * 32 * 128 * 2 + 15616 * 2 * token + (9 + 9 + 15616) * 4
    assert e.flops is not None and e.flops_reason.startswith("upper bound:")
    # 8 sequences of 512 queries over 1,952 keys each (bottom-right causal): pairs per head below 512 x 1952
    assert e.flops <= 8 * 32 * 512 * 1952 * 4 * 128


def test_attention_with_cache_found_by_layer_name_is_unknown_not_wrong():
    e = est("vllm::unified_attention_with_output", [(32, 4096), (32, 1024), (32, 1024), (32, 4096), ()],
            [BF16] * 4 + ["str"])
    assert e.flops is None and e.bytes is None and "layer name" in e.bytes_reason


# ------------------------------------------------------------------------------------------------ MoE

def test_fused_experts_from_first_principles():
    """64 tokens, top-2 of 8 experts, hidden 256, intermediate 128: per routed token 2 x 256 x 256 (gate+up),
    2 x 128 (gated activation) and 2 x 128 x 256 (down)."""
    dims = [(64, 256), (8, 256, 256), (8, 256, 128), (64, 2), (64, 2)]
    e = est("vllm::outplace_fused_experts", dims, [BF16, BF16, BF16, F32, I32])
    routed = 64 * 2
    assert e.flops == routed * (2 * 256 * 256 + 2 * 128 + 2 * 256 * 128)
    weights = (8 * 256 * 256 + 8 * 256 * 128) * 2
    intermediates = 2 * routed * (256 + 128 + 256) * 2
    assert e.bytes == weights + intermediates + 64 * 2 * 4 + 64 * 2 * 4 + 2 * 64 * 256 * 2
    assert e.bytes_reason == ""  # 128 routed tokens can reach all 8 experts: exact


def test_moe_with_hidden_weights_says_why():
    e = est("vllm::moe_forward", [(64, 256), (64, 8), ()], [BF16, BF16, "str"])
    assert e.flops is None and e.bytes is None and "expert weights" in e.flops_reason


# ------------------------------------------------------------------------------------------------ norms

def test_rms_norms():
    x = (32, 4096)
    plain = est("_C::rms_norm", [x, x, (4096,), ()], [BF16, BF16, BF16, "Scalar"])
    assert plain.flops == 4 * 32 * 4096 and plain.bytes == 2 * 32 * 4096 * 2 + 4096 * 2
    fused = est("sgl_kernel::fused_add_rmsnorm", [x, x, (4096,), (), ()], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert fused.flops == 5 * 32 * 4096 and fused.bytes == 4 * 32 * 4096 * 2 + 4096 * 2


def test_batch_norm_backward_gradient_keeps_its_dtype():
    """bf16 activations beside fp32 statistics: grad_input is written in bf16 (not promoted to fp32)."""
    x, c = (8, 64, 16, 16), (64,)
    dims = [x, x, c, c, c, c, c, (), (), ()]
    types = [BF16, BF16, F32, F32, F32, F32, F32, "Scalar", "Scalar", "GenericList"]
    e = est("aten::native_batch_norm_backward", dims, types)
    n = 8 * 64 * 16 * 16
    assert e.bytes == 2 * n * 2 + 5 * 64 * 4 + n * 2


# ------------------------------------------------------------------------------------------------ pointwise

def test_gated_activation():
    """silu_and_mul(out[16, 512], x[16, 1024]): per output silu(g) = g / (1 + exp(-g)) is neg, exp, add, divide,
    then one multiply by u: 5 FLOPs; x read, out written."""
    e = est("_C::silu_and_mul", [(16, 512), (16, 1024)], [BF16, BF16])
    assert e.flops == 5 * 16 * 512 and e.bytes == 16 * 1024 * 2 + 16 * 512 * 2


@pytest.mark.parametrize("name,per_output", [
    ("_C::gelu_and_mul", 1 + 1 + 1 + 1 + 1 + 1),  # g / sqrt2, erf, + 1, * g, * 0.5; * u
    ("_C::gelu_tanh_and_mul", 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1),  # g^3, * 0.044715, + g, * c, tanh, + 1, * g, * .5; * u
    ("_C::gelu_quick_and_mul", 1 + 1 + 1 + 1 + 1 + 1),  # * 1.702, neg, exp, + 1, g / (.); * u
    ("_C::fatrelu_and_mul", 1 + 1),  # compare with the threshold; * u
    ("_C::swigluoai_and_mul", 1 + 2 + 5 + 1 + 1),  # clamp g, clamp u both sides, g * sigmoid(alpha g), u + 1; *
    ("sgl_kernel::mul_and_silu", 4 + 1),
])
def test_gated_activation_flops_per_output_from_the_definition(name, per_output):
    e = est(name, [(8, 256), (8, 512)], [BF16, BF16])
    assert e.flops == per_output * 8 * 256


def test_aiter_add_rmsnorm():
    """add_rmsnorm(out, input, residual_in, residual_out, weight, eps) on [T, H] = [64, 4096]: add, then square,
    sum, scale by 1/rms and by the weight: 5 FLOPs per element; input, residual_in, weight read, out and
    residual_out written: 4 x T x H x 2 + H x 2 bytes."""
    x = (64, 4096)
    e = est("aiter::add_rmsnorm", [x, x, x, x, (4096,), ()], [BF16] * 5 + ["Scalar"])
    assert e.flops == 5 * 64 * 4096 and e.bytes == 4 * 64 * 4096 * 2 + 4096 * 2 and e.bytes_reason == ""


def test_aiter_group_norm_both_schemas():
    """group norm of x[2, 320, 64, 64] bf16 in 32 groups: 5 FLOPs per element; x read and y written once, weight
    and bias [320] read; the newer schema passes y and a per-group fp32 workspace [2, 32, 2] (touched once)."""
    x, n = (2, 320, 64, 64), 2 * 320 * 64 * 64
    old = est("aiter::_groupnorm_run", [x, (), (320,), (320,), ()], [BF16, "Scalar", BF16, BF16, "Scalar"])
    new = est("aiter::_groupnorm_run", [x, (2, 32, 2), x, (), (320,), (320,), ()],
              [BF16, F32, BF16, "Scalar", BF16, BF16, "Scalar"])
    assert old.flops == new.flops == 5 * n
    assert old.bytes == 2 * n * 2 + 2 * 320 * 2
    assert new.bytes == old.bytes + 2 * 32 * 2 * 4


def test_sglang_store_cache():
    """store_cache(k_cache[65536, 1024], v_cache[65536, 1024], indices[32], k[32, 1024], v[32, 1024]) in bf16:
    k, v and the int64 slots read, 2 x 32 x 1024 elements written into the caches; the caches are not read."""
    cache, kv = (65536, 1024), (32, 1024)
    e = est("sglang::store_cache", [cache, cache, (32,), kv, kv], [BF16, BF16, I64, BF16, BF16])
    assert e.flops == 0 and e.bytes == 2 * 32 * 1024 * 2 + 32 * 8 + 2 * 32 * 1024 * 2
    fp8 = est("sglang::store_cache", [kv, kv, cache, cache, (32,)], [BF16, BF16, U8, U8, I64])
    assert fp8.bytes == 2 * 32 * 1024 * 2 + 32 * 8 + 2 * 32 * 1024 * 1  # an fp8 cache takes 1 byte per element


def test_rotary_is_not_an_embedding_lookup():
    """rotary_embedding(positions[T], query[T, 32*128], key[T, 8*128], 128, cos_sin_cache[4096, 128], neox):
    q and k read and written, positions and the T cos/sin rows read; 3 FLOPs per rotated element."""
    dims = [(64,), (64, 4096), (64, 1024), (), (4096, 128), ()]
    e = est("sgl_kernel::rotary_embedding", dims, [I64, BF16, BF16, "Scalar", F32, "Scalar"],
            ["", "", "", "128", "", "True"])
    qk = 64 * (4096 + 1024) * 2
    assert e.bytes == 2 * qk + 64 * 8 + 64 * 128 * 4
    assert e.flops == 3 * 64 * (32 + 8) * 128


# ------------------------------------------------------------------------------------------------ movement

def test_cat_reads_and_writes_each_input_once():
    e = est("aten::cat", [((8, 4), (8, 4)), ()], ["TensorList", "Scalar"], ["", "0"])
    assert (e.flops, e.flops_reason) == (0.0, "") and e.bytes == 2 * 2 * 8 * 4 * 4


def test_gather_out_variant_does_not_read_out():
    """gather(self[100, 64], 1, index[100, 8], sparse_grad, out=[100, 8]): index read, 800 elements gathered and
    written; the out tensor is not read."""
    e = est("aten::gather", [(100, 64), (), (100, 8), (), (100, 8)], [F32, "Scalar", I64, "Scalar", F32],
            ["", "1", "", "False", ""])
    assert e.bytes == 100 * 8 * 8 + 2 * 800 * 4 and e.flops == 0.0


def test_kv_cache_write_counts_the_written_tokens():
    """reshape_and_cache_flash(key[T, 8, 128], value, key_cache[blocks, 16, 8, 128], value_cache, slots[T], ...):
    key and value read, each token written into the fp8 cache, slots read; the multi-GB cache is not read."""
    kv, cache = (32, 8, 128), (10000, 16, 8, 128)
    e = est("_C_cache_ops::reshape_and_cache_flash", [kv, kv, cache, cache, (32,), (), (), ()],
            [BF16, BF16, FP8, FP8, I64, "str", F32, F32])
    n = 32 * 8 * 128
    assert e.bytes == 2 * n * 2 + 32 * 8 + 2 * n * 1 and e.flops == 0.0


def test_comm_ops_do_no_flop_work():
    e = est("_c10d_functional::all_reduce", [(1024,), (), ()], [BF16, "str", "str"])
    assert e.flops == 0.0


@pytest.mark.parametrize("name", ["aten::mm", "_C::rms_norm", "aiter::mha_batch_prefill", "vllm::moe_forward"])
def test_malformed_arguments_never_raise(name):
    for dims in ([], [("x",)], [(1,)] * 30, [(-1, 2), (2, 3)]):
        e = est(name, dims, ["float"] * len(dims))
        assert e.flops is None or e.flops >= 0


def test_triton_kernel_without_inductor_figures_is_an_inferred_range_never_exact():
    """triton_poi_fused_add_0(in0[64, 128], in1[64, 128], out[64, 128], xnumel): the buffers are inputs and outputs
    alike; the figure is the upper bound (each buffer touched once: 3 x 64 x 128 x 2 bytes), marked inferred."""
    e = est("triton_poi_fused_add_0", [(64, 128)] * 3 + [()], [BF16] * 3 + ["Scalar"])
    assert e.bytes == 3 * 64 * 128 * 2 and e.bytes_reason.startswith("inferred:")
    assert e.flops is None and "benchmark_kernel" in e.flops_reason


def test_fused_adamw_step():
    """AdamW over two parameters of 1,024 and 4,096 x 1,024 elements: 12 FLOPs and 7 fp32 accesses per element."""
    params = ((1024,), (4096, 1024))
    dims = [params] * 4 + [(), ((), ())] + [()] * 9
    types = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    concrete = [""] * 6 + ["0.001", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""]
    e = est("aten::_fused_adamw_", dims, types, concrete)
    n = 1024 + 4096 * 1024
    assert e.flops == 12 * n and e.bytes == 7 * 4 * n and e.bytes_reason.startswith("upper bound:")


def test_foreach_add_reads_both_lists_and_writes_the_first():
    lists = ((8, 8), (16,))
    e = est("aten::_foreach_add_", [lists, lists, ()], ["TensorList", "TensorList", "Scalar"], ["", "", "1"])
    assert e.flops == 80 and e.bytes == 3 * 4 * 80


def test_paged_decode_reads_the_context_not_the_cache():
    """paged_attention_v1 for 8 sequences of at most 1,000 tokens (block tables of 64 blocks of 16), 32 query heads,
    8 KV heads, D = 128, over a 10,000-block cache: each query attends 1,000 keys (upper bound), and the KV read is
    8 x 1,000 tokens x (K + V) rows, not the cache."""
    kc, vc = (10000, 8, 16, 16, 8), (10000, 8, 128, 16)
    dims = [(8, 32, 128), (8, 32, 128), kc, vc, (), (), (8, 64), (8,), (), (), ()]
    types = [BF16, BF16, BF16, BF16, "Scalar", "Scalar", I32, I32, "Scalar", "Scalar", ""]
    concrete = ["", "", "", "", "8", "0.088", "", "", "16", "1000", ""]
    e = est("_C::paged_attention_v1", dims, types, concrete)
    assert e.flops == 8 * 32 * 1000 * 4 * 128 and e.flops_reason.startswith("upper bound:")
    token = 2 * 8 * 128 * 2
    assert e.bytes == 2 * 8 * 32 * 128 * 2 + 8 * 1000 * token + 8 * 64 * 4 + 8 * 4


def test_flash_attn_varlen_over_a_paged_cache_reads_the_named_blocks():
    """_flash_attn_varlen_forward(q[512, 8, 64], k_cache[4000, 16, 8, 64], v_cache, cu_q[3], cu_k[3], ...,
    block_table[2, 16]): 2 x 16 blocks x 16 tokens of K and V read, not the 4,000-block cache."""
    cache = (4000, 16, 8, 64)
    dims = [(512, 8, 64), cache, cache, (3,), (3,)] + [()] * 10 + [(2, 16), (), ()]
    types = [BF16, BF16, BF16, I32, I32] + ["Scalar"] * 10 + [I32, "", ""]
    concrete = ["", "", "", "", "", "256", "256", "0.0", "0.125", "True", "-1", "-1", "0.0", "", "False", "", "",
                ""]
    e = est("flash_attn::_flash_attn_varlen_forward", dims, types, concrete)
    assert e.bytes == 2 * 512 * 8 * 64 * 2 + 2 * (2 * 16 * 16) * 8 * 64 * 2 + 3 * 4 * 2 + 2 * 16 * 4
    assert e.flops == 2 * 8 * (256 * 257 // 2) * 4 * 64 and e.flops_reason.startswith("upper bound:")
