"""Block-scaled GEMMs carry their real operand format (estimate/formats.py) and are rated against that format's
datasheet peak (FP4 / FP6 rows of devices.json), in the kernel table, the MFU and the report's waste."""
from __future__ import annotations

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.names import uses_tensor_cores
from tb_gpuinsight.estimate.devices import load_datasheet, match_device
from tb_gpuinsight.estimate.formats import operand_format, peak_key

from .test_model_config import GPT_OSS_120B, KERNEL_US, MX_GEMM, TOPK, H, I, T, moe_trace


@pytest.mark.parametrize("kernel, label, key", [
    (MX_GEMM, "mxfp4xmxfp8", "fp8"),  # TRT-LLM gen (vLLM's FlashInfer MXFP4 MoE on Blackwell): w4a8
    ("bmm_E2m1_E2m1_Bfloat16_t128x8x512u2_s6_sm100f", "nvfp4", "fp4"),
    ("bmm_MxE4m3_MxE4m3_Bfloat16_t128x8x128_sm100f", "mxfp8", "fp8"),
    ("bmm_Bfloat16_Bfloat16_Bfloat16_t128x8x64_sm100f", "", None),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "bf16xmxfp4", "bf16"),  # MXFP4 weights upcast
    ("_matmul_ogs_NNT_bf16xmxfp8xmxfp4_16x128x256x1", "mxfp8xmxfp4", "fp8"),
    ("_matmul_ogs_NNT_bf16xbf16xbf16_16x128x256x1", "", None),
    ("cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue8m0xe2m1_ue8m0xe4m3_f32_bf16_bf16", "mxfp4xmxfp8",
     "fp8"),
    ("cutlass3x_sm100_bstensorop_gemm_ue4m3xe2m1_ue4m3xe2m1_f32_bf16", "nvfp4", "fp4"),
    ("void cutlass::device_kernel<cutlass_scaled_fp4_mm_sm100>", "nvfp4", "fp4"),
    ("_w8a8_block_fp8_matmul", "fp8_block", "fp8"),
    ("scaled_fp4_quant_kernel", "", None),  # a cast, not a GEMM
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", "", None),
])
def test_operand_formats_from_kernel_names(kernel, label, key):
    assert operand_format(kernel) == label
    assert peak_key(label) == key


def test_the_datasheet_has_fp4_and_fp6_peaks_with_their_sources():
    rows = load_datasheet()
    expect = {"NVIDIA B200": (9000, 4500, 4500), "NVIDIA GB200": (10000, 5000, 5000),
              "AMD Instinct MI355X": (10066.3, 10066.3, 5033.2)}
    for name, (fp4, fp6, fp8) in expect.items():
        match = match_device({"name": name}, rows)
        assert (match.peak_tflops("fp4"), match.peak_tflops("fp6"), match.peak_tflops("fp8")) == (fp4, fp6, fp8)
        assert "FP4" in match.spec.note or "MXFP4" in match.spec.note
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "AMD Instinct MI300X", "AMD Instinct MI325X"):
        match = match_device({"name": name}, rows)  # no FP4 / FP6 arithmetic on Hopper or CDNA3: no row
        assert match.peak_tflops("fp8") and match.peak_tflops("fp4") is None and match.peak_tflops("nvfp4") is None


def test_an_mx_gemm_is_rated_against_its_formats_peak_in_the_table_mfu_and_waste(tmp_path):
    path = moe_trace(tmp_path)
    eff = tb_gpuinsight.analyze(path, model_config=GPT_OSS_120B)
    acts = eff.activities
    assert acts.strings["rate_dtype"][acts["rate_dtype"][0]] == "mxfp4xmxfp8"
    assert acts["peak_tflops"][0] == 4500  # B200: FP4 x FP8 runs at the FP8 rate
    flops = 2 * T * TOPK * 3 * H * I
    assert acts["pct_peak"][0] == pytest.approx(flops / (KERNEL_US * 1e-6) / 1e12 / 4500)
    from tb_gpuinsight.analysis.kernels.rows import group_rows
    (kernel,) = group_rows(eff.by_name())
    assert kernel["dtype"] == "mxfp4xmxfp8" and kernel["peak_tflops"] == 4500
    overview = tb_gpuinsight.overview(path, model_config=GPT_OSS_120B)
    assert overview.headline["mfu_dtype"] == "mxfp4xmxfp8" and overview.headline["peak_tflops"] == 4500
    assert overview.headline["mfu"] > 0 and overview.headline["tensor_core_share"] == 1.0
    report = tb_gpuinsight.report(path, model_config=GPT_OSS_120B, format="json")
    import json
    waste = json.loads(report)["waste"]["rows"]
    assert waste and waste[0]["dtype"] == "mxfp4xmxfp8"


def test_an_nvfp4_gemm_on_a_device_without_fp4_has_no_peak(tmp_path):
    path = moe_trace(tmp_path, kernels=("bmm_E2m1_E2m1_Bfloat16_t128x8x512u2_s6_sm100f",))
    eff = tb_gpuinsight.analyze(path, model_config=GPT_OSS_120B, device="NVIDIA H100 SXM5 80GB")
    acts = eff.activities
    assert np.isnan(acts["peak_tflops"][0]) and np.isnan(acts["pct_peak"][0])  # rated on its DRAM traffic only
    eff = tb_gpuinsight.analyze(path, model_config=GPT_OSS_120B)
    assert eff.activities["peak_tflops"][0] == 9000


def test_block_scaled_formats_count_as_tensor_core_work():
    assert uses_tensor_cores(MX_GEMM, "mxfp4xmxfp8", "GEMM")
    assert uses_tensor_cores("some_gemm", "nvfp4", "GEMM")
