"""Memory view: curves equal the allocator's totals, the live-at-peak set adds up to the peak, on real traces and on
a CPU run recorded here; routes, CLI and API on top of the stored section."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

import tb_gpuinsight
from tb_gpuinsight.analysis.memory import events as mem
from tb_gpuinsight.plugin import GpuInsightPlugin
from tb_gpuinsight.service import LogdirService

from .corpus import corpus_path, plain_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT_RUN = os.path.join(ROOT, "samples", "bert_h100")
WITH_TOTALS = ("hta/df_index_resolver.json.gz", "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz")
LEGACY = "kineto/worker0.1623143089861.pt.trace.json.gz"
DEVICE = {0: "cpu", 1: "cuda"}


@functools.lru_cache(maxsize=None)
def _memory_events(rel: str) -> mem.MemoryEvents:
    """The [memory] events of a corpus trace as the reader gives them, read once per module (the tests only look)."""
    return mem.memory_events(tb_gpuinsight.load(corpus_path(rel)))


def _reference(path):
    """[memory] events per device as the stdlib reads them, in time order (file order within a time)."""
    data = plain_json(path)
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("name") == "[memory]" and e.get("ph") == "i":
            a = e["args"]
            label = DEVICE[a["Device Type"]] + ("" if a["Device Id"] < 0 else f":{a['Device Id']}")
            out[label].append((e["ts"], i, a))
    return {k: sorted(v, key=lambda x: x[:2]) for k, v in out.items()}


def _check_peak(ev: mem.MemoryEvents) -> mem.Peak:
    """The live allocations of the span plus what was allocated before it make up the peak."""
    pk = mem.peak(ev)
    assert pk.allocated == ev.allocated.max()
    assert pk.live_bytes == int(ev.bytes[pk.live].sum()) and (ev.bytes[pk.live] > 0).all()
    start = float(ev.allocated[0] - ev.bytes[0])
    assert 0 <= pk.allocated - pk.live_bytes <= start  # the rest is within the bytes allocated before the span
    assert pk.allocated - pk.live_bytes - pk.before_span == 0
    return pk


@pytest.mark.parametrize("rel", WITH_TOTALS)
def test_curves_equal_the_allocator_totals_on_real_traces(rel):
    path = corpus_path(rel)
    ref = _reference(path)
    events = _memory_events(rel)
    assert sorted(events.devices) == sorted(ref) and len(events) == sum(map(len, ref.values()))
    for device, rows in ref.items():
        ev = events.on(device)
        assert ev.allocated.tolist() == [float(a["Total Allocated"]) for _, _, a in rows]
        reserved = [float(a["Total Reserved"]) for _, _, a in rows]
        assert ev.reserved.tolist() == reserved or (device == "cpu" and not any(reserved)
                                                     and np.isnan(ev.reserved).all())
        assert ev.bytes.tolist() == [a["Bytes"] for _, _, a in rows]
        _check_peak(ev)
        # The per-pixel reduction keeps every event's level inside its pixel and the peak at its pixel.
        c = mem.curve(ev, 300)
        px = np.minimum(((ev.ts - c["start_us"]) / (c["end_us"] - c["start_us"]) * 300).astype(int), 299)
        starts = np.unique(px)
        assert len(c["t_us"]) == len(starts) <= 300
        hi, lo = np.array(c["allocated"]["max"]), np.array(c["allocated"]["min"])
        for k, p in enumerate(starts.tolist()):
            values = ev.allocated[px == p]
            assert lo[k] <= values.min() and values.max() <= hi[k] and c["allocated"]["last"][k] == values[-1]
        assert hi.max() == ev.allocated.max()
        frag = np.array(c["fragmentation"]["max"], dtype=float)
        if np.isfinite(ev.reserved).any():
            assert np.nanmax(frag) == (ev.reserved - ev.allocated).max() and (frag >= 0).all()


def test_df_index_resolver_figures():
    events = _memory_events(WITH_TOTALS[0])
    gpu = events.on("cuda:1")
    s = mem.device_summary(gpu)
    assert s["allocations"] == s["frees"] == 13385 and s["frees_before_span"] == 0
    assert s["peak"]["allocated"] == 6629508096 and s["peak"]["before_span"] == s["start_allocated"]
    assert [st["name"] for st in events.steps] == [f"ProfilerStep#{i}" for i in range(2, 7)]
    ops = mem.by_op(gpu)
    assert sum(r["allocations"] for r in ops) == 13385
    assert sum(r["live_at_peak_bytes"] for r in ops) == s["peak"]["live_bytes"]
    mm = next(r for r in ops if r["op"] == "aten::mm")
    assert mm["allocations"] > 0 and mm["mean_lifetime_us"] > 0


def test_allocations_made_before_the_span(tmp_path):
    """The bert trace with its first 120 [memory] events removed, as if its span had started later: frees of the
    removed allocations have no address to match; their bytes are "allocated before the span"."""
    data = plain_json(corpus_path(WITH_TOTALS[1]))
    memory = [i for i, e in enumerate(data["traceEvents"]) if e.get("name") == "[memory]"]
    drop = set(memory[:120])
    data["traceEvents"] = [e for i, e in enumerate(data["traceEvents"]) if i not in drop]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(data))
    gpu = mem.memory_events(tb_gpuinsight.load(cut)).on("cuda:0")
    s = mem.device_summary(gpu)
    assert s["frees_before_span"] > 0 and s["freed_before_span_bytes"] > 0
    pk = _check_peak(gpu)
    unknown = (gpu.bytes < 0) & (gpu.pair < 0) & (np.arange(len(gpu)) <= pk.index)
    assert pk.before_span == gpu.allocated[0] - gpu.bytes[0] + gpu.bytes[unknown].sum()


def test_legacy_trace_without_totals_or_addresses():
    events = mem.memory_events(tb_gpuinsight.load(corpus_path(LEGACY)))
    assert not events.totals_recorded and not events.addresses_recorded
    gpu = events.on("cuda:0")
    assert gpu.allocated.tolist() == np.cumsum(gpu.bytes).astype(float).tolist()
    s = mem.device_summary(gpu)
    assert "running sum of Bytes" in s["allocated_source"] and s["peak"]["before_span"] is None
    assert s["never_freed"] is None and all(r["freed"] is None for r in mem.by_op(gpu))
    json.dumps(mem.summary(events), allow_nan=False)


def _record_cpu_run(logdir):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    with tb_gpuinsight.profile(logdir, worker_name="m", wait=0, warmup=1, active=2, execution_trace=False,
                               tensor_trace=False) as prof:
        for step in range(3):
            model(torch.randn(32, 64)).sum().backward()
            prof.step()
    [name] = [n for n in os.listdir(logdir) if n.endswith(".pt.trace.json")]
    return os.path.join(logdir, name)


def test_cpu_run_recorded_with_profile_memory(tmp_path):
    pytest.importorskip("torch")
    path = _record_cpu_run(tmp_path)
    trace = tb_gpuinsight.load(path)
    events = mem.memory_events(trace)
    assert "cpu" in events.devices
    cpu = events.on("cpu")
    ref = _reference(Path(path))["cpu"]
    assert cpu.allocated.tolist() == [float(a["Total Allocated"]) for _, _, a in ref]
    pk = _check_peak(cpu)
    # torch's CPU allocator reports no free of a block allocated before profiling started (it warns so): all
    # frees of the span are matched.
    assert mem.device_summary(cpu)["frees_before_span"] == 0
    names = {r["op"] for r in mem.by_op(cpu)}
    assert {"aten::addmm", "aten::empty"} & names, names
    rows = mem.allocation_rows(cpu, pk.live)
    assert all(r["op"] for r in rows) and any(r["shape"] for r in rows)
    assert len(events.steps) == 2 and events.steps[0]["name"].startswith("ProfilerStep#")
    report = tb_gpuinsight.memory(path)
    assert set(report.by_op["device"]) >= {"cpu"} and report.events["allocated"].max() == pk.allocated
    assert report.live_at_peak["bytes"].sum() == pk.allocated


def test_no_memory_events_says_how_to_record():
    path = os.path.join(ROOT, "samples", "cpu_mlp", sorted(os.listdir(os.path.join(ROOT, "samples", "cpu_mlp")))[1])
    report = tb_gpuinsight.memory(path)
    assert report.summary["has_memory"] is False and "profile_memory=True" in report.summary["message"]
    assert report.by_op.empty and report.live_at_peak.empty


# ------------------------------------------------------------------------------------------------- routes, CLI

@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memory-plugin")
    shutil.copytree(BERT_RUN, tmp / "logdir" / "bert", ignore=shutil.ignore_patterns("*.md"))
    service = LogdirService(str(tmp / "logdir"), cache_dir=str(tmp / "cache"), workers=0, scan_interval=60)
    service.scan()
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(tmp / "logdir"), flags=None), service=service)
    run = service.runs_json()["runs"][0]
    sel = {"run": "bert", "worker": run["workers"][0]["worker"], "span": "all"}
    return Client(application.TensorBoardWSGI([plugin])), sel


def _get(client, route, **params):
    c, sel = client
    r = c.get(f"/data/plugin/gpuinsight/{route}", query_string={**sel, **params})
    return r.status_code, json.loads(r.get_data(as_text=True))


def test_memory_routes(client):
    code, body = _get(client, "memory")
    assert code == 200 and body["has_memory"] and len(body["spans"]) == 1
    gpu = next(d for d in body["devices"] if d["device"] == "cuda:0")
    assert gpu["peak"]["allocated"] == 101305344 and gpu["peak"]["unexplained"] == 0
    code, curve = _get(client, "memory_curve", device="cuda:0", width=50)
    assert code == 200 and 0 < len(curve["t_us"]) <= 50 and max(curve["allocated"]["max"]) == 101305344
    code, zoom = _get(client, "memory_curve", device="cuda:0", width=50, start_us=gpu["peak"]["ts"] - 10,
                      end_us=gpu["peak"]["ts"] + 10)
    assert code == 200 and 0 < zoom["events"] < curve["events"]
    code, live = _get(client, "memory_allocations", device="cuda:0")
    assert code == 200 and live["bytes"] == gpu["peak"]["allocated"]
    assert live["rows"][0]["op"] == mem.BEFORE_SPAN  # the largest part, sorted by bytes
    head = next(r for r in live["rows"] if r["op"] == "aten::addmm")  # the LM head's projection, with shapes and module
    assert head["shape"].startswith("[30522], [141, 512]") and head["module"].endswith("BertLMPredictionHead_0/Linear_25")
    code, ops = _get(client, "memory_ops", device="cuda:0", sort="allocations", order="asc")
    assert code == 200 and ops["total"] == len(ops["rows"]) > 1
    assert [r["allocations"] for r in ops["rows"]] == sorted(r["allocations"] for r in ops["rows"])
    op = ops["rows"][-1]["op_index"]
    code, mine = _get(client, "memory_allocations", device="cuda:0", which="all", op=op, sort="t_ms")
    assert code == 200 and mine["total"] == ops["rows"][-1]["allocations"]


@pytest.mark.parametrize("params", [{"device": "cuda:9"}, {"device": "cuda:0", "width": "0"},
                                    {"device": "cuda:0", "start_us": "nan"}, {"device": "cuda:0", "start_us": "5",
                                                                              "end_us": "1"}])
def test_memory_routes_refuse_bad_parameters(client, params):
    code, body = _get(client, "memory_curve", **params)
    assert code == 400 and body["error"]


def _cli(capsys, *args) -> str:
    """What `tb-gpuinsight ARGS` prints, run in this process (it must succeed)."""
    from tb_gpuinsight import cli

    capsys.readouterr()
    assert cli.main(list(args)) == 0
    return capsys.readouterr().out


def test_cli_memory(tmp_path, capsys):
    trace = os.path.join(BERT_RUN, os.listdir(BERT_RUN)[0])
    env = {**os.environ, "PYTHONPATH": ROOT}
    run = lambda *a: subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", "memory", trace, *a], env=env,
                                    capture_output=True, text=True, check=True).stdout
    text = run("--top", "3")  # once as a command; the other formats in this process
    assert "== cuda:0" in text and "peak allocated  96.61 MiB" in text and mem.BEFORE_SPAN in text
    body = json.loads(_cli(capsys, "memory", trace, "--format", "json"))
    assert body["summary"]["devices"][0]["peak"]["allocated"] == 101305344 and body["by_op"]
    csv = _cli(capsys, "memory", trace, "--format", "csv", "--what", "live", "--device", "cuda:0").splitlines()
    assert csv[0].startswith("index,") and len(csv) == 1 + 5


def test_rocm_memory_devices_are_named_and_an_absent_device_is_an_error():
    """ROCm records its GPUs' [memory] events as HIP (c10::DeviceType 6): they are `hip:0`, not a number; asking
    the command line for a device the trace lacks exits 2 and lists the devices that exist."""
    path = corpus_path("tracelens/vllm_decode_full__capture_traces/"
                       "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz")
    devices = [d["device"] for d in tb_gpuinsight.memory(str(path)).summary["devices"]]
    assert devices and all(d.startswith("hip:") for d in devices), devices
    assert mem.DEVICE_TYPES[6] == "hip" and mem.DEVICE_TYPES[12] == "xpu" and mem.DEVICE_TYPES[13] == "mps"
    from tb_gpuinsight import cli

    out = subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", "memory", str(path), "--device", "cuda:0"],
                         env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True)
    assert out.returncode == 2 and f"devices in this trace: {', '.join(devices)}" in out.stderr, out.stderr
    assert cli.main(["memory", str(path), "--device", devices[0], "--top", "1"]) == 0
