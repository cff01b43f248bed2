"""Bounded reading: junk files of gigabytes are refused from their first blocks, by every command and by the
plugin, within a fixed memory budget; per-name and per-line steps stay linear (names are classified by their
head; tensor.trace lines are parsed once per distinct value)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tb_gpuinsight.analysis.graph.critical_path import deps as cpath_graph
from tb_gpuinsight.analysis.kernels import roles as kernel_roles
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.trace import tensortrace
from tb_gpuinsight.trace.source import read_all

from .test_plugin import SAMPLES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT = os.path.join(SAMPLES, "bert_h100", "h100-node.1751410836000000000.pt.trace.json.gz")
NAME = "w.1700000000000000000.pt.trace.json"
RSS_LIMIT = 200 << 20

# Every command that reads a trace, on the junk file F (or its logdir D); OUT and S are scratch paths.
COMMANDS = (["info", "F"], ["ls", "D"], ["analyze", "F"], ["augment", "F", "OUT"], ["diff", "F", "F"],
            ["shapes", "F"], ["graph", "F"], ["overview", "F"], ["memory", "F"], ["timeline", "F"], ["ranks", "D"],
            ["critical-path", "F"], ["summarize", "D", "--store", "S", "--workers", "1"])

_PROBE = textwrap.dedent("""
    import contextlib, io, json, resource, sys
    from tb_gpuinsight.cli import main
    from tb_gpuinsight.service import LogdirService
    junk, logdir, scratch = sys.argv[1:4]
    out = {}
    for argv in json.loads(sys.argv[4]):
        argv = [junk if a == "F" else logdir if a == "D" else f"{scratch}/{a}" if a in ("OUT", "S") else a
                for a in argv]
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        out[argv[0]] = [code, err.getvalue().strip().splitlines()[-1:] or [""]]
    service = LogdirService(logdir, cache_dir=f"{scratch}/cache", workers=0, scan_interval=3600)
    service.scan()  # workers=0: the span is analysed (refused) during the scan
    out["plugin"] = [[s.status, s.reason] for r in service.runs.values() for s in r.spans.values()]
    out["plugin_errors"] = service.runs_json()["runs"]
    # This process's peak from its own memory map (ru_maxrss would start at the RSS of the pytest that forked it),
    # its worker processes' from getrusage.
    with open("/proc/self/status") as f:
        own = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"results": out, "peak_rss": max(own, workers)}))
