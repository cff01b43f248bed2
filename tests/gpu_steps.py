"""Hand-made GPU runs with a known answer: every step launches one GEMM (`aten::mm`, with its input shapes) and one
elementwise kernel (`aten::add`) on an H100, with a few % of step-to-step jitter. Used where the question is "which
kernel accounts for a change" and the answer must be exact."""
from __future__ import annotations

import json
import os

M = N = K = 2048


def _x(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def events(steps: int, gemm_us: float, add_us: float, first: int = 1):
    """`steps` steps; step i's GEMM takes gemm_us and its add add_us, each x (1 +- 2 %) by a fixed pattern."""
    out, t = [], 0.0
    for i in range(steps):
        jitter = 1 + 0.02 * ((i * 7) % 5 - 2) / 2
        g, a = gemm_us * jitter, add_us * jitter
        period = g + a + 100
        corr = 2 * i + 1
        out += [_x("user_annotation", f"ProfilerStep#{first + i}", t, period),
                _x("cpu_op", "aten::mm", t + 1, 8, **{"Input Dims": [[M, K], [K, N]], "Input type": ["float", "float"]}),
                _x("cuda_runtime", "cudaLaunchKernel", t + 2, 5, correlation=corr),
                _kernel("ampere_sgemm_128x64_nn", t + 10, g, corr),
                _x("cpu_op", "aten::add", t + 12, 5),
                _x("cuda_runtime", "cudaLaunchKernel", t + 13, 3, correlation=corr + 1),
                _kernel("void at::native::vectorized_elementwise_kernel<4, add>", t + 10 + g, a, corr + 1)]
        t += period
    return out


def write_run(folder, steps: int = 8, gemm_us: float = 400.0, add_us: float = 100.0,
              stamp: int = 1700000000000) -> str:
    """One span of worker `w` in `folder` (created); returns the trace's path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"w.{stamp}.pt.trace.json")
    trace = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                   "computeMinor": 0, "totalGlobalMem": 85045395456, "numSms": 132}],
             "traceEvents": events(steps, gemm_us, add_us)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f)
    return path
