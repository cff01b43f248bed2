"""torch is imported lazily, once, under a lock: in a fresh process, threads that need torch (an op schema the shipped
table lacks, a dtype) at the same moment all get it. (Two threads running a first `import torch` at once both fail with "partially initialized
module", which left every FLOP unknown in a TensorBoard whose request threads raced.)"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tb_gpuinsight.estimate.schemas import torch_arg_limit

pytest.importorskip("torch")

RACE = r"""
import sys, threading
from tb_gpuinsight.estimate.dtypes import torch_dtype
from tb_gpuinsight.estimate.schemas import torch_arg_limit
assert "torch" not in sys.modules
barrier, flops, dtypes = threading.Barrier(6), [], []
def formula(i):  # an op schema from torch itself: torch.ops first
    barrier.wait()
    flops.append(torch_arg_limit(("mm", "addmm", "bmm")[i // 2]))
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
    # the installed torch's own answers (the shipped table's under its release; another release may differ)
    expected = sorted(torch_arg_limit(op) for op in ("mm", "addmm", "bmm"))
    assert out.stdout.strip().splitlines()[-1] == f"{expected} {['torch.float32'] * 3}", out.stdout
