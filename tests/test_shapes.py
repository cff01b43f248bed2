"""Tensor shapes: op groups, the tensor.trace join, the `shapes` command and the plugin routes, on the samples."""
from __future__ import annotations

import glob
import json
import os
import shutil
import time

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

import tb_gpuinsight
from tb_gpuinsight.analysis.shapes import report as sh
from tb_gpuinsight.cli import main
from tb_gpuinsight.plugin import GpuInsightPlugin
from tb_gpuinsight.service import LogdirService

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")
BERT = glob.glob(os.path.join(SAMPLES, "bert_h100", "*.pt.trace.json.gz"))[0]
CPU_SPANS = sorted(glob.glob(os.path.join(SAMPLES, "cpu_mlp", "*.pt.trace.json")))
BASE = "/data/plugin/gpuinsight"


def test_bert_linear_groups_have_device_time_flops_and_peak():
    report = tb_gpuinsight.shapes(BERT)
    ops = report.ops
    linear = ops[(ops["op"] == "aten::linear") & (ops["shape"] == "[1, 141, 512] [512, 512] [512]")].iloc[0]
    assert linear["calls"] == 17 and linear["kernels"] == 17 and linear["dtype"] == "bf16"
    assert linear["flops"] == pytest.approx(17 * 2 * 141 * 512 * 512, rel=0.02)
    assert linear["tflops"] == pytest.approx(linear["flops"] / (linear["device_us"] * 1e-6) / 1e12)
    assert 0 < linear["pct_peak"] < 1
    addmm = ops[(ops["op"] == "aten::addmm") & (ops["shape"] == "[512] [141, 512] [512, 512] - -")].iloc[0]
    assert addmm["device_us"] == pytest.approx(linear["device_us"])  # the child's kernels count for the parent
    dist = report.distribution("aten::linear")
    assert dist["calls"].sum() == ops[ops["op"] == "aten::linear"]["calls"].sum()
    assert report.tensors is None  # no tensor.trace next to this sample


def test_cpu_run_groups_and_tensor_join():
    report = tb_gpuinsight.shapes(CPU_SPANS[0])
    stem = os.path.basename(CPU_SPANS[0]).replace(".pt.trace.json", "")
    assert report.record_shapes and report.tensor_trace_paths[0].endswith(stem + ".tensor.trace")  # its span's
    ops = report.ops
    assert ops["device_us"].isna().all()  # CPU-only: no kernels, yet every op is there
    lin = ops[(ops["op"] == "aten::linear") & (ops["shape"] == "[32, 64] [128, 64] [128]")].iloc[0]
    assert lin["flops"] == 2 * 32 * 64 * 128
    t = report.tensors.to_pandas()
    joined = t[(t["function"] == "torch.nn.functional.linear") & (t["op"] == "aten::linear")]
    assert len(joined) and report.tensors.matched > 0
    assert (joined["op_shape"].str.startswith("[32, ")).all()
    weights = t[(t["name"] == "weight") & (t["producer"] != "")]
    assert weights["producer"].str.startswith("Tensor.add_").all()  # the optimizer step made them


def test_join_without_trace_and_empty_groups():
    from tb_gpuinsight.trace.tensortrace import parse_lines

    parsed = parse_lines(["[call]  5  torch.Size([2])  8  16  a  torch.mm  x.py:1",
                          "[ret]  6  torch.Size([2])  8  32  return  torch.mm  x.py:1",
                          "[call]  7  torch.Size([2])  8  32  b  torch.add  x.py:2"])
    joined = sh.join_tensors([parsed])
    assert joined.matched == 0
    rows = sh.tensor_rows(joined, range(3))
    assert rows[2]["producer"] == "torch.mm x.py:1" and rows[0]["ptr"] == "0x10" and rows[2]["t_ms"] == 2e-6
    assert sh.merge_groups([]) == [] and sh.distribution([], "aten::mm") == []


