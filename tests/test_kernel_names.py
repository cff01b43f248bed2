"""Kernel names on real corpus names: demangling, short display names, one class per kernel, honest row labels."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from werkzeug.datastructures import MultiDict

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels import itanium, names as kernel_names
from tb_gpuinsight.analysis.kernels.names import (CLASSES, DEMANGLER, classify, demangle, display_name, kernel_class,
                                                  name_fields, name_scopes, uses_tensor_cores, words)
from tb_gpuinsight.analysis.kernels.rows import disambiguate, group_rows
from tb_gpuinsight.routes.kernels import kernels

from .corpus import corpus_path

CASES = [
    ('tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz',
     'void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)',
     'cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8', 'GEMM'),
    ('hta/negative_queue_length_values_check__rank0.json.gz',
     'void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1::Params)',
     'cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1', 'GEMM'),
    ('hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz',
     'cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1',
     'cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1', 'conv'),
    ('hta/benchmark_result_2869224_1695835535_trace.json.gz',
     'sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn',
     'sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn', 'conv'),
    ('hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz',
     'void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)',
     'cudnn::bn_fw_tr_1C11_kernel_NCHW', 'norm'),
    ('hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz',
     'void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::ComputeOffsetsParams)',
     'cask_cudnn_infer::computeOffsetsKernel', 'other'),
    ('tracelens/torch_compile_triton__trace.json.gz',
     'Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMBSK_GLS0_ISA942_IU1_K1_LDSTI0_LBSPPA512_LBSPPB512_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT4_12_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK0_SKFTR0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB4_WSGRA0_WSGRB0_WS64_WG64_4_1',
     'MT256x192x64 MI16x16x1 TN #43c7', 'GEMM'),
    ('hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz',
     'Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128_LBSPPM0_LPA8_LPB8_LPM0_LRVW4_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS2_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO1_SRVW0_SSO0_SVW1_TLDS1_USFGROn1_VSn1_VWA1_VWB1_WSGRA1_WSGRB1_WS64_WG64_4_1',
     'MT64x16x32 MI16x16x1 TN #ae22', 'GEMM'),
    ('tracelens/vllm_decode_full__graph_execution.json.gz',
     '_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_',
     'ck_tile::Rmsnorm2dFwd', 'norm'),
    ('tracelens/mi210__gpu_only_trace.json.gz',
     'igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt256x64x8_wt64x16x4_ws1x1_wr2x2_ta1x1x8x1_1x8x1x32_tb1x1x2x1_1x8x1x32_me',
     'igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt256x64x8_wt64x16x4_ws1x1_wr2x2_ta1x1x8x1_1x8x1x32_tb1x1x2x1_1x8x1x32_me', 'conv'),
    ('tracelens/torch_compile_triton__trace.json.gz',
     'triton_red_fused_add_mean_mul_pow_rsqrt_0',
     'triton_red_fused_add_mean_mul_pow_rsqrt_0', 'norm'),
    ('hta/triton_example.json.gz',
     'triton_poi_fused_add_cos_sin_0',
     'triton_poi_fused_add_cos_sin_0', 'elementwise'),
    ('hta/negative_queue_length_values_check__rank0.json.gz',
     'triton__0d1d2d3d',
     'triton__0d1d2d3d', 'other'),
    ('param/dlrm_8ranks/worker1_step_12.1694128201556.pt.trace.json.gz',
     'ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)',
     'ncclKernel_AllReduce_RING_LL_Sum_float', 'communication'),
    ('hta/trace_diff__test.json.gz',
     'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)',
     'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t', 'communication'),
    ('hta/sampled_rank-0.json.gz',
     'void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)',
     'vectorized_elementwise_kernel<sigmoid_kernel_cuda>', 'elementwise'),
    ('hta/negative_queue_length_values_check__rank0.json.gz',
     'void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, at::detail::Array<char*, 2> >(int, at::native::AbsFunctor<float>, at::detail::Array<char*, 2>)',
     'vectorized_elementwise_kernel<AbsFunctor>', 'elementwise'),
    ('hta/benchmark_result_2869224_1695835535_trace.json.gz',
     'void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1})',
     'elementwise_kernel<CUDAFunctor_add>', 'elementwise'),
    ('tracelens/mi210__gpu_only_trace.json.gz',
     'void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8>)',
     'reduce_kernel<sum_functor>', 'reduction'),
    ('tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz',
     'void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)',
     'pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>', 'attention'),
    ('tracelens/h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz',
     'void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)',
     'vectorized_layer_norm_kernel', 'norm'),
    ('tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz',
     'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas',
     'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas', 'GEMM'),
    ('hta/df_index_resolver.json.gz',
     'volta_sgemm_128x64_tn',
     'volta_sgemm_128x64_tn', 'GEMM'),
    ('tracelens/h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz',
     'void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 3, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)',
     'softmax_warp_forward', 'reduction'),
    ('tracelens/vllm_decode_full__graph_execution.json.gz',
     'kernel_unified_attention_2d',
     'kernel_unified_attention_2d', 'attention'),
    ('tracelens/mi210__gpu_only_trace.json.gz',
     'void at::native::batch_norm_backward_kernel<c10::BFloat16, c10::BFloat16, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, bool, float)',
     'batch_norm_backward_kernel', 'norm'),
    ('hta/sampled_rank-0.json.gz',
     'void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, long)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char*, long)#1} const&)::{lambda(int)#1})',
     'index_elementwise_kernel<index_put_kernel_impl>', 'elementwise'),
]

CK = CASES[8][1]


@pytest.mark.parametrize("source,name,display,klass", CASES, ids=[c[2][:40] for c in CASES])
def test_display_name_and_class_of_real_kernels(source, name, display, klass):
    fields = name_fields(name)
    assert fields["display_name"] == display
    assert fields["kernel_class"] == klass in CLASSES
    assert len(display) <= 160


def test_itanium_names_demangle_and_plain_names_do_not():
    if DEMANGLER is None:
        pytest.skip("no demangler wheel on this platform: names stay raw")
    text = demangle(CK)  # ROCm CK names use `DF16b` (std::bfloat16_t), which older libstdc++ cannot demangle
    assert text.startswith("void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<")
    assert "std::bfloat16_t" in text
    assert demangle("volta_sgemm_128x64_tn") is None
    assert demangle(CASES[0][1]) is None  # CUPTI already demangled it
    assert demangle("_Zgarbage") is None  # malformed: shown raw, no error
    assert name_fields(CK)["demangled"] == text


# Clang 18+ (hipcc) mangles template parameter declarations (`TnPFT_RKS3_E`) that older demanglers reject whole
# (the SGLang ROCm activation kernel, as a 2025 MI300X trace records it).
SGL_HIP = "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i"


def test_template_parameter_declarations_never_leave_a_name_mangled():
    assert not display_name(SGL_HIP).startswith("_Z")
    assert display_name(SGL_HIP).startswith("sgl_hip::activation::act_and_mul_kernel")
    assert itanium.qualified_name(SGL_HIP) == "sgl_hip::activation::act_and_mul_kernel<…>"
    assert itanium.qualified_name("_ZN5outerIiE5innerEv") == "outer<…>::inner"
    assert itanium.qualified_name("_Z3foov") == "foo" and itanium.qualified_name("foo") is None
    assert itanium.qualified_name("_ZN999tooLongE") is None  # a length past the end: not a name


def test_llvm_demangler_reads_template_parameter_declarations():
    if "llvm" not in dict(itanium.DEMANGLERS):
        pytest.skip("LLVM's demangler (pycxxfilt) has no wheel for this Python: the qualified name is shown")
    text = demangle(SGL_HIP)
    assert text.startswith("void sgl_hip::activation::act_and_mul_kernel<__hip_bfloat16, &")
    assert "silu<__hip_bfloat16>" in text
    assert display_name(SGL_HIP) == "sgl_hip::activation::act_and_mul_kernel<silu>"
    # Every `_Z` template kernel whose prefix parses reads demangled or qualified, never raw.
    for name in ("_ZN7sgl_hip3moe23topkGatingSoftmaxKernelILi8ELi8ELi4ELi16ELi32EiEEvPKfPKbPfiPT4_Piiii.kd",
                 "_ZN5aiter37dynamic_per_group_scaled_quant_kernelIDF16bDB8_Li32EEEvPT0_PfPKT_PKfiliibPKii"):
        assert demangle(name) and not display_name(name).startswith("_Z")


def test_tensile_names_sharing_a_long_prefix_stay_distinct(corpus):
    trace = tb_gpuinsight.load(corpus_path("tracelens/torch_compile_triton__trace.json.gz"))
    names = [n for n in set(trace.kernels.strings["name"]) if n.startswith("Cijk_")]
    assert len(names) >= 2 and len({n[:50] for n in names}) == 1
    shown = {display_name(n) for n in names}
    assert len(shown) == len(names)
    # macro tile, matrix instruction, A and B's transposes (Alik: A transposed; Bljk: B not), a hash of the name
    assert all(re.fullmatch(r"MT256x192x64 MI16x16x1 TN #[0-9a-f]{4}", s) for s in shown)


def test_one_classifier_for_memcpy_memset_and_launching_op():
    assert kernel_class("Memcpy HtoD (Pageable -> Device)", "memcpy") == "memcpy"
    assert kernel_class("Memset (Device)", "memset") == "memset"
    assert kernel_class("void cudnn::ops::nchwToNhwcKernel<float>(float const*)", "kernel",
                        "aten::cudnn_convolution") == "conv"
    assert kernel_class("some_fused_kernel", "kernel", "aten::native_layer_norm") == "norm"
    assert name_fields("Memcpy DtoD (Device -> Device)", "memcpy")["kernel_class"] == "memcpy"


def test_rows_that_fold_to_one_display_name_get_a_stable_suffix():
    a = "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, at::detail::Array<char*, 2> >(int)"
    b = "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<double>, at::detail::Array<char*, 2> >(int)"
    rows = disambiguate([{"name": n, **name_fields(n)} for n in (a, b, a)])
    assert rows[0]["display_name"] != rows[1]["display_name"]
    assert rows[0]["display_name"] == rows[2]["display_name"]
    assert rows[0]["display_name"].startswith("vectorized_elementwise_kernel<AbsFunctor> #")


def test_rows_are_honest_on_a_rocm_trace(corpus):
    """MI250 (ROCm) records no occupancy: None, not 0; memcpy rows carry no dtype; bound only with FLOPs and bytes."""
    eff = tb_gpuinsight.analyze(corpus_path("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    rows = group_rows(eff.by_name())
    assert rows and all(r["occupancy"] is None for r in rows)
    for r in rows:
        assert {"display_name", "demangled", "kernel_class"} <= set(r)
        if r["kind"] in ("memcpy", "memset"):
            assert r["dtype"] is None and r["kernel_class"] == r["kind"]
        if r["flops"] is None or r["bytes"] is None:
            assert r["bound"] in (None, "communication")
        else:
            assert r["bound"] in ("compute", "memory")
    assert any(r["kernel_class"] == "GEMM" and r["display_name"].startswith("MT") for r in rows)


class _Request:
    def __init__(self, **args):
        self.args = MultiDict(args)


def test_kernel_route_rows_carry_the_name_fields(corpus):
    eff = tb_gpuinsight.analyze(corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"))
    page = kernels(eff, _Request(limit="500"))
    assert page["rows"]
    for row in page["rows"]:
        assert row["kernel_class"] in CLASSES and row["display_name"]
        assert len(row["display_name"]) <= len(row["name"]) + 6
    flash = [r for r in page["rows"] if "flash_fwd_kernel" in r["name"]]
    assert flash and all(r["kernel_class"] == "attention" for r in flash)
    assert any(r["display_name"].startswith("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>") for r in flash)


def test_api_and_cli_tables_carry_the_name_fields(corpus, capsys):
    import json

    from tb_gpuinsight.cli import main

    path = corpus_path("tracelens/vllm_decode_full__graph_execution.json.gz")
    df = tb_gpuinsight.kernel_table(path)
    ck = df[df["name"].str.startswith("_ZN7ck_tile")]
    assert len(ck) == 2 and len(set(ck["display_name"])) == 2  # two CK instances: told apart by a hash
    assert all(d.startswith("ck_tile::Rmsnorm2dFwd #") for d in ck["display_name"])
    assert ck["kernel_class"].iloc[0] == "norm" and ck["demangled"].iloc[0].startswith("void ck_tile::kentry<")
    assert list(df["total_us"]) == sorted(df["total_us"], reverse=True)
    assert main(["analyze", str(path), "--format", "json", "--top", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert all(r["kernel_class"] in CLASSES and r["display_name"] for r in rows)
    assert main(["analyze", str(path), "--top", "40"]) == 0
    assert "ck_tile::Rmsnorm2dFwd" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- the class registry

TABLE = Path(__file__).parent / "data" / "kernel_classes.tsv"


def _table():
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def test_the_class_table_is_large_and_real():
    rows = _table()
    assert len(rows) >= 150 and all(r["expected"] in CLASSES and r["source"] for r in rows)
    corpus = [r for r in rows if r["source"].startswith("corpus: ")]
    assert len(corpus) >= 100 and len(rows) - len(corpus) >= 100
    assert len({r["name"] for r in rows}) >= 150
    assert {r["expected"] for r in rows} == set(CLASSES)  # every class has real names behind it


@pytest.mark.parametrize("row", _table(), ids=lambda r: f"{r['expected']}:{r['name'][:48]}")
def test_every_name_of_the_table_gets_its_class(row):
    """Real kernel names from the corpus and from public profiler output (tests/data/kernel_classes.tsv), each with
    the class a person gave it and, where recorded, the op that launched it."""
    assert kernel_class(row["name"], "kernel", row["op"] or None) == row["expected"]


def test_every_registry_example_gets_its_entry_class():
    registry = json.loads(kernel_names._REGISTRY_FILE.read_text(encoding="utf-8"))
    checked = 0
    for family in registry["kernels"]:
        for entry in family["entries"]:
            assert entry["why"] and entry["examples"] and family["family"]
            for example in entry["examples"]:
                assert kernel_class(example) == entry["class"], example
                checked += 1
    assert checked >= 60


def test_words_respect_word_parts():
    assert words("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, _typeConvert>") == \
        " void | vllm | fused add rms norm kernel | c 10 | b float 16 | type convert "
    assert words("MxE4m3 RMSNorm s16816gemm") == " mx e 4 m 3 | rms norm | s 16816 gemm "
    name = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8, vllm::_typeConvert<c10::BFloat16> >(c10::BFloat16*)"
    assert kernel_class(name) == "norm"  # was "conv": 'conv' matched inside '_typeConvert'
    assert kernel_class("void vllm::_typeConvert_kernel<float>(float)") == "elementwise"
    scopes = name_scopes("void at::native::(anonymous namespace)::softmax_warp_forward<float, float>(float*, int)")
    assert scopes == {"function": " softmax warp forward ", "namespace": " at | native ", "args": " float ",
                      "params": " float | int "}
    # parameter types are plumbing: cuBLAS's scal (beta * C of a GEMM) is no transpose
    assert kernel_class("void scal_kernel<float, float, 1, false, 6>(cublasTransposeParams<float>, float*)") == "GEMM"


def test_the_2026_kernels_of_the_b200_vllm_run():
    """The kernels of issue 29's B200 vLLM trace: MX MoE GEMMs and nvJet are GEMM (and Tensor Core), the fused
    norm is a norm, the KV-cache write is a memory op, not attention."""
    mx = ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_Ab32_Bb32_Cb32_t128x8x512_s3_et128x8_m128x8x32_c1x1x1_rM_TN_transOut_"
          "schPd2x1x2x3_biasFp32M_bN_tma_ldgstsSf_rgTma_clmp_swiGlu_dynB_sm100f")
    nvjet = "nvjet_sm100_tst_64x16_64x16_2x4_2cta_h_bz_splitK_TNT"
    for name in (mx, nvjet):
        assert kernel_class(name) == "GEMM" and uses_tensor_cores(name, "", "GEMM")
    assert kernel_class("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
                        "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*)", "kernel",
                        "_C_cache_ops::reshape_and_cache_flash") == "memcpy"


def test_communication_by_kernel_family_names_the_link():
    inter = classify("void deep_ep::internode::dispatch<false, 8, 2>(int4*, float*)")
    intra = classify("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*)")
    ll = classify("void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*)")
    assert (inter.klass, inter.link) == ("communication", "internode") == (ll.klass, ll.link)
    assert (intra.klass, intra.link) == ("communication", "intranode")
    assert classify("nvshmemi_ibgda_put_nbi_warp").link == "internode"
    assert classify("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)").link is None  # not said
    assert name_fields("void deep_ep::internode_ll::combine<8>(int)")["kernel_family"].endswith(", internode")
    assert classify("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)").klass == "other"


def test_ambiguous_names_take_the_launching_op_then_recorded_flops():
    assert kernel_class("_fwd_kernel") == "other"
    assert kernel_class("_fwd_kernel", "kernel", "vllm::unified_attention_with_output") == "attention"
    assert kernel_class("triton__0d1d2d3d", "kernel", "aten::addmm") == "GEMM"
    assert kernel_class("triton__0d1d2d3d", "kernel", None, flops=2.0e9) == "GEMM"
    assert kernel_class("triton__0d1d2d3d", "kernel", None, flops=0.0) == "other"
    assert kernel_class("triton_tem_fused_0", "kernel", "aten::convolution") == "conv"
    assert kernel_class("triton_tem_fused_0") == "GEMM"
    # a name that says what it does is not overruled by the op that launched it
    assert kernel_class("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)",
                        "kernel", "aten::linear") == "elementwise"
    assert classify("_fwd_kernel", "kernel", "vllm::unified_attention").source == "op"
    # cuDNN's GEMM-based convolution algorithms launch cuBLAS-style GEMMs: convolution work (ResNet-50, V100)
    assert kernel_class("volta_sgemm_64x64_nt", "kernel", "aten::cudnn_convolution_backward_weight") == "conv"
    assert kernel_class("volta_sgemm_64x64_nt", "kernel", "aten::mm") == "GEMM"


def test_tensor_core_detection_covers_the_new_gemm_families():
    assert uses_tensor_cores("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", "fp32", "GEMM")
    assert not uses_tensor_cores("Cijk_Ailk_Bljk_SB_MT64x64x16_SN_GRVW1", "fp32", "GEMM")  # no matrix instruction
    assert uses_tensor_cores("_ZN2ck40kernel_gemm_xdl_cshuffle_v3_multi_d_b_preshuffle", "", "GEMM")
    assert uses_tensor_cores("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", "", "GEMM")  # dtype from the name
    assert not uses_tensor_cores("volta_sgemm_128x64_nn", "", "GEMM")
    # recorded on an H200 (torch 2.11): fp32 cuBLAS GEMMs are xmma kernels on CUDA cores (ffma)
    assert not uses_tensor_cores("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
                                 "aligna4_alignc4_execute_kernel__5x_cublas", "fp32", "GEMM")
    assert uses_tensor_cores("nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_TNT", "", "GEMM")
    assert not uses_tensor_cores("triton_poi_fused_add_bf16_0", "", "elementwise")


def test_classification_reads_a_bounded_part_of_huge_names(monkeypatch):
    """Linear in the name's length: beyond its first READ_CHARS characters a name costs only a slice; the words
    read stay bounded whatever the length (a count of work, not a clock)."""
    read = []
    real = kernel_names.words
    monkeypatch.setattr(kernel_names, "words", lambda text: read.append(len(text)) or real(text))
    head = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_128x128_32x5_tn_align8"
    for size in (1_000_000, 10_000_000):
        read.clear()
        name = head + ", cute::C<1>" * (size // 12) + ">(Params)"
        assert len(name) >= size * 0.99
        assert kernel_names._classify_name(name, None, None).klass == "GEMM"
        assert 0 < sum(read) <= kernel_names.READ_CHARS
        assert uses_tensor_cores(name, "", "GEMM")
    for junk in ("(" * 10_000_000, "x" * 10_000_000, "aB1_" * 2_500_000, "_Z" + "N3foo" * 2_000_000):
        read.clear()
        assert kernel_names._classify_name(junk, None, None).klass in CLASSES
        assert sum(read) <= kernel_names.READ_CHARS


@pytest.mark.parametrize("name,op,klass,fused", [
    ("triton_poi_fused_addmm_gelu_view_15", "triton_poi_fused_addmm_gelu_view_15", "elementwise", "addmm_gelu_view"),
    ("triton_red_fused__to_copy_addmm_sum_1", None, "reduction", "to_copy_addmm_sum"),
    ("triton_per_fused_addmm_native_layer_norm_2", None, "norm", "addmm_native_layer_norm"),
    ("triton_tem_fused__fused_rms_norm_mm_t", "triton_tem_fused__fused_rms_norm_mm_t", "GEMM", "fused_rms_norm_mm_t"),
    ("triton_tem_fused_0", "aten::convolution", "conv", None),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "aten::addmm", "GEMM", None),
])
def test_inductor_kernels_are_classed_by_their_kind_with_the_fused_ops_beside(name, op, klass, fused):
    """triton_poi is pointwise and triton_red / triton_per a reduction (a norm when the fused ops say so) whatever
    GEMM or attention op they were fused after; triton_tem is a GEMM template (conv or attention when its ops or its
    launching op say so). The fused ops go in their own field."""
    assert classify(name, "kernel", op).klass == klass
    assert name_fields(name, "kernel", op)["fused_from"] == fused
CUTE_GROUPED_FP8 = ("void cutlass::device_kernel<(anonymous namespace)::GemmKernel<cutlass::gemm::GroupProblemShape<"
                    "cute::tuple<int, int, int>>, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
                    "MainloopSm90ArrayTmaGmmaWarpSpecialized<4, cute::tuple<cute::C<1>, cute::C<2>, cute::C<1>>, "
                    "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum>, cute::tuple<cute::C<{m}>, "
                    "cute::C<128>, cute::C<128>>, cutlass::float_e4m3_t>>>(Params)")


def test_cute_names_show_their_class_tile_schedule_and_type():
    """Three grouped FP8 GEMMs of one class read apart: the CTA tile (not the cluster shape before it), the kernel
    schedule and the element type follow the class name."""
    shown = [display_name(CUTE_GROUPED_FP8.format(m=m)) for m in (64, 128, 256)]
    assert shown[0].startswith("GemmKernel 64x128x128 PtrArrayTmaWarpSpecializedPingpongFP8FastAccum e4m3 #")
    assert len(set(shown)) == 3 and all(" 1x2x1" not in s for s in shown)


@pytest.mark.parametrize("name,transposes", [("Cijk_Ailk_Bljk_HHS_BH_MT64x64x16_MI32x32x8_SN", "NN"),
                                             ("Cijk_Alik_Bljk_HHS_BH_MT64x64x16_MI32x32x8_SN", "TN"),
                                             ("Cijk_Ailk_Bjlk_HHS_BH_MT64x64x16_MI32x32x8_SN", "NT"),
                                             ("Cijk_Alik_Bjlk_HHS_BH_MT64x64x16_MI32x32x8_SN", "TT")])
def test_tensile_transposes(name, transposes):
    """Tensile's index strings: A(i, l, k) is A as stored (N), A(l, i, k) its transpose; B(l, j, k) N, B(j, l, k) T."""
    assert display_name(name).startswith(f"MT64x64x16 MI32x32x8 {transposes} #")