""")


def _probe(junk, logdir, tmp_path):
    env = dict(os.environ, TB_GPUINSIGHT_MAX_TRACE_GB="100", TB_GPUINSIGHT_NO_MEMO="1")  # no size cap helps
    done = subprocess.run([sys.executable, "-c", _PROBE, str(junk), str(logdir), str(tmp_path),
                           json.dumps(COMMANDS)], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _junk_logdir(tmp_path):
    run = tmp_path / "logdir" / "run"
    run.mkdir(parents=True)
    return run


def _assert_refused(report, *reasons):
    for argv in COMMANDS:
        code, (line,) = report["results"][argv[0]]
        assert "Traceback" not in line, (argv, line)
        if "D" in argv:  # a logdir command lists or skips the file (with its reason) and goes on
            assert code in (0, 1, 2), (argv, code, line)  # summarize: 1 when a trace failed
        else:
            assert code == 2 and any(r in line for r in reasons), (argv, code, line)
    assert report["results"]["plugin"] == [] or all(s == "error" for s, _ in report["results"]["plugin"]), \
        report["results"]["plugin"]
    assert report["peak_rss"] < RSS_LIMIT, report["peak_rss"] / 2**20


def test_sparse_4gib_of_nul_bytes_is_refused_by_every_command_and_the_plugin(tmp_path):
    junk = _junk_logdir(tmp_path) / NAME
    with open(junk, "wb") as f:
        f.truncate(4 << 30)  # sparse: no disk used, 4 GiB when read
    report = _probe(junk, junk.parent.parent, tmp_path)
    _assert_refused(report, "NUL", "not JSON")
    errors = [e["reason"] for r in report["results"]["plugin_errors"] for e in r["errors"]]
    assert errors and all("NUL" in e and "\n" not in e for e in errors)  # judged by discovery from one block


@pytest.mark.parametrize("compressed", [False, True])
def test_json_padded_with_blanks_is_refused_after_a_block(tmp_path, compressed):
    junk = _junk_logdir(tmp_path) / (NAME + (".gz" if compressed else ""))
    doc = gzip.decompress(open(BERT, "rb").read())
    pad = b" " * (1 << 20)
    if compressed:  # 1 GiB of spaces after the trace, 1 MB on disk
        with gzip.open(junk, "wb", compresslevel=1) as f:
            f.write(doc)
            for _ in range(1024):
                f.write(pad)
    else:  # 512 MiB on disk: read whole, it alone would pass the memory budget
        with open(junk, "wb") as f:
            f.write(doc)
            for _ in range(512):
                f.write(pad)
    report = _probe(junk, junk.parent.parent, tmp_path)
    _assert_refused(report, "blank padding")


def test_head_is_judged_before_reading(tmp_path):
    blank = tmp_path / "blank.json"
    blank.write_bytes(b" " * (1 << 17) + b'{"traceEvents": []}')
    with pytest.raises(TraceError, match="first 64 KiB are blank"):
        read_all(blank)
    text = tmp_path / "text.json"
    text.write_bytes(b"hello" * 100_000)
    with pytest.raises(TraceError, match="starts with 'h'"):
        read_all(text)
    nul = tmp_path / "nul.json.gz"
    nul.write_bytes(gzip.compress(b'{"traceEvents": [' + b"\0" * 100))
    with pytest.raises(TraceError, match="NUL"):
        read_all(nul)
    late = tmp_path / "late.json"  # a NUL after the first block: found in the block that holds it
    late.write_bytes(b'{"traceEvents": [' + b" " * (5 << 20) + b"\0")
    with pytest.raises(TraceError, match="NUL|padding"):
        read_all(late)


# ------------------------------------------------------------------------------------------------ linear time

def test_kernel_role_reads_a_bounded_head_of_a_10mb_name(monkeypatch):
    seen = []
    real = kernel_roles.kernel_class
    monkeypatch.setattr(kernel_roles, "kernel_class", lambda name, *a: seen.append(len(name)) or real(name, *a))
    huge = "void cutlass::Kernel<cutlass_80_tensorop_gemm_" + "x" * 10_000_000 + ">"
    assert kernel_roles.kernel_role(huge) == "compute"
    assert kernel_roles.kernel_role("nchwToNhwcKernel" + "y" * 10_000_000) == "layout"
    assert kernel_roles.kernel_role("z" * 10_000_000) == "work"
    assert seen and max(seen) <= kernel_roles.NAME_CHARS
    assert kernel_roles.kernel_role("ampere_sgemm_128x64_nn") == "compute"  # short names: unchanged


def test_critical_path_with_a_10mb_op_name(tmp_path, monkeypatch):
    """The op keeps its full name in the answer; classifying it reads its head only."""
    import tb_gpuinsight

    seen = []
    real = cpath_graph.kernel_class
    monkeypatch.setattr(cpath_graph, "kernel_class", lambda name, *a: seen.append(len(name)) or real(name, *a))
    doc = json.loads(gzip.decompress(open(BERT, "rb").read()))
    huge = "aten::" + "q" * 10_000_000
    next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")["name"] = huge
    path = tmp_path / NAME
    path.write_text(json.dumps(doc))
    result = tb_gpuinsight.critical_path(str(path))
    assert seen and max(seen) <= kernel_roles.NAME_CHARS
    assert huge in json.dumps(result, default=str)


def test_a_long_tensor_trace_parses_each_distinct_value_once(tmp_path, monkeypatch):
    lines = open(os.path.join(SAMPLES, "cpu_mlp", "cpu-worker.1795250381957840523.tensor.trace")).read().splitlines()
    shapes = {line.split("  ")[2] for line in lines}
    path = tmp_path / "big.tensor.trace"
    with open(path, "w") as f:
        for i in range(300_000 // len(lines) + 1):
            f.write("\n".join(lines) + "\n")
    calls = []
    real = tensortrace.parse_shape
    monkeypatch.setattr(tensortrace, "parse_shape", lambda text: calls.append(text) or real(text))
    tensortrace._kind_and_shape.cache_clear()
    parsed = tensortrace.read_tensor_trace(path)
    assert len(parsed) >= 300_000 and parsed.error_count == 0
    assert len(calls) <= 2 * len(shapes)  # [call] and [ret] of each distinct shape


def test_tensor_trace_junk_is_refused_from_its_first_block(tmp_path):
    nul = tmp_path / "a.tensor.trace"
    with open(nul, "wb") as f:
        f.truncate(4 << 30)
    with pytest.raises(TraceError, match="NUL"):
        tensortrace.read_tensor_trace(nul)
    json_file = tmp_path / "b.tensor.trace"
    json_file.write_text('{"traceEvents": []}')
    with pytest.raises(TraceError, match=r"no \[call\] or \[ret\] line"):
        tensortrace.read_tensor_trace(json_file)
    line = open(os.path.join(SAMPLES, "cpu_mlp", "cpu-worker.1795250381957840523.tensor.trace")).readline()
    padded = tmp_path / "c.tensor.trace"
    padded.write_bytes(line.encode() + b"x" * (3 << 20) + b"\n" + line.encode() + b" " * (3 << 20))
    with pytest.raises(TraceError, match="padding"):
        tensortrace.read_tensor_trace(padded)
    long_line = tmp_path / "d.tensor.trace"
    long_line.write_bytes(line.encode() + b"x" * (3 << 20) + b"\n" + line.encode())
    parsed = tensortrace.read_tensor_trace(long_line)
    assert len(parsed) == 2 and parsed.errors == [(2, "line longer than 1024 KiB")]


def test_a_deep_execution_trace_loads_without_the_collector_walking_it(tmp_path):
    """A 20,000-node ET whose nodes form one parent chain (and a loop): decoded with the cyclic collector paused
    (it ran hundreds of times over the growing heap before), the chain kept and the loop cut, in one pass."""
    import gc

    from tb_gpuinsight.trace.et import load_et

    n = 20_000
    nodes = [{"id": 1, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 0, "tid": 1}]
    nodes += [{"id": i, "name": "aten::mm", "parent": i - 1, "rf_id": i, "tid": 1, "op_schema": "aten::mm(Tensor x)",
               "inputs": [[i - 1, i - 1, 0, 4, 4, "cuda:0"]], "input_types": ["Tensor(float)"],
               "input_shapes": [[4]], "outputs": [[i, i, 0, 4, 4, "cuda:0"]], "output_types": ["Tensor(float)"],
               "output_shapes": [[4]]} for i in range(2, n + 2)]
    nodes += [{"id": n + 2, "name": "loop_a", "parent": n + 3}, {"id": n + 3, "name": "loop_b", "parent": n + 2}]
    path = tmp_path / "deep.et.json"
    path.write_text(json.dumps({"schema": "1.0.1", "pid": 1, "time": "", "start_ts": 0, "finish_ts": 0,
                                "nodes": nodes}))
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        et = load_et(path)
    finally:
        gc.callbacks.remove(count)
    assert len(collections) <= 2, collections  # at most the one that follows the pause
    assert gc.isenabled()
    assert len(et) == n + 3 and et.parent[et.row_of[n + 1]] == et.row_of[n]  # the chain, row by row
    assert sorted(int(et.parent[et.row_of[i]]) for i in (n + 2, n + 3)).count(-1) == 1  # the loop cut once
    assert et.inputs[et.row_of[500]].values == [[499, 499, 0, 4, 4, "cuda:0"]]


def test_critical_path_rows_are_made_only_for_what_is_shown(tmp_path, monkeypatch):
    """10,000 kernels launched under one correlation id, each its own segment of the path: the API's frames are
    built column by column and the text report makes rows of the `--top` longest only (it made a dict of every
    segment, twice, and a numpy read per field of each)."""
    import contextlib
    import io

    from tb_gpuinsight import critical_path
    from tb_gpuinsight.analysis.graph.critical_path.path import CriticalPath
    from tb_gpuinsight.cli import main

    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
               "dur": 40_000},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
               "args": {"correlation": 1}}]
    events += [{"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": 5 + 3 * i, "dur": 2,
                "args": {"device": 0, "stream": 7, "correlation": 1}} for i in range(10_000)]
    trace = tmp_path / NAME
    trace.write_text(json.dumps({"traceEvents": events}))
    made = []
    if hasattr(CriticalPath, "segment_rows"):
        rows_of = CriticalPath.segment_rows
        monkeypatch.setattr(CriticalPath, "segment_rows", lambda self, rows: made.append(len(rows)) or
                            rows_of(self, rows))
    one = CriticalPath.segment
    monkeypatch.setattr(CriticalPath, "segment", lambda self, i: made.append(1) or one(self, i))
    report = critical_path(trace)
    assert len(report.segments) >= 10_000 and report.segments["name"].str.startswith("k").sum() >= 10_000
    assert sum(made) == 0
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["critical-path", str(trace), "--top", "5"]) == 0
    assert sum(made) <= 5 and "the 5 longest in path order" in out.getvalue()


def test_companions_of_every_trace_of_a_big_run_list_its_folder_once(tmp_path, monkeypatch):
    """`critical-path` / `analyze` over a run of many traces look up each trace's Execution Traces: the folder is
    listed once between them and only files that can pair with a trace are sniffed (each lookup listed and sniffed
    the whole folder: 10,000 traces made 10^8 sniffs)."""
    import time

    from tb_gpuinsight import logdir as logdir_mod
    from tb_gpuinsight.loading import companion_execution_traces

    run = tmp_path / "run"
    run.mkdir()
    for i in range(300):
        (run / f"w{i}.1700000000000000000.pt.trace.json").write_text('{"traceEvents": []}')
    et = run / "w7.1700000000000000000.et.json"
    et.write_text('{"schema": "1.0.1", "pid": 1, "nodes": []}')
    os.utime(run, (time.time() - 60, time.time() - 60))  # a folder not changed lately
    listed, sniffed = [], []
    listdir, sniff = os.listdir, logdir_mod.sniff
    monkeypatch.setattr(os, "listdir", lambda p: listed.append(p) or listdir(p))
    monkeypatch.setattr(logdir_mod, "sniff", lambda p: sniffed.append(p) or sniff(p))
    found = {i: companion_execution_traces(run / f"w{i}.1700000000000000000.pt.trace.json") for i in range(300)}
    assert found[7] == [str(et)] and not any(v for i, v in found.items() if i != 7)
    assert len(listed) == 1 and len(sniffed) == 1
    (run / "w9.1700000000000000000.et.json").write_text('{"schema": "1.0.1", "pid": 1, "nodes": []}')
    assert companion_execution_traces(run / "w9.1700000000000000000.pt.trace.json")  # a new file: listed again
