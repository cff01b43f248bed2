"""Linear autograd Functions (Megatron's LinearWithGradAccumulationAndAsyncCommunication and FP8 forks) sized from
their recorded tensor arguments, and their backward nodes' kernels sized from the forward op with the same sequence
number (estimate/autograd_functions.py, analysis/kernels/backward_sizing.py). Checked against 2*M*N*K by hand, on a
trace recorded here by real torch (the backward's own aten::mm FLOPs are the cross-check), and on small GPU traces
built here where the Function's kernels are launched directly (as a C++ extension's are)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.backward_sizing import FROM_FORWARD, backward_estimate, find_forward
from tb_gpuinsight.estimate.autograd_functions import SOURCE, forward_name
from tb_gpuinsight.estimate.flops import estimate_op, freeze
from tb_gpuinsight.estimate.registry import lookup

MEGATRON = "LinearWithGradAccumulationAndAsyncCommunication"
B, S, K, N = 4, 6, 8, 10  # batch, sequence, in features (K), out features (N)
M = B * S
BF16 = "c10::BFloat16"


def _est(name, dims, types):
    return estimate_op(name, freeze(dims), freeze(types), freeze([""] * len(dims)))


# ---------------------------------------------------------------------------------------------- the forward entry

@pytest.mark.parametrize("name", [MEGATRON, "LinearWithGradAccumulationFP8",
                                  "FP8LinearWithGradAccumulationAndAsyncCommunication"])
def test_linear_function_forward_is_2mnk_from_input_then_weight(name):
    est = _est(name, [[S, B, K], [N, K], [N], [], [], []], [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar"])
    assert est.flops == 2 * M * N * K
    assert est.bytes == (M * K + N * K + N + M * N) * 2  # x, w, bias read; y written, all bf16
    assert est.bytes_reason.startswith("partial:") and est.dtype == BF16
    assert lookup(name).source == SOURCE and lookup(name).family == "gemm"


def test_linear_function_refuses_operands_that_are_not_a_product():
    est = _est(MEGATRON, [[M, K], [N, K + 1]], [BF16, BF16])
    assert est.flops is None and "no input [..., K] followed by a weight [N, K]" in est.flops_reason


def test_backward_node_has_no_estimate_of_its_own():
    est = _est(MEGATRON + "Backward", [[M, N]], [BF16])
    assert est.flops is None and "same sequence number" in est.flops_reason


def test_backward_names_map_to_their_forward():
    assert forward_name(MEGATRON + "Backward") == MEGATRON
    assert forward_name("_LinearBackward0") == "_Linear"
    assert forward_name("autograd::engine::evaluate_function: _LinearBackward") is None
    assert forward_name(MEGATRON) is None


# ---------------------------------------------------------------------------------------------- recorded by torch

def _record(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
        """Megatron's Function without the communication: forward(ctx, input, weight, bias, ...flags)."""

        @staticmethod
        def forward(ctx, x, w, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel):
            ctx.save_for_backward(x, w)
            return torch.matmul(x, w.t())

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            grad2d, x2d = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
            return grad.matmul(w), grad2d.t().matmul(x2d), None, None, None, None

    x = torch.randn(S, B, K, requires_grad=True)
    w = torch.randn(N, K, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        LinearWithGradAccumulationAndAsyncCommunication.apply(x, w, None, False, False, False).sum().backward()
    path = tmp_path / "megatron_linear.json"
    prof.export_chrome_trace(str(path))
    return tb_gpuinsight.load(path)


def _rows(trace, name):
    names = trace.ops.strings["name"]
    return np.flatnonzero(trace.ops["name"] == names.index(name)) if name in names else np.empty(0, np.int64)


def _mm_flops_within(trace, row):
    ops = trace.ops
    lo, hi = ops["ts"][row], ops["ts"][row] + ops["dur"][row]
    total = 0.0
    for mm in _rows(trace, "aten::mm").tolist():
        if lo <= ops["ts"][mm] <= hi and ops["tid"][mm] == ops["tid"][row]:
            total += estimate_op("aten::mm", *trace.shape(int(ops["shape"][mm]))).flops
    return total


def test_recorded_forward_and_backward_agree_with_the_aten_mms_torch_recorded(tmp_path):
    trace = _record(tmp_path)
    (fwd,), (bwd,) = _rows(trace, MEGATRON), _rows(trace, MEGATRON + "Backward")
    assert find_forward(trace, bwd) == fwd
    est = estimate_op(MEGATRON, *trace.shape(int(trace.ops["shape"][fwd])))
    assert est.flops == 2 * M * N * K == _mm_flops_within(trace, fwd)
    back = backward_estimate(trace, bwd)
    assert back.flops == 2 * est.flops == _mm_flops_within(trace, bwd)  # dgrad + wgrad, as torch ran them
    assert back.flops_reason.startswith("upper bound: dgrad + wgrad")
    assert f"{FROM_FORWARD} {MEGATRON} (sequence number {int(trace.ops['seq'][bwd])})" in back.flops_reason
    assert back.bytes == 2 * est.bytes


# ---------------------------------------------------------------------------------------------- GPU traces built here

H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984, "computeMajor": 9,
        "computeMinor": 0, "numSms": 132}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
FORWARD_DIMS = [[S, B, K], [N, K], [], [], [], []]
FORWARD_TYPES = [BF16, BF16, "", "Scalar", "Scalar", "Scalar"]


