"""Logdir discovery: runs, workers, spans in time order, companions, symlink loops, unreadable files."""
from __future__ import annotations

import gzip
import os

import pytest

from tb_gpuinsight import logdir
from tb_gpuinsight.cli import main

KINETO = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}'
ET = b'{"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "x", "start_ts": 0, "nodes": []}'


def _make(tmp_path):
    run = tmp_path / "exp" / "run_a"
    run.mkdir(parents=True)
    (run / "w0.1700000000200000000.pt.trace.json").write_bytes(KINETO)
    (run / "w0.1700000000100000000.pt.trace.json.gz").write_bytes(gzip.compress(KINETO))
    (run / "w1.pt.trace.json").write_bytes(KINETO)
    (run / "w0.1700000000100000000.et.json").write_bytes(ET)
    (run / "w0.1700000000100000000.tensor.trace").write_bytes(b"[call]  1  torch.Size([2])  8  0x10  a  f  x.py:1\n")
    (run / "shared_et.json").write_bytes(ET)
    (run / "notes.json").write_bytes(b'{"hello": 1}')
    (run / "broken.pt.trace.json").write_bytes(b"garbage")
    return tmp_path


def test_discover_runs_workers_spans(tmp_path):
    root = _make(tmp_path)
    runs = logdir.discover(root)
    assert [r.name for r in runs] == ["exp/run_a"]
    run = runs[0]
    assert sorted(run.workers) == ["w0", "w1"]
    spans = run.workers["w0"]
    assert [s.stamp for s in spans] == [1700000000100000000, 1700000000200000000]
    assert [os.path.basename(e.path) for e in spans[0].execution_traces] == ["w0.1700000000100000000.et.json"]
    assert len(spans[0].tensor_traces) == 1 and not spans[1].tensor_traces
    assert [os.path.basename(e.path) for e in run.execution_traces] == ["shared_et.json"]
    assert [os.path.basename(e.path) for e in run.unreadable] == ["broken.pt.trace.json"]
    assert "named like a trace" in run.unreadable[0].reason


def test_root_run_and_symlink_loop(tmp_path):
    (tmp_path / "a.pt.trace.json").write_bytes(KINETO)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "b.pt.trace.json").write_bytes(KINETO)
    os.symlink(tmp_path, sub / "loop")
    names = [r.name for r in logdir.discover(tmp_path)]
    assert names == [".", "sub"]


def test_sniff_ignores_names(tmp_path):
    p = tmp_path / "weird_name.txt.json"
    p.write_bytes(gzip.compress(ET))
    assert logdir.sniff(p).kind == logdir.ET
    q = tmp_path / "events.json"
    q.write_bytes(b'[{"ph": "X", "name": "a", "ts": 1}]')
    assert logdir.sniff(q).kind == logdir.KINETO


def test_not_a_directory(tmp_path):
    with pytest.raises(logdir.TraceError, match="not a directory"):
        logdir.discover(tmp_path / "nope")


def test_cli_ls_and_info(tmp_path, capsys):
    root = _make(tmp_path)
    assert main(["ls", str(root)]) == 0
    out = capsys.readouterr().out
    assert "run exp/run_a" in out and "worker w0: 2 spans" in out and "broken.pt.trace.json" in out
    trace = root / "exp" / "run_a" / "w1.pt.trace.json"
    assert main(["info", str(trace)]) == 0
    assert "kernel" in capsys.readouterr().out
    assert main(["info", str(root / "exp" / "run_a" / "broken.pt.trace.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.pt.trace.json" in err


def test_cli_info_on_corpus(corpus, capsys):
    assert main(["info", str(corpus / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "2024+" in out and "Record function id" in out
    assert main(["info", str(corpus / "param" / "pt2_et.json")]) == 0
    assert "Execution Trace" in capsys.readouterr().out
