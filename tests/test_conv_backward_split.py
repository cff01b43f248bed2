"""Kernels of one aten::convolution_backward each take their own gradient's FLOPs and bytes (dgrad / wgrad / bias,
recognised by name per library), not a duration share of the op's total. Hand counts from first principles."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.conv_backward import conv_part

N, CIN, COUT, HW = 8, 64, 128, 32
GO, X, W = [N, COUT, HW, HW], [N, CIN, HW, HW], [COUT, CIN, 3, 3]
GRAD_FLOPS = 2 * (N * COUT * HW * HW) * (CIN * 3 * 3)  # one multiply-add per weight element per output point
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045460992, "computeMajor": 9,
        "computeMinor": 0, "numSms": 132}


@pytest.mark.parametrize("name,part", [
    ("sm80_xmma_dgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", "dgrad"),
    ("sm80_xmma_wgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x32", "wgrad"),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)", "dgrad"),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int)", "wgrad"),
    ("void cudnn::winograd_nonfused::winogradWgradData4x4<float, float>(cudnn::winograd_nonfused::Params)", "wgrad"),
    ("igemm_bwd_gtcx2_nhwc_bf16_bx0_ex1_bt32x128x32_wt16x64x4_ws1x1_wr1x1", "dgrad"),  # MIOpen (corpus: mi210)
    ("igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt256x128x16_wt32x32x8_ws2x1_wr2x2", "wgrad"),
    ("naive_conv_bwd_nchw_float_double_float", "dgrad"),
    ("naive_conv_wrw_nhwc_half_double_half", "wgrad"),
    ("gridwise_convolution_backward_weight_implicit_gemm_v4r4_xdlops_nchw_kcyx_nkhw", "wgrad"),
    ("ck::kernel_grouped_conv_bwd_data_multiple_d_xdl_cshuffle<ck::DeviceGroupedConvBwdDataMultipleD_Xdl>", "dgrad"),
    ("ck::kernel_batched_gemm_xdlops_bwd_weight<ck::DeviceGroupedConvBwdWeight_Xdl_CShuffle>", "wgrad"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>>>>", "bias"),
    ("volta_sgemm_64x64_nt", None),  # a GEMM alone does not say which gradient
])
def test_kernel_names_say_their_gradient(name, part):
    assert conv_part(name) == part


def _trace(tmp_path, kernels):
    dims = [GO, X, W, [], [], [], [], [], [], [], []]
    types = ["float"] * 3 + ["GenericList"] * 4 + ["Scalar", "GenericList", "Scalar", "GenericList"]
    concrete = ["", "", "", "[128]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::convolution_backward", "pid": 1, "tid": 1, "ts": 1000,
               "dur": 500, "args": {"External id": 1, "Input Dims": dims, "Input type": types,
                                    "Concrete Inputs": concrete}}]
    ts = 1100.0
    for corr, (name, dur) in enumerate(kernels, start=1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 1000 + corr, "dur": 1, "args": {"correlation": corr, "External id": 1}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                       "args": {"External id": 1, "correlation": corr, "device": 0, "stream": 7,
                                "grid": [64, 1, 1], "block": [256, 1, 1]}})
        ts += dur + 1
    path = tmp_path / "convbwd.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [H100], "traceEvents": events}))
    return path


def test_dgrad_and_wgrad_kernels_take_their_own_figures(tmp_path):
    """output_mask [True, True, False]: dgrad and wgrad each cost the forward's FLOPs whatever their durations
    (30 us and 10 us would split them 1.5x / 0.5x); dgrad reads grad_output and weight and writes grad_input,
    wgrad reads grad_output and input and writes grad_weight (fp32)."""
    dgrad = "sm80_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"
    wgrad = "sm80_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"
    acts = tb_gpuinsight.analyze(_trace(tmp_path, [(dgrad, 30.0), (wgrad, 10.0)]), execution_traces=[]).activities
    by_name = {acts.strings["name"][n]: i for i, n in enumerate(acts["name"].tolist())}
    go, x, w = (int(np.prod(s)) * 4 for s in (GO, X, W))
    assert acts["flops"][by_name[dgrad]] == GRAD_FLOPS and acts["flops"][by_name[wgrad]] == GRAD_FLOPS
    assert acts["bytes"][by_name[dgrad]] == go + w + x and acts["bytes"][by_name[wgrad]] == go + x + w
    assert "dgrad kernel" in acts.strings["flops_reason"][acts["flops_reason"][by_name[dgrad]]]


def test_unnamed_gradient_kernels_keep_the_duration_split(tmp_path):
    acts = tb_gpuinsight.analyze(_trace(tmp_path, [("volta_sgemm_64x64_nt", 30.0), ("volta_sgemm_128x32_nt", 10.0)]),
                                 execution_traces=[]).activities
    assert sorted(acts["flops"].tolist()) == pytest.approx([0.5 * GRAD_FLOPS, 1.5 * GRAD_FLOPS])
