"""Inputs checked before they are read: devices files that are no regular file (N3), step numbers past int64 (N9),
gzip headers of any legal size (N10), runs whose only trace is unreadable (N11), damaged tensor.trace companions
(N12), and `memory` over thousands of devices (N6)."""
from __future__ import annotations

import bz2
import copy
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tb_gpuinsight

from .test_reader_errors import rocm_mm_trace
from .test_terminal_output import _run

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAME = "w.1700000000000000000.pt.trace.json"


def _mm_doc():
    doc = copy.deepcopy(rocm_mm_trace(1))
    doc["baseTimeNanoseconds"] = 1700000000000000000
    return doc


def _analyze_with_devices(tmp_path, devices, env_var=False, **kwargs):
    trace = tmp_path / NAME
    trace.write_text(json.dumps(_mm_doc()))
    package_root = str(Path(tb_gpuinsight.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": package_root}
    argv = [sys.executable, "-m", "tb_gpuinsight.cli", "analyze", str(trace)]
    if env_var:
        env["TB_GPUINSIGHT_DEVICES"] = devices
    else:
        argv += ["--devices", devices]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.parametrize("case", ["/dev/zero", "fifo", "/dev/stdin", "env /dev/urandom", "folder", "17 MiB"])
def test_devices_files_must_be_small_regular_files(tmp_path, case):
    kwargs = {}
    if case == "fifo":
        devices = str(tmp_path / "devices.fifo")
        os.mkfifo(devices)  # no writer: opening it for reading would wait forever
    elif case == "/dev/stdin":
        devices, kwargs = "/dev/stdin", {"stdin": subprocess.PIPE}  # a pipe left open: reading would wait forever
    elif case == "folder":
        devices = str(tmp_path)
    elif case == "17 MiB":
        devices = str(tmp_path / "big.json")
        with open(devices, "w") as f:
            f.write("[" + " " * (17 << 20) + "]")
    else:
        devices = case.split()[-1]
    proc = _analyze_with_devices(tmp_path, devices, env_var=case.startswith("env"), **kwargs)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert "not a regular file" in lines[0] or "MiB" in lines[0]


def _with_steps(tmp_path, numbers):
    doc = _mm_doc()
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    for i, n in enumerate(numbers):
        doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                                   "ts": op["ts"] - 1 + i * 0.5, "dur": op["dur"] + 2, "pid": op["pid"],
                                   "tid": op["tid"]})
    path = tmp_path / NAME
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("command", ["timeline", "critical-path", "overview", "memory", "analyze"])
def test_step_numbers_past_int64_are_no_crash(tmp_path, command):
    trace = _with_steps(tmp_path, ["9999999999999999999", "1" + "0" * 40])
    code, out, err = _run([command, trace])
    assert code == 0, err
    assert "internal error" not in out + err and "Traceback" not in out + err


def test_steps_within_int64_are_still_steps(tmp_path):
    from tb_gpuinsight import load
    from tb_gpuinsight.analysis.overview.steps import step_windows

    windows = step_windows(load(_with_steps(tmp_path, ["922337203685477580"])))
    assert windows.labels == ["step 922337203685477580"]


def test_a_gzip_with_a_100_kb_file_name_in_its_header_reads(tmp_path):
    data = json.dumps(_mm_doc()).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="n" * 100_000, mode="wb", fileobj=buf, mtime=0) as g:  # FNAME: no size limit
        g.write(data)
    path = tmp_path / (NAME + ".gz")
    path.write_bytes(buf.getvalue())
    code, out, err = _run(["info", str(path)])
    assert code == 0 and "kernels 1" in out, err
    code, out, err = _run(["ls", str(tmp_path)])
    assert code == 0 and "named like a trace" not in out + err and "1 span" in out


def _unreadable_run(tmp_path):
    run = tmp_path / "logdir" / "run"
    run.mkdir(parents=True)
    (run / (NAME + ".gz")).write_bytes(bz2.compress(json.dumps(_mm_doc()).encode()))  # bz2 named .gz
    return run


@pytest.mark.parametrize("command", ["summarize", "critical-path"])
def test_a_folder_whose_only_trace_is_unreadable_fails(tmp_path, command):
    run = _unreadable_run(tmp_path)
    argv = ["summarize", str(run.parent), "--store", str(tmp_path / "store"), "--workers", "0"] \
        if command == "summarize" else ["critical-path", str(run)]
    code, out, err = _run(argv)
    assert code != 0
    assert NAME + ".gz" in out + err  # the file and why
    assert "binary data" in out + err


