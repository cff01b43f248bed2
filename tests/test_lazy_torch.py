"""torch is imported lazily, once, under a lock: in a fresh process, threads that need a FLOP formula at the same
moment all get it. (Two threads running a first `import torch` at once both fail with "partially initialized
module", which left every FLOP unknown in a TensorBoard whose request threads raced.)"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

RACE = r"""
import sys, threading
from tb_gpuinsight.estimate.dtypes import torch_dtype
from tb_gpuinsight.estimate.flops import estimate_op, torch_available
assert "torch" not in sys.modules
barrier, flops, dtypes = threading.Barrier(6), [], []
def formula(i):  # the /devices route asks whether the formulas load: torch.utils.flop_counter first
    barrier.wait()
    available = torch_available()
    flops.append(estimate_op("aten::mm", ((64, 32 + i), (32 + i, 16)), ("float", "float"), ("", "")).flops
                 if available else None)
def dtype(i):  # a dtype lookup of a request thread at the same moment: torch itself first
    barrier.wait()
    dtypes.append(str(torch_dtype("float")))
threads = [threading.Thread(target=(formula, dtype)[i % 2], args=(i,)) for i in range(6)]
[t.start() for t in threads]; [t.join() for t in threads]
print(sorted(flops), dtypes)
"""

def test_threads_racing_for_the_first_formula_all_get_it(tmp_path):
    out = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=300,
                         env={"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                              **{k: v for k, v in __import__("os").environ.items() if k == "PYTHONPATH"}})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == \
        f"{sorted(2.0 * 64 * (32 + i) * 16 for i in (0, 2, 4))} {['torch.float32'] * 3}", out.stdout
