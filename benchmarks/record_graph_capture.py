"""Record CUDA-graph capture + replay logdirs with `tb_gpuinsight.profile()`, for the capture merge's test data.

    python benchmarks/record_graph_capture.py OUT_LOGDIR

Runs (each a run directory of two spans; schedule wait=0, warmup=1, active=3, repeat=2):
- `reduce_overhead`: `torch.compile(mode="reduce-overhead")`, first called inside the profiler, so that step 0
  (warm-up, not recorded) compiles and warms up, step 1 (recorded, span 1) captures the CUDA graph and every later
  step replays it: span 1 holds the capture launches, span 2 only replays.
- `cuda_graph`: an eager model captured by hand with `torch.cuda.graph` in step 1 (as vLLM does) and replayed after.
- `reduce_overhead_tensor_trace`: as `reduce_overhead` with the tensor.trace recorder on (the default), to see
  whether its torch function mode keeps CUDA graphs from being used.
Prints, per span, the graph launches and the kernel launches without an executed kernel (capture launches).
"""
from __future__ import annotations

import glob
import gzip
import json
import os
import sys
from collections import Counter

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tb_gpuinsight  # noqa: E402
from gpu_record import Block  # noqa: E402  (the same transformer block as the other GPU recordings)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DT = torch.bfloat16 if DEV == "cuda" else torch.float32
SIZES = (1024, 16, 4096, 8, 256) if DEV == "cuda" else (64, 4, 128, 2, 16)  # d, heads, ffn, batch, seq


def _model() -> nn.Module:
    d, heads, ffn, _, _ = SIZES
    return nn.Sequential(Block(d, heads, ffn), Block(d, heads, ffn)).to(DEV, DT).eval()


def _input() -> torch.Tensor:
    d, _, _, b, s = SIZES
    return torch.randn(b, s, d, device=DEV, dtype=DT)


def _profiled(logdir: str, step, tensor_trace: bool = False) -> None:
    with tb_gpuinsight.profile(logdir, wait=0, warmup=1, active=3, repeat=2, use_gzip=True, worker_name="gpu0",
                               tensor_trace=tensor_trace) as prof:
        for i in range(8):
            step(i)
            prof.step()
    if DEV == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def reduce_overhead(out: str, tensor_trace: bool) -> None:
    compiled = torch.compile(_model(), mode="reduce-overhead")
    x = _input()

    def step(_i: int) -> None:
        torch.compiler.cudagraph_mark_step_begin()
        compiled(x)
    _profiled(out, step, tensor_trace)


@torch.no_grad()
def cuda_graph(out: str) -> None:
    model, x = _model(), _input()
    graph = torch.cuda.CUDAGraph()

    def step(i: int) -> None:
        if i == 0:  # warm-up on a side stream, as torch.cuda.graph asks
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                model(x)
            torch.cuda.current_stream().wait_stream(side)
        elif i == 1:
            with torch.cuda.graph(graph):
                model(x)
            graph.replay()
        else:
            graph.replay()
    _profiled(out, step)


def describe(run: str) -> None:
    for path in sorted(glob.glob(os.path.join(run, "*.pt.trace.json.gz"))):
        events = json.load(gzip.open(path))["traceEvents"]
        executed = {e.get("args", {}).get("correlation") for e in events if e.get("cat") in ("kernel", "gpu_memset",
                                                                                             "gpu_memcpy")}
        calls = Counter(e["name"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver"))
        captured = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "aunch" in e["name"]
                    and "Graph" not in e["name"] and e.get("args", {}).get("correlation") not in executed]
        print(os.path.basename(path), "graph launches:", {k: v for k, v in calls.items() if "Graph" in k},
              "capture launches:", len(captured), "args:", sorted(captured[0]["args"]) if captured else None)


def main(out: str) -> None:
    runs = {"reduce_overhead": lambda d: reduce_overhead(d, False), "cuda_graph": cuda_graph,
            "reduce_overhead_tensor_trace": lambda d: reduce_overhead(d, True)}
    for name, record in runs.items():
        run = os.path.join(out, name)
        torch._dynamo.reset()
        try:
            record(run)
        except Exception as exc:  # one failing recipe still leaves the others
            print(name, "failed:", type(exc).__name__, exc)
            continue
        print(name)
        describe(run)


if __name__ == "__main__":
    main(sys.argv[1])
