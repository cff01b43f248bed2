"""The device the user picked (`device_name`) applies to every route that rates against a device: Tensor shapes,
Execution graph, Memory and the Timeline's efficiency colouring answer differently for another device, and refuse a
name that is no datasheet row (400), as the Kernel efficiency routes do."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_gpuinsight.plugin import GpuInsightPlugin
from tb_gpuinsight.service import LogdirService

from .corpus import corpus_logdir

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
MI300X = "AMD Instinct MI300X"
H100 = "NVIDIA H100 SXM5 80GB"


def _client(logdir: Path, cache: Path):
    service = LogdirService(str(logdir), cache_dir=str(cache), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    client = Client(application.TensorBoardWSGI([plugin]))

    def get(route, **query):
        response = client.get(f"/data/plugin/gpuinsight/{route}", query_string=query)
        return response.status_code, json.loads(response.get_data(as_text=True))
    return service, get


def _ready(service, run: str) -> dict:
    end = time.time() + 120
    while time.time() < end:
        runs = {r["run"]: r for r in service.runs_json()["runs"]}
        if run in runs and runs[run]["status"] == "ready":
            return runs[run]
        time.sleep(0.1)
    raise AssertionError(f"run {run} never became ready")


@pytest.fixture(scope="module")
def mi250(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mi250")
    shutil.copytree(SAMPLES / "minitoy_mi250", tmp / "logdir" / "minitoy_mi250")
    service, get = _client(tmp / "logdir", tmp / "cache")
    worker = _ready(service, "minitoy_mi250")["workers"][0]
    return get, {"run": "minitoy_mi250", "worker": worker["worker"], "span": worker["spans"][0]["span"]}


def _peaks(rows) -> set:
    return {r["peak_tflops"] for r in rows if r.get("peak_tflops")}


def test_tensor_shapes_rate_against_the_picked_device(mi250):
    get, sel = mi250
    code, own = get("op_shapes", **sel)
    assert code == 200 and _peaks(own["rows"]), own
    code, picked = get("op_shapes", device_name=MI300X, **sel)
    assert code == 200
    assert _peaks(picked["rows"]) and _peaks(picked["rows"]).isdisjoint(_peaks(own["rows"]))
    code, bad = get("op_shapes", device_name="Gone GPU 9000", **sel)
    assert code == 400 and "not a datasheet device" in bad["error"]


def test_memory_names_the_device_it_reads_against(mi250):
    get, sel = mi250
    code, own = get("memory", **sel)
    assert code == 200
    code, picked = get("memory", device_name=MI300X, **sel)
    assert code == 200
    gpus = [d for d in picked["devices"] if d["device"].startswith("cuda")]
    for d in gpus:
        assert d["rated_as"]["name"] == MI300X and d["rated_as"]["memory_gb"] > 100
    for d in own["devices"]:
        if d["device"].startswith("cuda"):
            assert d["rated_as"]["name"] == "AMD Instinct MI250 (one GCD)"
    assert get("memory", device_name="Gone GPU 9000", **sel)[0] == 400


def test_timeline_colouring_follows_the_picked_device(mi250):
    get, sel = mi250
    code, meta = get("timeline/meta", tspan=sel["span"], **sel)
    assert code == 200, meta
    query = {"tspan": sel["span"], "t0": 0, "t1": meta["duration_us"], "width": 8000, **sel}  # every event drawn
    gpu = {lane["id"] for lane in meta["lanes"] if lane["kind"] == "gpu"}

    def effs(body) -> list:
        return [e for lane in body["lanes"] if lane["id"] in gpu for e in lane["events"]["eff"]]
    code, own = get("timeline/view", **query)
    assert code == 200 and any(e is not None for e in effs(own)), own
    code, picked = get("timeline/view", device_name=MI300X, **query)
    assert code == 200 and len(effs(picked)) == len(effs(own))
    # The same kernels against MI300X's higher roofs: a smaller fraction of the roof each.
    pairs = [(a, b) for a, b in zip(effs(own), effs(picked)) if a is not None]
    assert all(b <= a for a, b in pairs) and any(b < a for a, b in pairs), pairs  # (rounded to 1e-4)
    assert get("timeline/view", device_name="Gone GPU 9000", **query)[0] == 400


def test_execution_graph_rates_against_the_picked_device(tmp_path):
    logdir = corpus_logdir(tmp_path, "param/dlrm_8ranks", "dlrm")
    service, get = _client(logdir, tmp_path / "cache")
    worker = _ready(service, "dlrm")["workers"][0]
    sel = {"run": "dlrm", "worker": worker["worker"], "span": worker["spans"][0]["span"]}
    code, own = get("graph/view", **sel)
    assert code == 200 and own["available"], own
    code, picked = get("graph/view", device_name=H100, **sel)
    assert code == 200
    eff = {n["id"]: n["efficiency"] for n in own["nodes"] if n["efficiency"]}
    rated = {n["id"]: n["efficiency"] for n in picked["nodes"] if n["efficiency"]}
    assert eff and rated and set(eff) == set(rated)
    # A V100 run rated as an H100 (a higher roof) reads lower on every rated node.
    assert all(rated[i] < eff[i] for i in eff), (eff, rated)
    assert get("graph/view", device_name="Gone GPU 9000", **sel)[0] == 400
