"""Record the sample CPU run with the project's own capture: a small MLP trained for six steps under
`tb_gpuinsight.profile` (schedule wait=1, warmup=1, active=1, repeat=2; record_shapes=True; profile_memory=False,
so that the samples also show the Memory tab's empty state: bert_h100 has GPU and CPU memory events).

    python samples/record.py [OUT_DIR]     (default: samples/cpu_mlp; its old files are replaced)

Each profiler span `cpu-worker.{time_ns}` gets its Kineto trace (`.pt.trace.json`), the Execution Trace of the same
active window (`.et.json`) and a tensor.trace of the same steps (`.tensor.trace`), which discovery pairs with it.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tb_gpuinsight  # noqa: E402  (the repo's own package, also when it is not installed)

WORKER = "cpu-worker"
_OURS = (".pt.trace.json", ".et.json", ".tensor.trace")


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):  # a fresh recording replaces the last one
        if name.startswith(WORKER + ".") and name.endswith(_OURS):
            os.remove(os.path.join(out_dir, name))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with tb_gpuinsight.profile(out_dir, worker_name=WORKER, wait=1, warmup=1, active=1, repeat=2,
                               profile_memory=False) as prof:
        for _ in range(6):
            x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
            with torch.profiler.record_function("forward"):
                loss = loss_fn(model(x), y)
            with torch.profiler.record_function("backward"):
                optimizer.zero_grad()
                loss.backward()
            optimizer.step()
            prof.step()
    print(f"wrote {sorted(os.listdir(out_dir))}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_mlp"))
