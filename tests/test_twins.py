"""Launches before the CPU window (their runtime and op events not recorded) take the figures of identical launches
of the same trace: same kernel, grid and block (and registers where recorded; ROCm records none), never across
grids, never for a persistent grid; every kernel row rated for part of its time names why the rest is not."""
from __future__ import annotations

import json

import numpy as np

import tb_gpuinsight

MI300 = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9,
         "computeMinor": 4, "numSms": 304}


def _trace(tmp_path, early, late):
    """A ROCm trace: `early` kernels (name, grid, block) before the CPU window (no op, no runtime event), then one
    aten::mm launching each `late` kernel (name, grid, block) inside it. Kernel args as ROCm writes them: grid in
    work-items, no registers."""
    events, ts = [], 1000.0
    for name, grid, block in early:
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 20.0,
                       "args": {"device": 0, "stream": 7, "correlation": 0, "kind": "Dispatch Kernel",
                                "grid": grid, "block": block}})
        ts += 30
    ts += 1000
    for corr, (name, grid, block) in enumerate(late, start=1):
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 40,
                       "args": {"External id": corr, "Input Dims": [[512, 256], [256, 128]],
                                "Input type": ["float", "float"]}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts + 1, "dur": 1, "args": {"correlation": corr, "External id": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 5, "dur": 20.0,
                       "args": {"External id": corr, "correlation": corr, "device": 0, "stream": 7,
                                "kind": "Dispatch Kernel", "grid": grid, "block": block}})
        ts += 100
    path = tmp_path / "rocm.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [MI300], "traceEvents": events}))
    return path


def _texts(acts, column):
    return [acts.strings[column][c] for c in acts[column]]


def test_early_launches_inherit_from_identical_ones_and_say_how_many(tmp_path):
    gemm, grid, block = "Cijk_Ailk_Bljk_SB_MT64x64x16", [8192, 1, 1], [256, 1, 1]
    path = _trace(tmp_path, early=[(gemm, grid, block)] * 3 + [(gemm, [4096, 1, 1], block)],
                  late=[(gemm, grid, block)] * 2)
    eff = tb_gpuinsight.analyze(path, execution_traces=[])
    acts = eff.activities
    order = np.argsort(acts["ts"])
    flops, reasons = acts["flops"][order], np.array(_texts(acts, "flops_reason"), dtype=object)[order]
    assert (flops[:3] == 2 * 512 * 256 * 128).all()  # same grid and block: one GEMM's FLOPs each
    assert all(r.startswith("no launching op: FLOPs and bytes inferred from 2 identical launches (same kernel, "
                            "grid, block)") for r in reasons[:3])  # no registers on ROCm
    assert np.isnan(flops[3]) and reasons[3] == "no launching op in the trace"  # another grid: never
    assert acts.strings["source"][acts["source"][order[0]]] == "twin"
    assert (flops[4:] == 2 * 512 * 256 * 128).all()
    rows = eff.by_name().to_pandas()
    assert rows.loc[rows["name"] == gemm, "reason"].item() == "no_op"  # 5 of 6 calls rated: the rest's reason


def test_persistent_grid_launches_are_never_identical_by_grid(tmp_path):
    """A persistent GEMM launches one workgroup per CU whatever the problem (ROCm's grid = 304 CUs x 256
    work-items): a launch of it before the window takes nothing from the launches after."""
    gemm, grid, block = "persistent_gemm_kernel", [304 * 256, 1, 1], [256, 1, 1]
    eff = tb_gpuinsight.analyze(_trace(tmp_path, early=[(gemm, grid, block)], late=[(gemm, grid, block)]),
                                execution_traces=[])
    acts = eff.activities
    first = int(np.argmin(acts["ts"]))
    assert np.isnan(acts["flops"][first])
    assert "persistent grid" in _texts(acts, "flops_reason")[first]
