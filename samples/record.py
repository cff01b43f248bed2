"""Record the sample CPU run: a small MLP trained for a few steps under torch.profiler with a schedule,
record_shapes=True and an ExecutionTraceObserver, written like `tensorboard_trace_handler` writes.

    python samples/record.py [OUT_DIR]     (default: samples/cpu_mlp)

Each profiler cycle writes one span `{worker}.{time_ns}.pt.trace.json`. The profiler runs the observer during the
active windows only, but it finalises its file when unregistered, so the run gets one Execution Trace covering all
its spans: `{worker}.et.json`.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

import torch
from torch import nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule, tensorboard_trace_handler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tb_gpuinsight.capture import TensorTrace, tensor_trace_path  # noqa: E402  (the repo's own capture)

WORKER = "cpu-worker"


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    os.makedirs(out_dir, exist_ok=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    et_path = os.path.join(tempfile.mkdtemp(), "et.json")
    observer = ExecutionTraceObserver().register_callback(et_path)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=1, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(out_dir, worker_name=WORKER), record_shapes=True,
                 execution_trace_observer=observer) as prof:
        tensor_trace = tensor_trace_path(out_dir, WORKER)  # run-level: cpu-worker.tensor.trace
        if os.path.exists(tensor_trace):
            os.remove(tensor_trace)  # TensorTrace appends
        for step in range(6):
            x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
            with TensorTrace(tensor_trace) if step in (2, 5) else _nothing():  # the active steps
                with torch.profiler.record_function("forward"):
                    loss = loss_fn(model(x), y)
                with torch.profiler.record_function("backward"):
                    optimizer.zero_grad()
                    loss.backward()
                optimizer.step()
            prof.step()
    observer.unregister_callback()  # writes the end of the file
    shutil.copyfile(et_path, os.path.join(out_dir, f"{WORKER}.et.json"))
    print(f"wrote {sorted(os.listdir(out_dir))}")


def _nothing():
    import contextlib

    return contextlib.nullcontext()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_mlp"))
