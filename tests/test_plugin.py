"""Plugin routes through TensorBoard's WSGI app: every route, bad parameters, traversal, broken and growing files."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import time

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_gpuinsight.plugin import GpuInsightLoader, GpuInsightPlugin
from tb_gpuinsight.service import LogdirService

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")
BASE = "/data/plugin/gpuinsight"
BERT = {"run": "bert_h100", "worker": "h100-node", "span": "h100-node.1751410836000000000.pt.trace.json.gz"}


def _wait(predicate, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logdir"
    shutil.copytree(SAMPLES, root, ignore=shutil.ignore_patterns("*.md", "*.py"))
    bad = root / "broken_run"
    bad.mkdir()
    data = gzip.decompress((root / "bert_h100" / os.listdir(root / "bert_h100")[0]).read_bytes())
    (bad / "w.1700000000000000000.pt.trace.json").write_bytes(data[: len(data) // 2])
    old = time.time() - 3600  # unchanged for an hour: broken, not "still being written"
    os.utime(bad / "w.1700000000000000000.pt.trace.json", (old, old))
    return root


def _client(logdir, tmp_path, **kw):
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1, **kw)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    assert _wait(lambda: _ready(service, "bert_h100") and _ready(service, "vit_h100"))
    return Client(application.TensorBoardWSGI([plugin])), plugin


def _ready(service, run):
    return any(r["run"] == run and r["status"] == "ready" for r in service.runs_json()["runs"])


def _get(client, route, **params):
    response = client.get(f"{BASE}/{route}", query_string=params)
    return response.status_code, json.loads(response.get_data(as_text=True))


def test_runs_route_lists_runs_and_broken_file(logdir, tmp_path):
    client, plugin = _client(logdir, tmp_path)
    assert plugin.is_active()
    assert _wait(lambda: any(r["status"] == "error" for r in plugin.service.runs_json()["runs"]))
    code, body = _get(client, "runs")
    assert code == 200
    runs = {r["run"]: r for r in body["runs"]}
    assert set(runs) == {"bert_h100", "vit_h100", "minitoy_mi250", "cpu_mlp", "broken_run"}
    assert runs["bert_h100"]["status"] == "ready" and runs["bert_h100"]["progress"]["files_done"] == 1
    broken = runs["broken_run"]
    assert broken["status"] == "error" and "ends early" in broken["errors"][0]["reason"]
    assert "\n" not in broken["errors"][0]["reason"]


def test_devices_kernels_roofline_ops_routes(logdir, tmp_path):
    client, _ = _client(logdir, tmp_path)
    code, body = _get(client, "devices", **BERT)
    assert code == 200 and body["devices"][0]["spec"]["name"] == "NVIDIA H100 SXM5 80GB"
    code, body = _get(client, "kernels", **BERT, sort="total_us", limit=5)
    assert code == 200 and body["total"] == 12 and len(body["rows"]) == 5
    times = [r["total_us"] for r in body["rows"]]
    assert times == sorted(times, reverse=True)
    code, page2 = _get(client, "kernels", **BERT, sort="total_us", limit=5, offset=5)
    assert {r["name"] for r in page2["rows"]}.isdisjoint({r["name"] for r in body["rows"]})
    code, asc = _get(client, "kernels", **BERT, sort="mean_us", order="asc", limit=100)
    means = [r["mean_us"] for r in asc["rows"]]
    assert means == sorted(means)
    code, filt = _get(client, "kernels", **BERT, filter="CUTLASS")
    assert filt["total"] > 0 and all("cutlass" in r["name"].lower() for r in filt["rows"])
    code, byop = _get(client, "kernels", **BERT, group="op", op="addmm")
    assert byop["rows"] and all(r["op"] == "aten::addmm" for r in byop["rows"])
    code, tf32 = _get(client, "kernels", **BERT, dtype="tf32")
    assert tf32["dtype"] == "tf32" and any(r["dtype"] == "tf32" for r in tf32["rows"])
    code, roof = _get(client, "roofline", **BERT)
    assert code == 200 and roof["dtype"] == "bf16" and roof["peak_tflops"] == 989.4 and roof["points"]
    gemm = next(r for r in body["rows"] if r["flops"])
    code, ops = _get(client, "kernel_ops", **BERT, name=gemm["name"])
    assert code == 200 and ops["ops"][0]["op"] == "aten::addmm" and ops["ops"][0]["input_dims"]
    code, all_spans = _get(client, "kernels", run="bert_h100", worker="h100-node", span="all")
    assert all_spans["total"] == 12
    # Coverage by reason, covered share and roof marks survive the summary cache.
    code, body = _get(client, "devices", **BERT)
    summary = body["devices"][0]["summary"]
    assert 0 < summary["covered_time_share"] <= 1 and summary["efficiency"] <= 1
    assert all(r["hint"] and r["label"] and 0 < r["time_share"] <= 1 for r in summary["reasons"])
    row = next(r for r in all_spans["rows"] if r["role"] == "compute")
    assert row["covered_share"] == 1 and row["reason"] == "" and row["over_roof"] is False
    assert all("over_roof" in p and "roof_cause" in p for p in roof["points"])


ALL_ROUTES = ("kernels", "devices", "roofline", "kernel_ops")


@pytest.mark.parametrize("params,status,routes", [
    ({"run": "../../etc/passwd", "worker": "x"}, 404, ALL_ROUTES),
    ({"run": "bert_h100", "worker": "../vit_h100"}, 404, ALL_ROUTES),
    ({**BERT, "span": "../../../../etc/passwd"}, 404, ALL_ROUTES),
    ({**BERT, "span": "/etc/passwd"}, 404, ALL_ROUTES),
    ({"worker": "h100-node"}, 400, ALL_ROUTES),
    ({**BERT, "dtype": "fp7"}, 400, ALL_ROUTES),
    ({**BERT, "device": "x"}, 400, ("kernels", "roofline", "kernel_ops")),
    ({**BERT, "sort": "__class__"}, 400, ("kernels",)),
    ({**BERT, "limit": "-1"}, 400, ("kernels",)),
    ({**BERT, "limit": "abc"}, 400, ("kernels",)),
    ({**BERT, "filter": "x" * 600}, 400, ("kernels",)),
    ({**BERT, "group": "evil"}, 400, ("kernels",)),
    (BERT, 400, ("kernel_ops",)),  # no kernel name
    ({"run": "broken_run", "worker": "w", "span": "all"}, 422, ALL_ROUTES),  # failed for good: no retry
])
def test_bad_parameters(logdir, tmp_path, params, status, routes):
    client, plugin = _client(logdir, tmp_path)
    _wait(lambda: any(r["status"] == "error" for r in plugin.service.runs_json()["runs"]))
    for route in routes:
        code, body = _get(client, route, **({"name": "k", **params} if route == "kernel_ops" and
                                             params is not BERT else params))
        assert code == status, (route, body)
        assert isinstance(body["error"], str) and "\n" not in body["error"]


def test_trace_download_is_augmented_gzip(logdir, tmp_path):
    client, _ = _client(logdir, tmp_path)
    response = client.get(f"{BASE}/trace", query_string=BERT)
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/gzip"
    doc = json.loads(gzip.decompress(response.get_data()))
    assert any("kernel_flop" in e.get("args", {}) for e in doc["traceEvents"])
    assert client.get(f"{BASE}/trace", query_string={**BERT, "span": "../x"}).status_code == 404
    assert client.get(f"{BASE}/trace", query_string={**BERT, "span": "all"}).status_code == 404


def test_static_bundle_served_as_javascript(logdir, tmp_path):
    client, _ = _client(logdir, tmp_path)
    response = client.get(f"{BASE}/index.js")
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/javascript")


def test_new_span_appears_while_running(logdir, tmp_path):
    client, plugin = _client(logdir, tmp_path)
    run_dir = logdir / "bert_h100"
    src = next(run_dir.iterdir())
    shutil.copy(src, run_dir / "h100-node.1751410999000000000.pt.trace.json.gz")
    interval = plugin.service.scan_interval

    def two_spans():
        run = next(r for r in plugin.service.runs_json()["runs"] if r["run"] == "bert_h100")
        spans = run["workers"][0]["spans"]
        return len(spans) == 2 and all(s["status"] == "ready" for s in spans)

    assert _wait(two_spans, timeout=interval * 20 + 5)
    code, body = _get(client, "kernels", run="bert_h100", worker="h100-node", span="all")
    assert code == 200 and sum(r["count"] for r in body["rows"]) == 2 * 61


def test_growing_file_waits_then_loads(logdir, tmp_path):
    client, plugin = _client(logdir, tmp_path)
    run_dir = logdir / "live"
    run_dir.mkdir()
    full = gzip.decompress(next((logdir / "bert_h100").iterdir()).read_bytes())
    target = run_dir / "w.1700000000000000001.pt.trace.json"
    target.write_bytes(full[:1000])  # the profiler is still writing it
    assert _wait(lambda: _span_status(plugin, "live") == "waiting")
    code, runs = _get(client, "runs")
    live = next(r for r in runs["runs"] if r["run"] == "live")
    assert live["status"] == "loading" and not live["errors"]
    target.write_bytes(full)  # done: it changes, so it is analysed again
    assert _wait(lambda: _span_status(plugin, "live") == "ready")


def _span_status(plugin, run):
    for r in plugin.service.runs_json()["runs"]:
        if r["run"] == run:  # no span while a rewrite has truncated its file: asked again at the next poll
            spans = [s for w in r["workers"] for s in w["spans"]]
            return spans[0]["status"] if spans else None
    return None


def test_warm_restart_uses_cache(logdir, tmp_path):
    _client(logdir, tmp_path)
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=60)
    service.scan()
    assert _ready(service, "bert_h100")  # straight from the cache: nothing re-read
    eff = service.analysis(BERT["run"], BERT["worker"], BERT["span"])
    assert len(eff.activities) == 61
    assert not any(n.startswith(".tmp") for n in os.listdir(tmp_path / "cache"))
    assert sorted(os.listdir(logdir / "bert_h100")) == [BERT["span"]]  # nothing written into the logdir


def test_process_pool_loading(logdir, tmp_path):
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache2"), workers=2, scan_interval=60)
    try:
        service.scan()
        assert _wait(lambda: _ready(service, "bert_h100") and _ready(service, "vit_h100"), timeout=120)
    finally:
        service.stop()


def test_loader_defines_flags():
    import argparse

    parser = argparse.ArgumentParser()
    GpuInsightLoader().define_flags(parser)
    flags = parser.parse_args(["--gpuinsight_workers", "2", "--gpuinsight_cache_dir", "/tmp/x"])
    assert flags.gpuinsight_workers == 2 and flags.gpuinsight_cache_dir == "/tmp/x"


def test_diff_route(logdir, tmp_path):
    client, _ = _client(logdir, tmp_path)
    sides = {"a_run": "bert_h100", "a_worker": "h100-node", "b_run": "vit_h100", "b_worker": "h100-node"}
    code, body = _get(client, "diff", **sides, limit=5)
    assert code == 200 and body["total"] > 5 and len(body["rows"]) == 5
    assert body["summary"]["time_us_a"] > 0 and body["summary"]["time_us_b"] > body["summary"]["time_us_a"]
    assert {c["class"] for c in body["classes"]} >= {"GEMM", "attention"}
    code, added = _get(client, "diff", **sides, status="added", sort="time_us_b")
    assert all(r["status"] == "added" for r in added["rows"])
    times = [r["time_us_b"] for r in added["rows"]]
    assert times == sorted(times, reverse=True)
    code, byop = _get(client, "diff", **sides, by="op", filter="addmm")
    assert byop["rows"] and all("addmm" in r["name"] for r in byop["rows"])
    code, err = _get(client, "diff", **{**sides, "b_run": "../etc"})
    assert code == 404 and "unknown run" in err["error"]
    code, err = _get(client, "diff", **sides, match="fuzzy")
    assert code == 400