def _op(name, ts, dur, ext, dims=None, types=None, seq=None, fwd_tid=None, tid=1):
    args = {"External id": ext}
    if dims is not None:
        args.update({"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)})
    if seq is not None:
        args["Sequence number"] = seq
    if fwd_tid is not None:
        args["Fwd thread id"] = fwd_tid
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launched(ts, corr, ext, dur, name=GEMM, tid=1):
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts, "dur": 2,
              "args": {"correlation": corr, "External id": ext}}
    kernel = {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 20, "dur": dur,
              "args": {"correlation": corr, "External id": ext, "device": 0, "stream": 7,
                       "grid": [8, 1, 1], "block": [128, 1, 1]}}
    return [launch, kernel]


def _trace(tmp_path, backward_seq=5, mm_under_backward=False, forward=(MEGATRON, FORWARD_DIMS, FORWARD_TYPES)):
    """The forward Function launches its GEMM itself; its backward node launches dgrad (30 us) and wgrad (10 us),
    or runs them through an aten::mm that launches them when `mm_under_backward`."""
    name, dims, types = forward
    events = [_op(name, 100, 50, 1, dims, types, seq=5, fwd_tid=0)] + _launched(110, 1, 1, 20)
    events.append(_op(name + "Backward", 500, 100, 2, [[S, B, N]], [BF16], seq=backward_seq, fwd_tid=1))
    if mm_under_backward:
        events.append(_op("aten::mm", 505, 90, 3, [[M, N], [N, K]], [BF16, BF16]))
    events += _launched(510, 2, 3 if mm_under_backward else 2, 30) + _launched(550, 3, 2, 10)
    path = tmp_path / "fwd_bwd.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [H100], "traceEvents": events}))
    return tb_gpuinsight.analyze(path)


def _kernels(eff):
    acts = eff.activities
    return np.flatnonzero(acts["kind"] == acts.strings["kind"].index("kernel"))


def _text(eff, col, row):
    return eff.activities.strings[col][eff.activities[col][row]]


@pytest.mark.parametrize("forward", [
    (MEGATRON, FORWARD_DIMS, FORWARD_TYPES),
    ("_Linear", [[N, K], [S, B, K], []], [BF16, BF16, ""]),  # Transformer Engine 2.x: weight, inp, bias
])
def test_backward_kernels_take_twice_the_forward_split_by_duration(tmp_path, forward):
    eff = _trace(tmp_path, forward=forward)
    acts = eff.activities
    fwd, dgrad, wgrad = _kernels(eff).tolist()
    forward_flops = 2 * M * N * K
    assert acts["flops"][fwd] == forward_flops
    assert acts["flops"][dgrad] == pytest.approx(2 * forward_flops * 0.75)  # 30 of the node's 40 us
    assert acts["flops"][wgrad] == pytest.approx(2 * forward_flops * 0.25)
    forward_bytes = (M * K + N * K + M * N) * 2
    assert acts["bytes"][fwd] == forward_bytes
    assert acts["bytes"][dgrad] + acts["bytes"][wgrad] == pytest.approx(2 * forward_bytes)
    for row in (dgrad, wgrad):
        assert _text(eff, "flops_reason", row).startswith("upper bound: dgrad + wgrad")
        assert "(sequence number 5)" in _text(eff, "flops_reason", row)
        assert _text(eff, "bytes_reason", row).startswith("partial: from its forward op")
        assert _text(eff, "gap", row) == "" and _text(eff, "source", row) == "formula"
        assert _text(eff, "dtype", row) == "bf16"
        assert acts["efficiency"][row] > 0  # rated against the H100


def test_backward_without_its_forward_in_the_trace_stays_unknown(tmp_path):
    eff = _trace(tmp_path, backward_seq=6)
    acts = eff.activities
    _, dgrad, wgrad = _kernels(eff).tolist()
    assert np.isnan(acts["flops"][dgrad]) and np.isnan(acts["flops"][wgrad])
    assert "same sequence number" in _text(eff, "flops_reason", dgrad)


def test_backward_whose_sub_op_is_sized_is_not_counted_twice(tmp_path):
    eff = _trace(tmp_path, mm_under_backward=True)
    acts = eff.activities
    _, dgrad, wgrad = _kernels(eff).tolist()
    assert acts["flops"][dgrad] == 2 * M * N * K  # the aten::mm's own figure
    assert np.isnan(acts["flops"][wgrad])  # the node's other kernel: its dgrad is already counted below it


def test_forward_is_the_latest_op_of_that_name_and_sequence_number_before_the_backward(tmp_path):
    """Sequence numbers count per thread: another thread's Function may carry the same one."""
    events = [_op(MEGATRON, 50, 10, 1, FORWARD_DIMS, FORWARD_TYPES, seq=5, tid=2),
              _op(MEGATRON, 100, 10, 2, FORWARD_DIMS, FORWARD_TYPES, seq=5),
              _op(MEGATRON, 120, 10, 3, FORWARD_DIMS, FORWARD_TYPES, seq=6),
              _op(MEGATRON + "Backward", 500, 10, 4, [[S, B, N]], [BF16], seq=5, fwd_tid=1),
              _op(MEGATRON, 700, 10, 5, FORWARD_DIMS, FORWARD_TYPES, seq=5, tid=3)]
    path = tmp_path / "threads.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    trace = tb_gpuinsight.load(path)
    (bwd,) = _rows(trace, MEGATRON + "Backward")
    forward = find_forward(trace, bwd)
    assert trace.ops["ts"][forward] == 100 and trace.ops["seq"][forward] == 5
