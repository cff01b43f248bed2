"""The test command holds on whatever a fresh environment resolves: a test needing an optional extra (Parquet's
pyarrow, S3's s3fs and moto, Dask's distributed, the browser's playwright) skips with the extra named when it is
absent, and the multi-rank recorder spawns its ranks where a forked one could not run autograd."""
from __future__ import annotations

import os
import subprocess
import sys

from . import gloo_ddp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRAS = ("pyarrow", "s3fs", "moto", "distributed", "playwright")
NEEDING_EXTRAS = ["tests/test_hardening.py::test_file_names_with_invalid_utf8_are_carried_everywhere",
                  "tests/test_hardening.py::test_one_bad_summary_never_fails_the_whole_parquet_export",
                  "tests/test_store.py::test_local_pool_engine_and_export_parquet", "tests/test_dask.py",
                  "tests/test_s3.py", "tests/test_e2e_s3.py", "tests/test_e2e_tabs.py"]
# Each extra made unimportable (None in sys.modules), as in an environment without it; then pytest itself.
WITHOUT_EXTRAS = ("import sys\nfor name in sys.argv[1].split(','):\n    sys.modules[name] = None\n"
                  "import pytest\nsys.exit(pytest.main(sys.argv[2:]))")


def test_tests_needing_an_extra_skip_without_it():
    out = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, ",".join(EXTRAS), "-q", "-rs", "-p", "no:cacheprovider",
                          *NEEDING_EXTRAS], capture_output=True, text=True, cwd=ROOT, timeout=600)
    summary = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 0 and "failed" not in summary and "error" not in summary, out.stdout[-3000:]
    skips = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    for extra in ("pyarrow", "s3fs", "dask.distributed", "playwright"):
        assert any(extra in line for line in skips), (extra, skips)
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skips) >= 12, skips  # the two that pass need none


def test_ranks_are_spawned_where_autograd_threads_run(monkeypatch, tmp_path):
    """A forked rank cannot run autograd once the parent started autograd's device threads; the recorder sees them
    by name (``pt_autograd_<device>``) and spawns instead."""
    tasks = []
    for i, name in enumerate(("python", "pt_autograd_0", "gloo")):
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "comm").write_text(name + "\n")
        tasks.append(str(tmp_path / str(i) / "comm"))
    monkeypatch.setattr(gloo_ddp.glob, "glob", lambda pattern: tasks)
    assert gloo_ddp.autograd_threads_started()
    del tasks[1]
    assert not gloo_ddp.autograd_threads_started()
    monkeypatch.setattr(gloo_ddp.glob, "glob", lambda pattern: [])  # no /proc: the safe answer
    assert gloo_ddp.autograd_threads_started()
