"""A CPU-only run is described as CPU time (CPU ops, collectives, data loading, idle threads) by the Overview, the
report and the Distributed view, never by GPU idle causes; the split still sums to each step's wall time."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from tb_gpuinsight.analysis.overview.cpu import CPU_CATEGORIES
from tb_gpuinsight.cli import main

from .corpus import corpus_path

CPU_ONLY = "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"  # gloo, 300 ranks, no GPU activity
GPU_IDLE = ("host_bound", "launch_bound", "sync", "idle_other", "data_loading")


def _run(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def _keys(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from _keys(v)
    elif isinstance(x, list):
        for v in x:
            yield from _keys(v)


def test_overview_json_of_a_cpu_only_rank_has_no_gpu_idle():
    body = json.loads(_run("overview", str(corpus_path(CPU_ONLY)), "--format", "json"))
    keys = set(_keys(body))
    assert not {k for k in keys if any(k == c or k == f"{c}_us" for c in GPU_IDLE)}, keys
    assert [c["key"] for c in body["categories"]] == list(CPU_CATEGORIES)
    for step in body["steps"]:
        assert sum(step[f"{k}_us"] for k in CPU_CATEGORIES) == pytest.approx(step["wall_us"], rel=1e-9)
        assert step["cpu_collectives_us"] > 0  # gloo's collectives are where this rank's step goes
    assert body["headline"]["idle_us"] == 0.0 and "cpu_idle" in body["headline"]["breakdown_us"]


def test_report_and_overview_text_speak_of_cpu_time():
    path = str(corpus_path(CPU_ONLY))
    report = json.loads(_run("report", path, "--format", "json"))
    split = report["step"]["split"]
    labels = {r["label"] for r in split["rows"]}
    assert labels and not any(label.startswith("idle:") for label in labels), labels
    assert "CPU-only" in split["source"] or "CPU ops" in split["source"]
    text = _run("overview", path)
    assert "idle: host-bound" not in text and "idle: other" not in text and "collectives (exposed)" in text


def test_gloo_ranks_and_overview_agree(tmp_path):
    """A recorded gloo run: each rank's Distributed split is its Overview's CPU split."""
    pytest.importorskip("torch")
    import tb_gpuinsight
    from .gloo_ddp import record

    run = record(str(tmp_path / "ddp"), world=2, slow_rank=1)
    report = tb_gpuinsight.ranks(run)
    for rank in report.ranks:
        assert rank["idle_host_bound_us"] is None and rank["idle_launch_bound_us"] is None
        ov = json.loads(_run("overview", f"{run}/{rank['span']}", "--format", "json"))
        steps = ov["steps"]
        mean = {k: sum(s[f"{k}_us"] for s in steps) / len(steps) for k in CPU_CATEGORIES}
        assert rank["idle_us"] == pytest.approx(mean["cpu_idle"], rel=1e-6, abs=1e-3)
        assert rank["compute_us"] == pytest.approx(mean["cpu_ops"] + mean["cpu_data_loading"], rel=1e-6, abs=1e-3)
        assert rank["comm_exposed_us"] == pytest.approx(mean["cpu_collectives"], rel=1e-6, abs=1e-3)
