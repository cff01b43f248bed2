"""Recommendations across ranks: on a real 4-rank gloo run with rank 2 slowed (it sleeps before every step), the
report and the Overview lead with the straggler and its recoverable time (what the other ranks waited for it)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tb_gpuinsight.analysis.overview.rank_rules import merged, rank_recommendations
from tb_gpuinsight.cli import main

from .test_plugin import BASE, _wait

pytest.importorskip("torch")


def _report(ranks, stragglers=(), steps=(1, 2, 3)):
    return SimpleNamespace(ranks=ranks, stragglers=list(stragglers), step_numbers=list(steps))


def _rank(rank, step_ms, exposed_ms=0.0, wait_ms=0.0):
    return {"rank": rank, "worker": f"rank{rank}", "step_us": step_ms * 1000, "comm_exposed_us": exposed_ms * 1000,
            "comm_wait_us": wait_ms * 1000}


def test_straggler_recoverable_time_is_what_each_other_rank_waited_per_step():
    ranks = [_rank(0, 100, 30, 30), _rank(1, 100, 30, 30), _rank(2, 100, 1, 0)]
    strag = {"rank": 2, "worker": "rank2", "arrived_last": 3, "of_instances": 3, "others_waited_us": 180_000.0,
             "share_of_wait": 1.0, "own_wait_per_step_us": 0.0, "median_wait_per_step_us": 30_000.0}
    (rec,) = rank_recommendations(_report(ranks, [strag]))
    # 180 ms waited in all, by 2 other ranks, over 3 steps: 30 ms per rank per step, of a 100 ms step
    assert rec["id"] == "straggler" and rec["recoverable_us"] == pytest.approx(30_000)
    assert rec["recoverable_share"] == pytest.approx(0.3) and "Rank 2" in rec["title"]
    small = dict(strag, others_waited_us=1000.0)  # 0.17 ms per rank per step: under 2 % of the step
    assert rank_recommendations(_report(ranks, [small])) == []
    assert rank_recommendations(_report(ranks[:1], [strag])) == []  # one rank: nothing across ranks


def test_exposed_transfer_leaves_the_wait_out_and_yields_to_the_span_rule():
    ranks = [_rank(r, 100, exposed_ms=40, wait_ms=5) for r in range(4)]
    (rec,) = rank_recommendations(_report(ranks))
    assert rec["id"] == "exposed_comm_ranks" and rec["recoverable_us"] == pytest.approx(35_000)
    span_rec = {"id": "exposed_comm", "recoverable_us": 20_000.0}
    assert merged([span_rec], _report(ranks)) == [span_rec]
    waiting = [_rank(r, 100, exposed_ms=40, wait_ms=35) for r in range(4)]  # the exposed time is all waiting
    assert rank_recommendations(_report(waiting)) == []


@pytest.fixture(scope="module")
def gloo4(tmp_path_factory):
    from .gloo_ddp import record

    return record(str(tmp_path_factory.mktemp("ddp") / "gloo4"), world=4, slow_rank=2)


def test_report_of_the_4_rank_run_leads_with_the_straggler(capsys, gloo4):
    from .gloo_ddp import SLEEP_S

    assert main(["report", gloo4, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    first = report["recommendations"][0]
    assert first["id"] == "straggler" and first["rank"] == 1 and "Rank 2" in first["title"]
    # each other rank waits about the sleep per step (less: the straggler's own work overlaps part of it)
    assert 0.3 * 1000 * SLEEP_S < first["recoverable"]["value"] < 1.5 * 1000 * SLEEP_S
    assert report["distributed"]["straggler"]["rank"] == 2


def test_overview_route_of_the_run_leads_with_the_straggler(gloo4, tmp_path):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    logdir = gloo4.rsplit("/", 1)[0]
    service = LogdirService(logdir, cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=logdir, flags=None), service=service)
    try:
        assert _wait(lambda: [r["status"] for r in service.runs_json()["runs"]] == ["ready"], timeout=120)
        client = Client(application.TensorBoardWSGI([plugin]))
        response = client.get(f"{BASE}/overview", query_string={"run": "gloo4", "worker": "rank0", "span": "all"})
        body = json.loads(response.get_data(as_text=True))
        assert response.status_code == 200, body
        rec = body["recommendations"][0]
        assert rec["id"] == "straggler" and rec["span"] == "all ranks" and rec["recoverable_us"] > 0
    finally:
        service.stop()
