"""Memory snapshots (torch.cuda.memory._dump_snapshot): the safe reader, the replay and what holds the peak (checked
against a plain replay of the raw events written here), fragmentation, OOMs, the CLI, the API and discovery."""
from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from tb_gpuinsight import compare_memory_snapshots, memory_snapshot
from tb_gpuinsight.analysis.memory.snapshot_read import SnapshotError, read_snapshot
from tb_gpuinsight.cli import main
from tb_gpuinsight.logdir import discover

from .corpus import CORPUS

REAL = os.path.join(CORPUS, "memory_snapshots", "cs336_lm_memory_snapshot.pickle")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


@pytest.fixture
def real(corpus):
    return REAL


# ------------------------------------------------------------------------------- an independent replay

def _plain_replay(snap):
    """Peak of allocated bytes and what is alive there, from the raw dicts with nothing of the project: bytes alive
    at the dump (requested sizes) minus what the history allocated plus what it freed is the start; then
    +alloc / -free_completed, event by event."""
    events = snap["device_traces"][0]
    alive_dump = {b["address"]: b["requested_size"] for s in snap["segments"] for b in s["blocks"]
                  if b["state"] != "inactive"}
    level = sum(alive_dump.values())
    level -= sum(e["size"] for e in events if e["action"] == "alloc")
    level += sum(e["size"] for e in events if e["action"] == "free_completed")
    peak, peak_at = level, -1
    for i, e in enumerate(events):
        level += {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        if level > peak:
            peak, peak_at = level, i
    live = {}  # allocations of the history alive just after the peak event
    for e in events[: peak_at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    lines = {}
    for e in live.values():
        user = next(f for f in e["frames"] if "site-packages" not in f["filename"])
        key = f"{user['filename']}:{user['line']}"
        lines[key] = lines.get(key, 0) + e["size"]
    return peak, sorted(lines.items(), key=lambda kv: -kv[1])


def test_real_snapshot_peak_and_top_lines_match_a_plain_replay(real):
    with open(real, "rb") as f:
        raw = pickle.load(f)  # the corpus file is trusted; the project's reader is what is under test
    peak, lines = _plain_replay(raw)
    rep = memory_snapshot(real)
    assert rep["peak_allocated_bytes"] == peak == 13_923_997_700
    ours = {r["frame"]: r["bytes"] for r in rep["at_peak"]}
    for frame, size in lines[:5]:
        assert ours[frame] == size
    assert rep["at_peak"][0]["frame"].endswith("cs336_basics\\model.py:39")
    assert rep["at_peak"][0]["stack"][0].endswith("einsum")  # the stack starts inside torch
    assert rep["before_history"]["count"] == 229
    files = {r["frame"]: r["bytes"] for r in rep["at_peak_by_file"]}
    assert sum(files.values()) == sum(r["bytes"] for r in rep["at_peak"]) == peak  # every live byte, once
    assert max(files, key=files.get).endswith("cs336_basics\\model.py")
    assert rep["reserved_at_dump_bytes"] == sum(s["total_size"] for s in raw["segments"]) == rep["peak_reserved_bytes"]
    assert rep["curve"]["allocated"] and max(rep["curve"]["allocated"]) == peak  # the curve keeps the peak
    frag = rep["fragmentation"]["at_peak"]
    assert frag["free_bytes"] == frag["reserved_bytes"] - peak
    assert 0 < frag["largest_free_block_bytes"] < frag["free_bytes"]


def test_gzipped_snapshot_reads_the_same(real, tmp_path):
    gz = tmp_path / "snap.pickle.gz"
    gz.write_bytes(gzip.compress(open(real, "rb").read()))
    assert memory_snapshot(str(gz))["peak_allocated_bytes"] == memory_snapshot(real)["peak_allocated_bytes"]


# ------------------------------------------------------------------------------- hostile and broken files

class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _hostile(tmp_path, zipped=False):
    marker = tmp_path / "payload-ran"
    data = pickle.dumps({"segments": [], "device_traces": [[_Payload(str(marker))]]}, protocol=4)
    path = tmp_path / ("evil.pickle.gz" if zipped else "evil.pickle")
    path.write_bytes(gzip.compress(data) if zipped else data)
    return path, marker


@pytest.mark.parametrize("zipped", [False, True])
def test_a_pickle_whose_payload_would_run_code_exits_2_and_never_runs(tmp_path, capsys, zipped):
    path, marker = _hostile(tmp_path, zipped)
    assert main(["memory", str(path)]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "posix.system" in err and err.count("\n") == 1
    assert not marker.exists()
    with pytest.raises(SnapshotError, match="refused"):
        read_snapshot(path)
    assert not marker.exists()


def test_truncated_damaged_and_foreign_files_give_one_line(real, tmp_path, capsys):
    data = open(real, "rb").read()
    zipped = gzip.compress(data)
    cases = {
        "cut.pickle": (data[: len(data) // 2], "cut short"),
        "flipped.pickle": (data[:1000] + bytes(b ^ 0x5A for b in data[1000:1400]) + data[1400:], "damaged"),
        "badgzip.pickle.gz": (zipped[:200] + b"\0" * 50 + zipped[250:], "damaged"),
        "cutgzip.pickle.gz": (zipped[:5000], "cut short"),
        "list.pickle": (pickle.dumps([1, 2, 3]), "not a memory snapshot"),
        "text.pickle": (b'{"traceEvents": []}', "not a pickle"),
        "empty.pickle": (b"", "empty"),
        "persid.pickle": (b"\x80\x04P0\n.", "refused"),
    }
    for name, (content, reason) in cases.items():
        (tmp_path / name).write_bytes(content)
        assert main(["memory", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert reason in err and err.count("\n") == 1 and "Traceback" not in err, (name, err)


def test_an_extension_code_naming_code_is_refused(tmp_path):
    """EXT2 names a callable through copyreg's registry: it goes through find_class, so it is refused too."""
    import copyreg

    path = tmp_path / "ext.pickle"
    path.write_bytes(b"\x80\x04\x83\x0d\xf0(\x8c\x04trueR.")  # EXT2 0xF00D, ("true",), REDUCE
    copyreg.add_extension("os", "system", 0xF00D)
    try:
        with pytest.raises(SnapshotError, match="refused: the file names the Python object os.system"):
            read_snapshot(path)
    finally:
        copyreg.remove_extension("os", "system", 0xF00D)


def test_mutated_snapshots_give_a_report_or_one_reason(tmp_path):
    """Random byte changes to a snapshot: every outcome is a report or a SnapshotError, nothing else."""
    import random

    from tb_gpuinsight.analysis.memory.snapshot import report
    from tb_gpuinsight.analysis.memory.snapshot_model import load_snapshot

    data = bytearray(open(_synthetic(tmp_path), "rb").read())
    rng = random.Random(7)
    outcomes = {"report": 0, "refused": 0}
    for i in range(150):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(2, len(bad))] = rng.randrange(256)
        path = tmp_path / f"m{i}.pickle"
        path.write_bytes(bytes(bad))
        try:
            report(load_snapshot(path))
            outcomes["report"] += 1
        except SnapshotError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0


def test_size_cap_stops_reading(real):
    with pytest.raises(SnapshotError, match="larger than"):
        read_snapshot(real, limit=10_000)


# ------------------------------------------------------------------------------- a synthetic history

def _frames(line, fn="step"):
    return [{"filename": "/site-packages/torch/nn/functional.py", "line": 9, "name": "linear"},
            {"filename": "/home/u/train.py", "line": line, "name": fn}]


def _synthetic(tmp_path, name="s.pickle", extra=0):
    """Two 8 MiB segments at 0x1000000 / 0x2000000 (the second allocated in the history), one block alive since
    before the history, an allocation never freed, an OOM."""
    a, b = 0x1000000, 0x2000000
    ev = [
        {"action": "alloc", "addr": a + 2 * MiB, "size": 2 * MiB, "time_us": 10, "frames": _frames(5)},
        {"action": "segment_alloc", "addr": b, "size": 8 * MiB, "time_us": 11, "frames": _frames(6)},
        {"action": "alloc", "addr": b, "size": (4 + extra) * MiB, "time_us": 12, "frames": _frames(6)},
        {"action": "free_requested", "addr": a + 2 * MiB, "size": 2 * MiB, "time_us": 13, "frames": []},
        {"action": "free_completed", "addr": a + 2 * MiB, "size": 2 * MiB, "time_us": 14, "frames": []},
        {"action": "oom", "device_free": 3 * MiB, "size": 64 * MiB, "time_us": 15, "frames": _frames(7)},
    ]
    segments = [
        {"device": 0, "address": a, "total_size": 8 * MiB, "stream": 0, "blocks": [
            {"address": a, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": []},
            {"address": a + MiB, "size": 7 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
        {"device": 0, "address": b, "total_size": 8 * MiB, "stream": 0, "blocks": [
            {"address": b, "size": (4 + extra) * MiB, "requested_size": (4 + extra) * MiB,
             "state": "active_allocated", "frames": _frames(6)},
            {"address": b + (4 + extra) * MiB, "size": (4 - extra) * MiB, "requested_size": 0, "state": "inactive",
             "frames": []}]},
    ]
    path = tmp_path / name
    path.write_bytes(pickle.dumps({"segments": segments, "device_traces": [ev]}, protocol=4))
    return str(path)


def test_synthetic_history_peak_fragmentation_oom_and_leaks(tmp_path):
    rep = memory_snapshot(_synthetic(tmp_path))
    assert rep["before_history"] == {**rep["before_history"], "bytes": MiB, "count": 1}
    assert rep["peak_allocated_bytes"] == 7 * MiB and rep["peak_event"] == 2  # 1 before + 2 + 4
    assert rep["reserved_at_peak_bytes"] == 16 * MiB and rep["curve"]["reserved"][0] == 8 * MiB
    assert {r["frame"]: r["bytes"] for r in rep["at_peak"]} == {
        "/home/u/train.py:5": 2 * MiB, "/home/u/train.py:6": 4 * MiB, "(allocated before the recorded history)": MiB}
    frag = rep["fragmentation"]["at_peak"]
    # segment a: [0,1) and [2,4) MiB used -> largest hole 4 MiB at the end; segment b: 4 MiB free after the block
    assert frag["free_bytes"] == 9 * MiB and frag["largest_free_block_bytes"] == 4 * MiB
    assert rep["fragmentation"]["at_dump"]["largest_free_block_bytes"] == 7 * MiB
    (oom,) = rep["ooms"]
    assert oom["requested_bytes"] == 64 * MiB and oom["device_free_bytes"] == 3 * MiB
    assert oom["allocated_bytes"] == 5 * MiB and {r["frame"] for r in oom["alive"]} >= {"/home/u/train.py:6"}
    assert [r["frame"] for r in rep["leak_suspects"]] == ["/home/u/train.py:6"]
    sizes = {r["size_class"]: r["count"] for r in rep["at_peak_by_size"]}
    assert sizes["<= 1 MiB (small pool)"] == 1 and sizes["1-10 MiB"] == 2


def test_older_layouts_segments_alone_and_block_history(tmp_path):
    """torch.cuda.memory_snapshot() pickled (a list of segments, no history) and torch 2.0 blocks (`history`
    instead of `frames`, no `requested_size`)."""
    segments = [{"device": 0, "address": 0x1000000, "total_size": 4 * MiB, "stream": 0, "blocks": [
        {"address": 0x1000000, "size": 3 * MiB, "state": "active_allocated",
         "history": [{"addr": 0x1000000, "real_size": 3 * MiB, "frames": _frames(11)}]},
        {"address": 0x1300000, "size": MiB, "state": "inactive"}]}]
    path = tmp_path / "segments.pickle"
    path.write_bytes(pickle.dumps(segments))
    rep = memory_snapshot(str(path))
    assert rep["peak_allocated_bytes"] == 3 * MiB and rep["events"] == 0
    assert [r["frame"] for r in rep["at_peak"]] == ["/home/u/train.py:11"]
    assert rep["fragmentation"]["at_dump"]["largest_free_block_bytes"] == MiB


def test_compare_two_snapshots(tmp_path, capsys):
    a, b = _synthetic(tmp_path, "a.pickle"), _synthetic(tmp_path, "b.pickle", extra=2)
    result = compare_memory_snapshots(a, b)
    assert result["peak_allocated_bytes"] == {"a": 7 * MiB, "b": 9 * MiB, "change": 2 * MiB}
    assert result["at_peak"][0]["frame"] == "/home/u/train.py:6" and result["at_peak"][0]["change_bytes"] == 2 * MiB
    assert main(["memory", a, b]) == 0
    assert "+2.00 MiB" in capsys.readouterr().out


def test_cli_json_on_a_run_directory_and_discovery(real, tmp_path, capsys):
    run = tmp_path / "logdir" / "run1"
    run.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "samples", "cpu_mlp", "cpu-worker.1795250381957840523.pt.trace.json"), run)
    shutil.copy(real, run / "memory_snapshot.pickle")
    assert main(["memory", str(run), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["peak_allocated_bytes"] == 13_923_997_700 and body["at_peak"][0]["count"] == 25
    (found,) = discover(str(tmp_path / "logdir"))
    assert [os.path.basename(e.path) for e in found.memory_snapshots] == ["memory_snapshot.pickle"]


def test_cli_in_a_fresh_process_exits_2_on_hostile_pickle(tmp_path):
    path, marker = _hostile(tmp_path)
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", "memory", str(path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 2 and "refused" in done.stderr and not marker.exists()


def test_steps_line_up_on_the_unix_clock():
    from tb_gpuinsight.analysis.memory.snapshot import align_steps

    t0 = 1_776_479_641_000_000.0
    steps = [{"name": "ProfilerStep#3", "ts": 1_000.0, "dur": 500.0}, {"name": "ProfilerStep#4", "ts": 9e9, "dur": 1}]
    out = align_steps([(steps, t0)], t0 + 800, t0 + 10_000)  # relative times + baseTimeNanoseconds
    assert [s["name"] for s in out["steps"]] == ["ProfilerStep#3"] and out["steps"][0]["t_us"] == t0 + 1000
    absolute = [{"name": "ProfilerStep#1", "ts": t0 + 5, "dur": 10.0}]  # 2022-2024 traces: Unix µs in ts
    assert len(align_steps([(absolute, 0.0)], t0, t0 + 100)["steps"]) == 1
    assert "no common clock" in align_steps([(steps, 0.0)], t0, t0 + 100)["clock"]
    assert "no ProfilerStep" in align_steps([([], t0)], t0, t0 + 100)["clock"]


# ------------------------------------------------------------------------------- the route

def test_memory_snapshot_route_answers_the_cli_peak_and_422_for_a_hostile_pickle(real, tmp_path):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    from .test_plugin import BASE, _wait

    logdir = tmp_path / "logdir"
    trace = os.path.join(ROOT, "samples", "cpu_mlp", "cpu-worker.1795250381957840523.pt.trace.json")
    for run in ("good", "evil", "plain"):
        (logdir / run).mkdir(parents=True)
        shutil.copy(trace, logdir / run)
    shutil.copy(real, logdir / "good" / "snapshot.pickle")
    path, marker = _hostile(tmp_path)
    shutil.copy(path, logdir / "evil" / "memory_snapshot.pickle")
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    client = Client(application.TensorBoardWSGI([plugin]))

    def get(**params):
        response = client.get(f"{BASE}/memory_snapshot", query_string=params)
        return response.status_code, json.loads(response.get_data(as_text=True))

    assert _wait(lambda: len(service.runs_json()["runs"]) == 3)
    runs = {r["run"]: r for r in service.runs_json()["runs"]}
    assert runs["good"]["memory_snapshots"] == ["snapshot.pickle"] and runs["plain"]["memory_snapshots"] == []
    assert _wait(lambda: get(run="good")[0] != 503)
    code, body = get(run="good")
    assert code == 200 and body["peak_allocated_bytes"] == memory_snapshot(real)["peak_allocated_bytes"]
    assert body["at_peak"][0]["frame"].endswith("model.py:39") and body["at_peak"][0]["count"] == 25
    assert body["file"] == "snapshot.pickle" and "path" not in body
    assert _wait(lambda: "not analysed" not in get(run="good")[1]["clock"], 120)
    assert "no profiler step of the run's traces falls in" in get(run="good")[1]["clock"]  # months apart
    assert _wait(lambda: get(run="evil")[0] != 503)
    code, body = get(run="evil")
    assert code == 422 and "refused" in body["error"] and not marker.exists()
    code, body = get(run="plain")
    assert code == 200 and body["files"] == [] and body["file"] is None and "no memory snapshot" in body["message"]
    assert get(run="nope")[0] == 404
    response = client.get(f"{BASE}/memory_snapshot_compare", query_string={"a_run": "good", "b_run": "good"})
    body = json.loads(response.get_data(as_text=True))
    assert response.status_code == 200 and body["peak_allocated_bytes"]["change"] == 0
    assert body["a"] == "snapshot.pickle" and body["at_peak"][0]["a_bytes"] == body["at_peak"][0]["b_bytes"] > 0
    response = client.get(f"{BASE}/memory_snapshot_compare", query_string={"a_run": "good", "b_run": "plain"})
    assert response.status_code == 200 and "holds no memory snapshot" in json.loads(response.get_data())["message"]
    assert get(run="good", file="../x")[0] == 400 and get(run="good", device="x")[0] == 400
    assert get(run="good", device="3")[0] == 400


# ------------------------------------------------------------------------------- capture

def _steps(prof, steps=4):
    import torch

    model = torch.nn.Linear(8, 8)
    for _ in range(steps):
        model(torch.randn(4, 8)).sum().backward()
        prof.step()


def test_profile_memory_snapshot_on_cpu_says_so_in_one_line(tmp_path, capsys):
    import torch

    import tb_gpuinsight

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with tb_gpuinsight.profile(tmp_path / "run", worker_name="w", wait=0, warmup=1, active=1,
                               memory_snapshot=True, execution_trace=False, tensor_trace=False, scalars=False) as prof:
        _steps(prof)
    err = capsys.readouterr().err
    assert "memory_snapshot=True needs CUDA" in err and err.count("\n") == 1
    assert not [n for n in os.listdir(tmp_path / "run") if n.endswith(".pickle")]


def test_profile_memory_snapshot_dumps_the_window_beside_its_trace(tmp_path, monkeypatch):
    """The allocator calls stubbed (no CUDA here): history is recorded from the window's start to its trace, and
    the dump lands beside the span's trace, named for it, where discovery and the reader find it."""
    import torch

    import tb_gpuinsight
    from torch.profiler import ProfilerActivity

    calls = []
    synthetic = _synthetic(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda **kw: calls.append(kw))
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", lambda path: shutil.copy(synthetic, path))
    logdir = tmp_path / "logdir"
    with tb_gpuinsight.profile(logdir / "run", worker_name="w", wait=0, warmup=1, active=1, repeat=2,
                               activities=[ProfilerActivity.CPU], memory_snapshot=True, execution_trace=False,
                               tensor_trace=False, scalars=False, inductor_figures=False) as prof:
        _steps(prof, 6)
    (run,) = discover(str(logdir))
    names = sorted(os.path.basename(e.path) for e in run.memory_snapshots)
    spans = [s.name[: -len(".pt.trace.json")] for s in run.workers["w"]]
    assert names == sorted(f"{s}.memory_snapshot.pickle" for s in spans) and len(names) == 2
    assert calls == [{"max_entries": 1_000_000}, {"enabled": None}] * 2
    assert memory_snapshot(run.memory_snapshots[0].path)["peak_allocated_bytes"] == 7 * MiB


def test_two_devices_each_with_its_own_stacks(tmp_path):
    def trace(line, size):
        return [{"action": "alloc", "addr": 0x1000 + i * 4096, "size": size, "time_us": i,
                 "frames": [{"filename": f"/home/u/dev{line}.py", "line": line, "name": "f"}]} for i in range(50)]

    path = tmp_path / "two.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace(1, 100), trace(2, 300)]}))
    rep = memory_snapshot(str(path))
    assert rep["devices"] == [0, 1] and rep["device"] == 1  # the higher peak by default
    assert [r["frame"] for r in rep["at_peak"]] == ["/home/u/dev2.py:2"] and rep["peak_allocated_bytes"] == 15000
    zero = memory_snapshot(str(path), device=0)
    assert [r["frame"] for r in zero["at_peak"]] == ["/home/u/dev1.py:1"] and zero["peak_allocated_bytes"] == 5000
    with pytest.raises(Exception, match="no device 5"):
        memory_snapshot(str(path), device=5)


# ------------------------------------------------------------------------------- streaming while loading

def _history_columns(snap):
    return {d: [h.action.tolist(), h.addr.tolist(), h.size.tolist(), [snap.stacks[s] for s in h.stack.tolist()]]
            for d, h in snap.histories.items()}


class _Count:
    """A sink that counts what it is handed, and keeps nothing."""

    def __init__(self):
        self.entries = 0

    def take(self, trace, entries):
        self.entries += len(entries)


def test_streamed_reading_gives_the_whole_reads_report(real, tmp_path):
    from tb_gpuinsight.analysis.memory.snapshot import report
    from tb_gpuinsight.analysis.memory.snapshot_model import from_dict, load_snapshot

    whole = from_dict(real, read_snapshot(real))
    count = _Count()
    left = read_snapshot(real, sink=count, stream_bytes=8192)  # the entries handed over leave the lists
    assert count.entries >= 4000 and count.entries + len(left["device_traces"][0]) == len(whole.histories[0])
    streamed = load_snapshot(real, stream_bytes=8192)
    assert _history_columns(streamed) == _history_columns(whole)
    assert report(streamed) == report(whole)
    # two devices, both streamed
    trace = [[{"action": "alloc", "addr": 4096 * i, "size": 10 + d, "time_us": i,
               "frames": [{"filename": f"/u/d{d}.py", "line": i % 7, "name": "f"}]} for i in range(3000)]
             for d in range(2)]
    path = tmp_path / "two.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": trace}, protocol=4))
    two = load_snapshot(path, stream_bytes=4096)
    assert _history_columns(two) == _history_columns(from_dict(str(path), read_snapshot(path)))


def test_a_file_referring_back_to_a_streamed_entry_is_read_whole(tmp_path):
    from tb_gpuinsight.analysis.memory.snapshot_model import load_snapshot

    entries = [{"action": "alloc", "addr": 4096 * i, "size": 100, "time_us": i, "frames": []} for i in range(3000)]
    path = tmp_path / "back.pickle"  # the first entry again after the history: a memo reference to a streamed dict
    path.write_bytes(pickle.dumps({"device_traces": [entries], "segments": [], "again": entries[0]}, protocol=4))
    snap = load_snapshot(path, stream_bytes=4096)
    assert len(snap.histories[0]) == 3000 and snap.histories[0].size.sum() == 300_000


def test_a_payload_after_the_streamed_history_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    entries = [{"action": "alloc", "addr": 4096 * i, "size": 100, "frames": []} for i in range(3000)]
    path = tmp_path / "late.pickle"
    path.write_bytes(pickle.dumps({"device_traces": [entries], "segments": [_Payload(str(marker))]}, protocol=4))
    from tb_gpuinsight.analysis.memory.snapshot_model import load_snapshot

    with pytest.raises(SnapshotError, match="refused.*posix.system"):
        load_snapshot(path, stream_bytes=4096)
    assert not marker.exists()
