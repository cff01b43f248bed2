"""The package imports what a use needs, no more: `import tb_gpuinsight` loads no analysis (nor numpy), its dir()
lists the public names only, each of them resolves on first use, and `tb-gpuinsight analyze` imports neither the
report builder, the Overview, the diff, package metadata nor OpenSSL (each costs startup time and memory on
every run). Checked in fresh interpreters, through sys.modules."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from .corpus import corpus_path

PACKAGE = r"""
import json, sys
import tb_gpuinsight
light = sorted(m for m in sys.modules if m == "numpy" or m.startswith(("tb_gpuinsight.", "msgspec")))
names = dir(tb_gpuinsight)
# Every public name resolves (the capture helpers import torch: they are only looked up, not resolved).
capture = {"TensorTrace", "profile", "trace_handler"}
missing = [n for n in tb_gpuinsight.__all__ if n not in capture and not callable(getattr(tb_gpuinsight, n, None))]
print(json.dumps({"light": light, "dir": names, "all": tb_gpuinsight.__all__, "missing": missing,
                  "capture": sorted(capture - set(tb_gpuinsight._HOMES))}))
"""

ANALYZE = r"""
import contextlib, io, json, sys
from tb_gpuinsight.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["analyze", "--format", "csv", "--top", "0", sys.argv[1]])
print(json.dumps({"code": code, "rows": out.getvalue().count("\n"), "modules": sorted(sys.modules)}))
"""

# Modules an analysis never needs: building them into every run of the CLI cost it a fifth of its startup.
NOT_FOR_ANALYZE = ("tb_gpuinsight.reporting.build", "tb_gpuinsight.reporting.sides", "tb_gpuinsight.analysis.overview",
                   "tb_gpuinsight.analysis.diff.compare", "tb_gpuinsight.api", "importlib.metadata", "email", "_hashlib",
                   "pandas", "tensorboard", "torch",
                   "multiprocessing", "tb_gpuinsight.trace.fanout")  # the decoding processes: only for a big trace


def _run(code: str, *args: str, cache: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_is_light_and_dir_lists_the_public_names(tmp_path):
    got = _run(PACKAGE, cache=str(tmp_path))
    assert got["light"] == ["tb_gpuinsight.errors", "tb_gpuinsight.lazy", "tb_gpuinsight.version"]
    assert got["dir"] == sorted(got["all"] + ["__version__"])
    assert got["missing"] == [] and got["capture"] == []


def test_analyze_imports_no_report_overview_diff_nor_metadata(tmp_path):
    trace = str(corpus_path("tracelens/mi210__gpu_only_trace.json.gz"))
    got = _run(ANALYZE, trace, cache=str(tmp_path))
    assert got["code"] == 0 and got["rows"] > 1
    assert "tb_gpuinsight.analysis.kernels.efficiency" in got["modules"]  # it did analyse
    assert [m for m in got["modules"] if any(m == n or m.startswith(n + ".") for n in NOT_FOR_ANALYZE)] == []
