"""MIOpen's helper kernels around a convolution: SetTensor (`SubTensorOpWithScalar*`) zero-fills the output before
an accumulating conv kernel (one write, no read), and `Im2d2Col` / `Im3d2Col` are im2col layout transforms (no
FLOPs of the op; bytes unknown with the reason, the column buffer's batching is not in the trace)."""
from __future__ import annotations

import json

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.roles import kernel_role

from .test_efficiency import MI300_PROPS, _write_trace

# miopen_convolution(input, weight, bias, padding, stride, dilation, groups, benchmark, deterministic)
X, W = [8, 64, 56, 56], [128, 64, 3, 3]
CONV = ("aten::miopen_convolution",
        [X, W, [], [1, 1], [1, 1], [1, 1], [], [], []],
        ["c10::BFloat16", "c10::BFloat16", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar",
         "Scalar"])
OUT_BYTES = 8 * 128 * 56 * 56 * 2
FLOPS = 2 * 8 * 128 * 56 * 56 * 64 * 9
CONCRETE = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False"]


def _conv_trace(tmp_path, kernels):
    path = _write_trace(tmp_path, MI300_PROPS, [(*CONV, kernels)])
    trace = json.loads(path.read_text())
    for event in trace["traceEvents"]:
        if event["cat"] == "cpu_op":
            event["args"]["Concrete Inputs"] = CONCRETE
    path.write_text(json.dumps(trace))
    return path


def test_roles_of_miopen_helpers():
    assert kernel_role("Im2d2Col_v2") == "layout"
    assert kernel_role("Im3d2Col") == "layout"
    assert kernel_role("SubTensorOpWithScalar2d") == "epilogue"


def test_zero_fill_is_one_write_and_im2col_takes_no_flops(tmp_path):
    path = _conv_trace(tmp_path, [
        ("kernel", "SubTensorOpWithScalar1d", 3.0, {}),
        ("kernel", "Im2d2Col_v2", 20.0, {}),
        ("kernel", "igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2", 100.0, {})])
    acts = tb_gpuinsight.analyze(path).activities
    roles = [acts.strings["role"][c] for c in acts["role"]]
    assert roles == ["epilogue", "layout", "compute"]
    reasons = acts.strings["bytes_reason"]
    assert acts["bytes"][0] == OUT_BYTES  # written once, not read + written
    assert "written, not read" in reasons[acts["bytes_reason"][0]]
    assert acts["flops"][0] == acts["flops"][1] == 0 and acts["flops"][2] == FLOPS
    assert acts["bytes"][1] != acts["bytes"][1]  # NaN: unknown
    assert "im2col" in reasons[acts["bytes_reason"][1]]
