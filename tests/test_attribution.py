"""What accounts for a change, on hand-made GPU runs with a known answer (`gpu_steps`): B's GEMM takes 3x as long,
its elementwise kernel the same, so GEMM is all of the change. The gate's second line, the report's baseline section
and the Diff route's verdict and attribution all say so, per step."""
from __future__ import annotations

import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.cli import main

from .gpu_steps import write_run
from .test_plugin import BASE, _wait

STEPS = 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("attr")
    write_run(root / "before", STEPS, gemm_us=400, add_us=100, stamp=1700000000000)
    write_run(root / "after", STEPS, gemm_us=1200, add_us=100, stamp=1700000100000)
    return root


def test_gate_names_the_class_and_kernel_behind_a_regression(capsys, runs):
    code = main(["diff", str(runs / "before"), str(runs / "after"), "--fail-if-slower", "10"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and err[0].startswith("tb-gpuinsight: gate: FAIL: after is slower than before")
    # 7 kept steps a side (the first left out); medians 0.6 and 1.4 ms per step
    assert "median step time 0.600 -> 1.400 ms" in err[0] and "7 of 8 steps kept" in err[0]
    assert err[1] == ("tb-gpuinsight: gate: behind the change: GPU time 0.500 -> 1.300 ms per step (+0.800); "
                      "by class: GEMM 0.400 -> 1.200 (+0.800, 100%); "
                      "top kernels: ampere_sgemm_128x64_nn 0.400 -> 1.200 (+0.800, 100%)")
    code = main(["diff", str(runs / "after"), str(runs / "before"), "--fail-if-slower", "10"])
    err = capsys.readouterr().err.splitlines()
    assert code == 0 and "before is faster than after beyond the noise" in err[0] and "GEMM 1.200 -> 0.400" in err[1]


def test_report_baseline_section_attributes_the_change_per_step(runs):
    report = tb_gpuinsight.report(runs / "after", baseline=runs / "before")
    att = report["comparison"]["attribution"]
    gemm, add = att["classes"]["rows"]
    assert gemm["class"] == "GEMM" and gemm["a_ms"] == pytest.approx(0.4) and gemm["b_ms"] == pytest.approx(1.2)
    assert gemm["share_of_change"] == pytest.approx(100) and add["delta_ms"] == pytest.approx(0)
    assert add["share_of_change"] == 0
    top = att["top"]["rows"][0]
    assert top["kernel"] == "ampere_sgemm_128x64_nn" and top["delta_ms"] == pytest.approx(0.8)
    step = report["comparison"]["metrics"][0]
    assert step["metric"] == "step" and step["judgeable"] and step["outside_noise"] is True
    md = tb_gpuinsight.report(runs / "after", baseline=runs / "before", format="md")
    assert "### What accounts for the change" in md and "`ampere_sgemm_128x64_nn`" in md


@pytest.fixture
def client(runs, tmp_path):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    service = LogdirService(str(runs), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(runs), flags=None), service=service)
    assert _wait(lambda: all(r["status"] == "ready" for r in service.runs_json()["runs"]) and
                 len(service.runs_json()["runs"]) == 2)
    yield Client(application.TensorBoardWSGI([plugin]))
    service.stop()


def _get(client, route, **params):
    response = client.get(f"{BASE}/{route}", query_string=params)
    return response.status_code, json.loads(response.get_data(as_text=True))


def test_diff_route_gives_the_verdict_and_the_attribution(client):
    sides = {"a_run": "before", "a_worker": "w", "a_span": "all", "b_run": "after", "b_worker": "w", "b_span": "all"}
    code, body = _get(client, "diff", **sides, threshold="10")
    assert code == 200, body
    v = body["verdict"]
    assert v["verdict"] == "regression" and v["threshold"] == 10 and v["a"]["kept"] == STEPS - 1
    assert v["a"]["median"] == pytest.approx(0.6) and v["b"]["median"] == pytest.approx(1.4)
    att = body["attribution"]
    assert att["unit"] == "ms per step" and att["classes"][0]["class"] == "GEMM"
    assert att["classes"][0]["share_of_change"] == pytest.approx(1.0) and att["top"][0]["name"] == "ampere_sgemm_128x64_nn"
    for bad in ("nan", "0", "-1", "inf", "x"):
        code, body = _get(client, "diff", **sides, threshold=bad)
        assert code == 400 and "threshold must be" in body["error"]


def test_trend_route_marks_the_slower_run_and_names_its_kernel(client):
    code, body = _get(client, "trend")
    assert code == 200, body
    before, after = body["runs"]
    assert (before["run"], before["change"]) == ("before", "none") and after["run"] == "after"
    assert after["change"] == "regression" and after["against"] == ["before"]
    assert after["step_ms"] == pytest.approx(1.4) and before["classes"]["gemm"] == pytest.approx(0.4)
    assert 0 < before["mfu"] < 100 and after["mfu"] < before["mfu"]
    assert after["top"][0]["kernel"] == "ampere_sgemm_128x64_nn" and after["top"][0]["share_of_change"] == pytest.approx(1)
    code, body = _get(client, "trend", metric="class:elementwise")
    assert code == 200 and [r["change"] for r in body["runs"]] == ["none", "none"]  # the add did not change
    for bad in ({"metric": "class:nope"}, {"metric": "x"}, {"threshold": "nan"}, {"threshold": "-2"}):
        code, body = _get(client, "trend", **bad)
        assert code == 400 and ("unknown metric" in body["error"] or "threshold must be" in body["error"])
