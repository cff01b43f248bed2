"""Regenerate the Inductor Triton kernels beside this file (needs the `triton` package; no GPU).

    PYTHONPATH=<a folder holding triton> python tests/data/inductor_triton/generate.py

torch.compile with `cpu_backend="triton"` makes Inductor write real Triton kernels for CPU tensors. Inductor asks
Triton's active driver only for a target to hash; with no GPU driver here a stand-in names a CUDA target, and the
compile then stops before running anything, after the kernel files are written. `benchmark_kernel=True` makes
Inductor record its own `kernel_num_gb` in each kernel's `inductor_meta`: the tests compare our sizing from the
index expressions with it and with hand counts. `launches.json` holds each kernel's launch arguments as a trace
records them (dims and dtype of each buffer, then the numels), read from the benchmark harness in the kernel file.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = tempfile.mkdtemp(prefix="torchinductor_fixtures_")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime import driver  # noqa: E402


class _Target:
    """A driver that only names a target (Inductor hashes it into the kernel's metadata)."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def is_active(self):
        return True


driver.set_active(_Target())
inductor_config.cpu_backend = "triton"
inductor_config.benchmark_kernel = True
inductor_config.compile_threads = 1

torch.manual_seed(0)
MODELS = {
    "slices": (lambda x: x[:, :64] * 2 + x[:, 128:192], (torch.randn(256, 512),)),
    "gelu_bias": (lambda x, w, b: torch.nn.functional.gelu(x @ w) + b,
                  (torch.randn(256, 512), torch.randn(512, 384), torch.randn(384))),
    "swiglu": (lambda x, w1, w3: torch.nn.functional.silu(x @ w1) * (x @ w3),
               (torch.randn(128, 256, dtype=torch.bfloat16), torch.randn(256, 1024, dtype=torch.bfloat16),
                torch.randn(256, 1024, dtype=torch.bfloat16))),
    "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                (torch.randn(256, 512), torch.randn(512))),
    "embedding": (lambda idx, table: table[idx] * 2.0, (torch.randint(0, 1000, (64,)), torch.randn(1000, 128))),
    "transpose": (lambda x: x.t().contiguous() + 1.0, (torch.randn(384, 256),)),
}
_DTYPES = {"torch.float32": "float", "torch.bfloat16": "c10::BFloat16", "torch.int64": "long int"}


def _launch(text: str) -> list:
    """The launch arguments as a trace records them, from the benchmark harness Inductor adds to the kernel file
    (``get_args``: ``rand_strided(dims, strides, ..., dtype=...)`` per buffer, then the numels)."""
    start = text.index("def get_args():")
    body = text[start:text.index("\n\n", start)]
    tensors = re.findall(r"rand_strided\(\(([^)]*)\), \([^)]*\), device='\w+', dtype=(torch\.\w+)\)", body)
    returned = re.search(r"return (.*)", body).group(1)
    args = [[[int(d) for d in dims.split(",") if d.strip()], _DTYPES[dtype]] for dims, dtype in tensors]
    return args + [int(v) for v in returned.split(",") if v.strip().isdigit()]


def main() -> None:
    for model, (fn, args) in MODELS.items():
        try:
            torch.compile(fn)(*args)
        except Exception as exc:  # expected: nothing can run the kernels here
            print(f"{model}: compiled up to {type(exc).__name__}", file=sys.stderr)
    launches = {}
    for path in sorted(glob.glob(f"{CACHE}/*/*.py")):
        text = Path(path).read_text()
        name = re.search(r"^def (triton_(?:poi|red|per)_\w+)\(", text, re.M)
        if name is None or "def get_args():" not in text or name.group(1) in launches or text.startswith("# AOT"):
            continue
        shutil.copy(path, HERE / Path(path).name)
        launches[name.group(1)] = {"file": Path(path).name, "args": _launch(text)}
    (HERE / "launches.json").write_text(json.dumps(launches, indent=1, sort_keys=True) + "\n")
    print(json.dumps(launches, sort_keys=True))


if __name__ == "__main__":
    main()
