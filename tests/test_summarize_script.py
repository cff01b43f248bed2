"""`tb_gpuinsight.summarize(...)` from a plain script (no `if __name__ == "__main__":` guard) stores every trace:
the local workers are fresh interpreters that never run the caller's script. A worker that cannot start, or is
killed, is recorded with what happened (never a guessed "out of memory" for a worker that never ran), and a later
call reports the failures it skips."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tb_gpuinsight as gi
from tb_gpuinsight.logdir import discover
from tb_gpuinsight.store import engines
from tb_gpuinsight.store.batch import summarize
from tb_gpuinsight.store.jobs import logdir_jobs
from tb_gpuinsight.store.summaries import open_store

from .test_store import rank_logdir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_plain_script_stores_every_trace(tmp_path):
    logdir = rank_logdir(tmp_path, 3)
    store = tmp_path / "store"
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(f"""\
        import tb_gpuinsight
        print("script body ran")
        report = tb_gpuinsight.summarize({str(logdir)!r}, store={str(store)!r}, workers=2)
        print("done", report.done, "failed", len(report.failed))
        """))
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("script body ran") == 1  # the workers never ran the script
    assert "done 3 failed 0" in out.stdout, out.stdout + out.stderr[-2000:]
    assert len(open_store(str(store)).keys()) == 3 and not open_store(str(store)).failure_keys()


def test_a_worker_that_never_starts_is_not_out_of_memory(tmp_path, monkeypatch):
    logdir = rank_logdir(tmp_path, 2)
    store = str(tmp_path / "store")
    monkeypatch.setattr(engines, "WORKER_CODE", "import sys; sys.exit('no module named tb_gpuinsight_x')")
    with pytest.warns(UserWarning, match="2 trace\\(s\\) failed"):
        report = gi.summarize(str(logdir), store, workers=2)
    assert report.done == 0 and len(report.failed) == 2
    for _, reason in report.failed:
        assert reason.startswith("could not start an analysis process") and "tb_gpuinsight_x" in reason
        assert "memory" not in reason
    # The next call skips the recorded failures and says so, with their reasons.
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="2 skipped") as caught:
        again = gi.summarize(str(logdir), store, workers=1)
    assert again.failed_before == 2 and len(again.skipped) == 2
    assert all("could not start" in reason for _, reason in again.skipped)
    assert "retry_failed=True" in str(caught[0].message)
    assert any(line.startswith("skipped   job/rank") for line in again.lines())


def test_a_killed_worker_is_replaced_and_named(tmp_path, monkeypatch):
    """The first job's worker is killed (SIGKILL, as the kernel's OOM killer does): that job says so, and the
    other jobs still finish on a fresh worker."""
    logdir = rank_logdir(tmp_path, 2)
    store = str(tmp_path / "store")
    marker = tmp_path / "killed-once"
    code = textwrap.dedent(f"""\
        import os, signal, sys
        from tb_gpuinsight.store import engines
        real = engines.summarize_into
        def once(url, job):
            if not os.path.exists({str(marker)!r}):
                open({str(marker)!r}, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return real(url, job)
        engines.summarize_into = once
        engines.serve()
        """)
    monkeypatch.setattr(engines, "WORKER_CODE", code)
    report = summarize(str(logdir), store, workers=1)
    assert report.done == 2 and report.retried == 1 and not report.failed  # retried once on a fresh worker
    marker.unlink()
    results = []
    todo = logdir_jobs(str(logdir), discover(str(logdir)))
    engines.run("local", str(tmp_path / "store2"), todo, lambda job, res: results.append(res), workers=1)
    assert sorted(kind for kind, _, _ in results) == ["error", "ok"]
    reason = next(r for kind, r, _ in results if kind == "error")
    assert reason == "the analysis process was killed by SIGKILL, likely out of memory"