def test_cli_shapes(capsys, tmp_path):
    assert main(["shapes", CPU_SPANS[0], "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "op groups" in out and "tensor records" in out and "aten::" in out
    assert main(["shapes", BERT, "--op", "aten::linear", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["shapes"][0]["shape"] == "[1, 141, 512] [512, 512] [512]" and data["shapes"][0]["calls"] == 17
    bad = tmp_path / "b.tensor.trace"
    bad.write_text("[call]  1  torch.Size([1])  4  1  a  f  x.py:1\n[call]  oops\n")
    assert main(["shapes", str(bad), "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert f"{bad}:2: skipped" in captured.err and captured.out.startswith("kind,")
    (tmp_path / "x.txt").write_text("hello")
    assert main(["shapes", str(tmp_path / "x.txt")]) == 2


# ---------------------------------------------------------------------------------------------- routes

@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("logdir")
    for run in ("bert_h100", "cpu_mlp"):
        shutil.copytree(os.path.join(SAMPLES, run), root / run)
    service = LogdirService(str(root), cache_dir=str(root.parent / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(root), flags=None), service=service)
    end = time.time() + 60
    while time.time() < end and sorted(r["run"] for r in service.runs_json()["runs"] if r["status"] == "ready") != [
            "bert_h100", "cpu_mlp"]:
        time.sleep(0.05)
    yield Client(application.TensorBoardWSGI([plugin]))
    service.stop()


def _get(client, route, **params):
    response = client.get(f"{BASE}/{route}", query_string=params)
    return response.status_code, json.loads(response.get_data(as_text=True))


CPU = {"run": "cpu_mlp", "worker": "cpu-worker"}
GPU = {"run": "bert_h100", "worker": "h100-node"}


def test_routes_op_shapes(client):
    code, body = _get(client, "op_shapes", **GPU, sort="calls", order="desc", limit=5)
    assert code == 200 and body["record_shapes"] and body["total"] > 20 and len(body["rows"]) == 5
    calls = [r["calls"] for r in body["rows"]]
    assert calls == sorted(calls, reverse=True)
    code, body = _get(client, "op_shapes", **GPU, filter="141, 512] [512, 512]")
    assert code == 200 and body["rows"] and all("[512, 512]" in r["shape"] for r in body["rows"])
    code, body = _get(client, "op_shapes", **CPU)  # all spans of the CPU run
    assert code == 200 and body["spans"] == 2 and body["rows"][0]["device_us"] is None


def test_routes_tensors_and_distribution(client):
    code, body = _get(client, "tensors", **CPU, filter="weight", sort="bytes", order="desc", limit=3)
    assert code == 200 and body["has_tensor_trace"]
    assert [f["file"].endswith(".tensor.trace") and f["file"].startswith("cpu-worker.") for f in body["files"]] == \
        [True, True]  # all spans: each span's own file
    assert [r["name"] for r in body["rows"]] == ["weight"] * 3 and body["rows"][0]["bytes"] == 128 * 128 * 4
    assert body["matched"] > 0 and body["error_count"] == 0
    code, body = _get(client, "tensors", **GPU)
    assert code == 200 and not body["has_tensor_trace"] and body["message"] == sh.NO_TENSOR_TRACE
    code, body = _get(client, "shape_distribution", **GPU, op="aten::linear")
    assert code == 200 and body["total_calls"] == sum(s["calls"] for s in body["shapes"]) and body["shapes"]


def test_routes_reject_bad_parameters(client):
    assert _get(client, "op_shapes", **GPU, sort="nope")[0] == 400
    assert _get(client, "tensors", **CPU, limit="0")[0] == 400
    assert _get(client, "shape_distribution", **GPU)[0] == 400
    assert _get(client, "op_shapes", run="../etc", worker="x")[0] == 404
    assert _get(client, "tensors", **CPU, span="../../cpu-worker.tensor.trace")[0] == 404


def test_op_tree_counts_device_time_once(corpus):
    """AlexNet on an A100: one convolution is conv2d -> convolution -> _convolution -> cudnn_convolution; self
    times and leaf rows each add up to the device time of the launched work exactly once."""
    path = corpus / "hta/benchmark_result_2869224_1695835535_trace.json.gz"
    report = tb_gpuinsight.shapes(path)
    acts = tb_gpuinsight.analyze(path).activities
    launched = float(acts["dur"][acts["op"] >= 0].sum())
    rows = report.rows
    assert sum(r["self_us"] or 0 for r in rows) == pytest.approx(launched)
    assert sum(r["device_us"] or 0 for r in rows if r["leaf"]) == pytest.approx(launched)
    assert sum(r["device_us"] or 0 for r in rows) > 2 * launched  # the flat list of every op double counts
    tree = sh.tree_rows(rows)
    by_id = {r["id"]: r for r in tree}
    chain, row = [], next(r for r in tree if r["op"] == "aten::cudnn_convolution")
    while row:
        chain.append(row["op"])
        row = by_id.get(row["parent"])
    assert chain == ["aten::cudnn_convolution", "aten::_convolution", "aten::convolution", "aten::conv2d"]
    assert [by_id[r["parent"]]["depth"] + 1 for r in tree if r["parent"]] == [r["depth"] for r in tree if r["parent"]]
    conv = next(r for r in tree if r["op"] == "aten::conv2d")
    assert conv["self_us"] == 0 and not conv["leaf"] and conv["device_us"] == pytest.approx(
        sum(r["device_us"] for r in tree if r["parent"] == conv["id"]))


def test_routes_op_shapes_tree_and_leaf_views(client):
    code, flat = _get(client, "op_shapes", **GPU, limit=5000)
    assert code == 200 and flat["view"] == "flat" and all(r["leaf"] for r in flat["rows"])
    assert sum(r["device_us"] or 0 for r in flat["rows"]) == pytest.approx(flat["device_us"])
    code, every = _get(client, "op_shapes", **GPU, leaf="0", limit=5000)
    assert every["total"] > flat["total"]
    code, tree = _get(client, "op_shapes", **GPU, view="tree")
    assert code == 200 and tree["total"] == every["total"]
    seen = set()
    for r in tree["rows"]:
        assert r["parent"] is None or r["parent"] in seen  # parents come first
        seen.add(r["id"])
    code, hits = _get(client, "op_shapes", **GPU, view="tree", filter="aten::addmm")
    ops = {r["op"] for r in hits["rows"]}
    assert "aten::addmm" in ops and "aten::linear" in ops  # a hit keeps its ancestors
    code, bad = _get(client, "op_shapes", **GPU, view="forest")
    assert code == 400
