"""Overhead of capture on a small model (CPU): training steps with and without TensorTrace, and under the torch
profiler with and without `profile_memory` (what `tb_gpuinsight.profile` records by default), side by side.

    python benchmarks/capture.py [--steps 200] [--batch 32] [--width 256] [--reps 1]

With --reps N the cases run N times, interleaved, and each keeps its best median (steadier on a busy machine).
Prints the median time per step without capture, with capture to a file (calls + returns), with calls only, and
to /dev/null, and the lines written per step. Capture cost is per torch call, so it is the same absolute cost on a
GPU (where steps are shorter or longer depending on the model) and shrinks relative to bigger tensors.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tb_gpuinsight import TensorTrace  # noqa: E402


def _step(model, opt, loss_fn, x, y) -> None:
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def _time(steps: int, make_ctx, width: int, batch: int) -> float:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    for _ in range(10):  # warm-up
        _step(model, opt, loss_fn, x, y)
    times = []
    with make_ctx():
        for _ in range(steps):
            t0 = time.perf_counter()
            _step(model, opt, loss_fn, x, y)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _profiler(memory: bool):
    """The profiler recording every step (one long active window), as in a recorded window of a schedule."""
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                  profile_memory=memory)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--reps", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(1)  # steadier timings
    out = os.path.join(tempfile.mkdtemp(), "bench.tensor.trace")
    import contextlib

    cases = [
        ("no capture", contextlib.nullcontext),
        ("TensorTrace(file)", lambda: TensorTrace(out)),
        ("TensorTrace(file, returns=False)", lambda: TensorTrace(out + ".2", returns=False)),
        ("TensorTrace(file, modules=False)", lambda: TensorTrace(out + ".3", modules=False)),
        ("profiler(record_shapes)", lambda: _profiler(False)),
        ("profiler(record_shapes, profile_memory)", lambda: _profiler(True)),
    ]
    base = None
    print(f"{a.steps} steps, MLP width {a.width}, batch {a.batch}, torch {torch.__version__}, 1 CPU thread")
    print(f"{'case':<42}{'median ms/step':>16}{'overhead':>12}{'lines/step':>12}")
    best = {label: float("inf") for label, _ in cases}
    for _ in range(max(1, a.reps)):
        for label, ctx in cases:
            best[label] = min(best[label], _time(a.steps, ctx, a.width, a.batch))
    for label, _ in cases:
        ms = best[label] * 1e3
        base = ms if base is None else base
        path = {"TensorTrace(file)": out, "TensorTrace(file, returns=False)": out + ".2",
                "TensorTrace(file, modules=False)": out + ".3"}.get(label)
        lines = sum(1 for _ in open(path)) / (a.steps * max(1, a.reps)) if path else 0
        print(f"{label:<42}{ms:>16.3f}{(ms - base) / base * 100:>11.1f}%{lines:>12.0f}")


if __name__ == "__main__":
    main()
