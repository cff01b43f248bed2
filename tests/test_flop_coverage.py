"""One FLOP coverage ("FLOPs known for X % of compute kernel time", analysis/kernels/coverage.py) in every view: the
`overview`, `analyze` and `report` JSON, their text, the Overview and Kernel efficiency routes (the UI cards) print
the same number on real traces; the definition itself is checked on a hand-made table."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re

import numpy as np
import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_gpuinsight.analysis.kernels import coverage
from tb_gpuinsight.cli import main
from tb_gpuinsight.plugin import GpuInsightPlugin
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.trace.table import Table

from .corpus import corpus_path
from .test_plugin import BASE, _wait

# A100 AlexNet with memcpy / memset, H100 BERT, MI250 (ROCm), V100 with NCCL collectives
TRACES = ("hta/benchmark_result_2869224_1695835535_trace.json.gz",
          "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
          "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
PRINTED = re.compile(r"FLOPs known for ([0-9.]+)%? ?%? of compute kernel time")


def _run(*argv: str):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def _one_device_share(devices) -> float:
    """The coverage over all GPUs of a trace from the per-device cards (compute time weighted)."""
    compute = sum(d["summary"]["compute_time_us"] for d in devices)
    known = sum(d["summary"]["compute_time_us"] * (d["summary"][coverage.KEY] or 0.0) for d in devices)
    return known / compute


@pytest.mark.parametrize("name", TRACES)
def test_every_cli_surface_prints_one_coverage(name):
    path = str(corpus_path(name))
    overview = json.loads(_run("overview", path, "--format", "json"))["headline"][coverage.KEY]
    analyzed = json.loads(_run("analyze", path, "--format", "json"))["devices"]
    report = json.loads(_run("report", path, "--format", "json"))
    assert overview is not None and 0 < overview <= 1
    assert _one_device_share(analyzed) == pytest.approx(overview, rel=1e-9)
    assert report["utilization"]["flops_known"]["value"] == pytest.approx(100 * overview, rel=1e-9)
    for device, card in zip(report["devices"], analyzed):
        assert device["flops_known"]["value"] == pytest.approx(100 * card["summary"][coverage.KEY], rel=1e-9)
        assert "compute_flops_known" not in device  # one key
    shown = f"{100 * overview:.1f}"
    texts = {"overview": _run("overview", path), "report": _run("report", path)}
    if len(analyzed) == 1:  # one GPU: its card's figure is the trace's
        texts["analyze"] = _run("analyze", path)
    for surface, text in texts.items():
        printed = set(PRINTED.findall(text))
        assert printed == {shown}, (surface, printed, shown)


def test_the_ui_routes_carry_the_same_coverage(tmp_path):
    """The Overview's headline card and the Kernel efficiency device card, from the plugin routes."""
    logdir = tmp_path / "logdir" / "bert"
    logdir.mkdir(parents=True)
    os.symlink(corpus_path(TRACES[1]), logdir / "worker0.pt.trace.json.gz")
    service = LogdirService(str(tmp_path / "logdir"), cache_dir=str(tmp_path / "cache"), workers=0,
                            scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(tmp_path / "logdir"), flags=None), service=service)
    client = Client(application.TensorBoardWSGI([plugin]))

    def get(route: str, **query):
        return json.loads(client.get(f"{BASE}/{route}", query_string=query).get_data(as_text=True))

    assert _wait(lambda: [r["status"] for r in get("runs")["runs"]] == ["ready"], timeout=120.0)
    run = get("runs")["runs"][0]
    sel = dict(run="bert", worker=run["workers"][0]["worker"], span=run["workers"][0]["spans"][0]["span"])
    headline = get("overview", **sel)["headline"][coverage.KEY]
    cards = get("devices", **sel)
    devices = cards["devices"] if isinstance(cards, dict) else cards
    [card] = [d for d in devices if d.get("summary")]
    assert card["summary"][coverage.KEY] == pytest.approx(headline, rel=1e-9)
    cli = json.loads(_run("overview", str(corpus_path(TRACES[1])), "--format", "json"))["headline"][coverage.KEY]
    assert cli == pytest.approx(headline, rel=1e-9)


def _acts(rows):
    """An activity table of (kind, name, dur, flops) rows."""
    kinds, names = sorted({r[0] for r in rows}), sorted({r[1] for r in rows})
    return Table("activities", {
        "kind": np.array([kinds.index(r[0]) for r in rows]), "name": np.array([names.index(r[1]) for r in rows]),
        "op_name": np.full(len(rows), -1), "dur": np.array([r[2] for r in rows], dtype=float),
        "flops": np.array([r[3] for r in rows], dtype=float)}, {"kind": kinds, "name": names, "op_name": []})


def test_the_definition():
    """Compute kernel time = kernels other than communication, copies and fills; a known zero is known."""
    acts = _acts([("kernel", "ampere_sgemm_128x64_nn", 60.0, 1e9),          # GEMM, known
                  ("kernel", "vectorized_elementwise_kernel", 20.0, 0.0),  # a known zero is known
                  ("kernel", "some_custom_kernel_without_rule", 20.0, np.nan),  # unknown
                  ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 500.0, np.nan),  # communication: aside
                  ("memcpy", "Memcpy HtoD (Pageable -> Device)", 300.0, np.nan),  # copies: aside
                  ("memset", "Memset (Device)", 50.0, np.nan)])
    got = coverage.flop_coverage([acts])
    assert got["compute_time_us"] == 100.0 and got["flop_known_us"] == 80.0 and got[coverage.KEY] == 0.8
    assert coverage.flop_coverage([_acts([("memcpy", "Memcpy DtoD", 5.0, np.nan)])])[coverage.KEY] is None
    assert coverage.label("80.0%") == "FLOPs known for 80.0% of compute kernel time"