def test_a_damaged_tensor_trace_companion_is_said_to_be_damaged(tmp_path):
    from tb_gpuinsight import shapes

    for f in SAMPLES.joinpath("cpu_mlp").glob("cpu-worker.1795250381957840523.*"):
        shutil.copy(f, tmp_path)
    companion = tmp_path / "cpu-worker.1795250381957840523.tensor.trace"
    companion.write_bytes(b"\x00\x01garbage\xff" * 300)
    trace = str(tmp_path / "cpu-worker.1795250381957840523.pt.trace.json")
    code, out, err = _run(["shapes", trace])
    assert code == 0
    assert "damaged" in err and companion.name in err and "record one" not in err
    report = shapes(trace)
    assert report.tensors is None and "damaged" in report.tensors_note


def test_the_plugin_says_a_damaged_tensor_trace_is_damaged(tmp_path):
    """Discovery keeps a file named as a tensor.trace that does not sniff as one (its reader says why), and the
    /tensors route says "damaged" with the file's name, as the CLI does, rather than "no tensor.trace"."""
    from .test_confinement import _plugin
    from .test_plugin import _get, _ready, _wait

    run = tmp_path / "logdir" / "run"
    run.mkdir(parents=True)
    for f in SAMPLES.joinpath("cpu_mlp").glob("cpu-worker.1795250381957840523.*"):
        shutil.copy(f, run)
    companion = run / "cpu-worker.1795250381957840523.tensor.trace"
    companion.write_bytes(b"\x00\x01garbage\xff" * 300)
    client, service = _plugin(run.parent, tmp_path / "cache")
    try:
        assert _wait(lambda: _ready(service, "run"), timeout=120)
        code, body = _get(client, "tensors", run="run", worker="cpu-worker")
        assert code == 200 and not body["has_tensor_trace"]
        assert body["message"].startswith("damaged tensor.trace, not read: " + companion.name)
        assert "record one" not in body["message"] and body["damaged"][0].startswith(companion.name + ": ")
    finally:
        service.stop()


def _memory_trace(tmp_path, devices: int) -> str:
    events = []
    for d in range(devices):
        events.append({"ph": "X", "cat": "kernel", "name": f"k{d}", "pid": d, "tid": 7, "ts": 100 + d, "dur": 5,
                       "args": {"device": d, "stream": 7, "correlation": d + 1}})
        events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": 100 + d, "args": {"Device Type": 1, "Device Id": d, "Addr": 1000 + d, "Bytes": 4096,
                                               "Total Allocated": 4096, "Total Reserved": 8192}})
    path = tmp_path / f"mem{devices}.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1700000000000000000}))
    return str(path)


def test_memory_builds_its_tables_once_whatever_the_number_of_devices(tmp_path, monkeypatch):
    """A table per device and a filter of the whole table per device made 5,000 devices take minutes: the count
    of DataFrames made must not grow with the devices (work counted, not timed)."""
    import pandas as pd

    made = []
    real = pd.DataFrame.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        real(self, *args, **kwargs)

    counts = {}
    for devices in (20, 60):
        trace = _memory_trace(tmp_path, devices)
        monkeypatch.setattr(pd.DataFrame, "__init__", counting)
        made.clear()
        code, out, err = _run(["memory", trace])
        monkeypatch.setattr(pd.DataFrame, "__init__", real)
        assert code == 0, err
        assert out.count("== ") == devices
        counts[devices] = len(made)
    assert counts[60] <= counts[20] + 5, counts


@pytest.mark.parametrize("command", ["analyze", "critical-path", "augment"])
def test_a_launch_grid_past_int64_is_unreadable_not_a_crash(tmp_path, command):
    """A kernel's grid of 30 digits (a damaged field) is an unreadable launch size, not an OverflowError while
    looking for persistent kernels (one block per SM)."""
    from tb_gpuinsight.analysis.kernels.attribution import _volume

    assert _volume("[1000000000000000000000000000000, 1, 1]") == 0 and _volume("[8, 2, 1]") == 16
    doc = _mm_doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"]["grid"] = [10 ** 30, 1, 1]
    trace = tmp_path / NAME
    trace.write_text(json.dumps(doc))
    argv = [command, str(trace)] + ([str(tmp_path / "out.json")] if command == "augment" else [])
    code, out, err = _run(argv)
    assert code == 0 and "Traceback" not in err and "internal error" not in out + err
