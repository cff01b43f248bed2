"""Kineto's graph node ids align a graph replay with its capture (analysis/kernels/graph_capture.py).

No GPU here, and the H200 traces of tests/data/graph_capture (torch 2.13) carry no such field: these traces are
built from the field layout the issue names for CUDA 12+ Kineto traces, a kernel's `"graph id"` and
`"graph node id"` args (CUPTI's CUpti_ActivityKernel graphId / graphNodeId; node ids are given to a graph's nodes
as they are created, so in capture order). The graph below replays three kernels on two streams; the last
captured one runs first, so time order and capture order disagree: only the node ids pair them right."""
from __future__ import annotations

import json

import tb_gpuinsight

H200 = {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9, "computeMinor": 0,
        "numSms": 132}
BF16 = "c10::BFloat16"
# Captured in this order: (op, input dims, kernel)
CAPTURED = [("aten::mm", [[64, 128], [128, 256]], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64"),
            ("aten::add", [[64, 256], [64, 256], []], "vectorized_elementwise_kernel<add>"),
            ("aten::mm", [[64, 256], [256, 512]], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64")]


def _write(path, events):
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [H200], "traceEvents": events}))
    return path


def _capture(tmp_path):
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "pid": 1, "tid": 1, "ts": 900,
               "dur": 2, "args": {"correlation": 1}}]
    for i, (op, dims, _) in enumerate(CAPTURED):
        ext, ts = 10 + i, 1000 + 100 * i
        types = [BF16 if d else "Scalar" for d in dims]
        events += [{"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 50,
                    "args": {"External id": ext, "Input Dims": dims, "Input type": types,
                             "Concrete Inputs": [""] * len(dims)}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": ts + 10, "dur": 5, "args": {"External id": ext, "correlation": ext}}]
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "pid": 1, "tid": 1,
                   "ts": 1400, "dur": 2, "args": {"correlation": 2}})
    return _write(tmp_path / "capture.pt.trace.json", events)


def _replay(tmp_path, node_ids: bool):
    """The replay: node i is the i-th captured kernel; node 2 (on stream 8) runs before node 1 (stream 7)."""
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 5000,
               "dur": 5, "args": {"correlation": 900}}]
    starts = {0: 5010, 2: 5030, 1: 5060}
    for node, (_, _, kernel) in enumerate(CAPTURED):
        args = {"correlation": 900, "device": 0, "stream": 8 if node == 2 else 7, "grid": [32, 1, 1],
                "block": [128, 1, 1]}
        if node_ids:
            args.update({"graph id": 4, "graph node id": 17 + node})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": starts[node],
                       "dur": 20, "args": args})
    return _write(tmp_path / "replay.pt.trace.json", events)


def _ops_by_kernel(eff):
    acts = eff.activities
    names, ops = acts.strings["name"], acts.strings["op_name"]
    return {names[n]: (ops[o], eff.shapes.get(s, (None,))[0]) for n, o, s in
            zip(acts["name"].tolist(), acts["op_name"].tolist(), acts["op_shape"].tolist())}


def test_node_ids_are_read_only_where_recorded(tmp_path):
    assert "graph_node" in tb_gpuinsight.load(_replay(tmp_path, True)).kernels
    assert "graph_node" not in tb_gpuinsight.load(_replay(tmp_path, False)).kernels


def test_graph_node_ids_pair_each_replayed_kernel_with_its_captured_launch(tmp_path):
    eff = tb_gpuinsight.analyze(_replay(tmp_path, True), capture=[_capture(tmp_path)])
    got = _ops_by_kernel(eff)
    for op, dims, kernel in CAPTURED:
        assert got[kernel] == (op, dims)


def test_without_node_ids_time_order_pairs_them_as_they_ran(tmp_path):
    """The fallback (name sequence, here position: CUDA launch calls name no kernel) follows the replay's time
    order, so the kernel that ran out of capture order takes another launch's op: what node ids fix."""
    eff = tb_gpuinsight.analyze(_replay(tmp_path, False), capture=[_capture(tmp_path)])
    got = _ops_by_kernel(eff)
    assert got[CAPTURED[2][2]] == (CAPTURED[1][0], CAPTURED[1][1])
