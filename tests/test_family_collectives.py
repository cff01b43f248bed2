"""Collectives by kernel family (analysis/ranks/collectives.py): symmetric-memory / multimem, custom all-reduce and
DeepEP kernels are collectives, sized from the launching op's tensor where it records one (vLLM's
`all_reduce(x[888, 2880] bf16)`) and rated on the link, else listed with no size.

The traces are synthetic: Kineto events laid out as torch.profiler writes them for vLLM on a B200 rank of 8
(`distributedInfo` world size 8; the launching op with its Input Dims, its launch call and the kernel)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.ranks.collectives import extract

B200 = {"id": 0, "name": "NVIDIA B200", "totalGlobalMem": 191_000_000_000, "computeMajor": 10, "computeMinor": 0,
        "numSms": 148}
MULTIMEM = ("void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16*, "
            "unsigned long, unsigned long, unsigned long*, unsigned long, unsigned long)")
DEEPEP = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*)"


def _trace(path, rank, kernels):
    """One launch per (op name, dims, kernel): the op, its cudaLaunchKernel and the kernel (20 us each)."""
    events = []
    for i, (op, dims, kernel) in enumerate(kernels):
        ext, ts = 10 + i, 1000 + 100 * i
        events += [{"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 30,
                    "args": {"External id": ext, "Input Dims": dims, "Input type": ["c10::BFloat16"] * len(dims),
                             "Concrete Inputs": [""] * len(dims)}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 5,
                    "dur": 5, "args": {"External id": ext, "correlation": ext}},
                   {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts + 20, "dur": 20,
                    "args": {"External id": ext, "correlation": ext, "device": 0, "stream": 7,
                             "grid": [16, 1, 1], "block": [512, 1, 1]}}]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [B200],
                                "distributedInfo": {"rank": rank, "world_size": 8, "backend": "nccl"},
                                "traceEvents": events}))
    return path


KERNELS = [("vllm::all_reduce", [[888, 2880]], MULTIMEM), ("DeepEPDispatch", [], DEEPEP)]


def test_symmetric_memory_all_reduce_is_sized_from_its_op_and_rated_on_the_link(tmp_path):
    path = _trace(tmp_path / "rank0.1700000000000.pt.trace.json", 0, KERNELS)
    trace = tb_gpuinsight.load(path)
    table, info = extract(trace, tb_gpuinsight.analyze(trace).activities["op"])
    kinds = [table.strings["kind"][k] for k in table["kind"].tolist()]
    assert info["source"] == "kernel" and kinds == ["all_reduce", "all_to_all"]
    assert table["in_bytes"][0] == 888 * 2880 * 2 and np.isnan(table["in_bytes"][1])  # DeepEP: no tensor recorded
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    row = acts.strings["name"].index(MULTIMEM)
    (i,) = np.flatnonzero(acts["name"] == row)
    busbw = 888 * 2880 * 2 / 20e-6 * 2 * 7 / 8 / 1e9  # NCCL-tests: S / t x 2(n-1)/n
    assert acts["gbps"][i] == pytest.approx(busbw) and acts["efficiency"][i] == pytest.approx(busbw / 900)  # NVLink 5
    assert acts.strings["bound"][acts["bound"][i]] == "communication"


def test_the_ranks_view_lists_the_family_collectives(tmp_path):
    for rank in range(2):
        _trace(tmp_path / f"rank{rank}.1700000000000.pt.trace.json", rank, KERNELS)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", "ranks", str(tmp_path), "--format", "json"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "all_reduce" in text and "all_to_all" in text and "no collective" not in text
