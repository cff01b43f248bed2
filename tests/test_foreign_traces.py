"""Traces other tools write are refused by every command with exit 2 and one line naming what they look like and
what to record instead, and `ls` lists them as skipped with that reason: a Chrome trace without Kineto fields (read
as an empty Kineto trace before), an Nsight Systems JSON export, a Perfetto protobuf trace, an XPlane `.pb`. The real
Kineto traces of the corpus, old layouts included, are still read."""
from __future__ import annotations

import contextlib
import gzip
import io
import json

import pytest

from tb_gpuinsight import load
from tb_gpuinsight.cli import main
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.logdir import UNREADABLE, discover
from tb_gpuinsight.trace.foreign import foreign_head

from .corpus import corpus_path

RECORD = "record the run with torch.profiler"
CHROME_EVENTS = [{"name": f"task{i}", "ph": "X", "ts": i * 10, "dur": 5, "pid": 1, "tid": 1, "cat": "blink"}
                 for i in range(200)]


def _files(folder):
    """One file of each other tool, as each writes it."""
    folder.mkdir(exist_ok=True)
    (folder / "chrome.json").write_text(json.dumps({"traceEvents": CHROME_EVENTS, "displayTimeUnit": "ms"}))
    # Nsight Systems' `nsys export --type json`: one object per line, events first, then the strings
    (folder / "report.json").write_text('{"Type":79,"CudaEvent":{"startNs":"100","endNs":"200"}}\n'
                                        '{"Type":48,"TraceProcessEvent":{"startNs":"1","name":"3"}}\n'
                                        '{"data":["a","b"]}\n')
    # Perfetto: a Trace message, field 1 (TracePacket) length-delimited; XPlane: an XSpace whose plane is /host:CPU
    (folder / "run.perfetto-trace").write_bytes(b"\x0a\x10\x8a\x01\x0d\x0a\x0bhello world" + bytes(30))
    (folder / "host.xplane.pb").write_bytes(b"\x0a\x40\x12\x0a/host:CPU\x1a\x00" + bytes(40))
    return {"chrome.json": "a Chrome trace without Kineto fields", "report.json": "an Nsight Systems JSON export",
            "run.perfetto-trace": "a Perfetto protobuf trace", "host.xplane.pb": "a TensorFlow / JAX XPlane profile"}


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue().strip().splitlines()


def test_every_command_refuses_another_tools_trace_in_one_line(tmp_path):
    for name, what in _files(tmp_path / "other").items():
        path = str(tmp_path / "other" / name)
        for argv in (["analyze", path], ["info", path], ["overview", path], ["report", path],
                     ["timeline", path], ["critical-path", path], ["diff", path, path], ["augment", path,
                                                                                       str(tmp_path / "out.json.gz")]):
            code, _, err = _cli(argv)
            assert code == 2 and len(err) == 1, (argv, err)
            assert f"looks like {what}" in err[0] and RECORD in err[0], (argv, err)
        with pytest.raises(TraceError, match="looks like"):
            load(path)


def test_ls_lists_them_as_skipped_with_the_reason(tmp_path):
    expected = _files(tmp_path / "other")
    runs = discover(str(tmp_path))
    assert [r.name for r in runs] == ["other"] and not runs[0].workers
    skipped = {e.path.rsplit("/", 1)[-1]: e for e in runs[0].unreadable}
    assert set(skipped) == set(expected) and all(e.kind == UNREADABLE for e in skipped.values())
    code, out, _ = _cli(["ls", str(tmp_path)])
    for name, what in expected.items():
        assert f"  ! {name}: skipped: looks like {what}" in out, out


def test_a_chrome_trace_whose_first_block_cannot_tell_is_refused_once_read(tmp_path):
    from tb_gpuinsight.trace.source import read_head

    path = tmp_path / "padded.pt.trace.json.gz"
    with gzip.open(path, "wt") as f:  # a long header first: no event in the first 64 KiB
        json.dump({"otherData": {"note": "x" * 80_000}, "traceEvents": CHROME_EVENTS}, f)
    assert foreign_head(read_head(path), str(path)) == ""  # undecided from the first block
    code, _, err = _cli(["analyze", str(path)])
    assert code == 2 and len(err) == 1 and "a Chrome trace without Kineto fields" in err[0]


@pytest.mark.parametrize("trace", ["hta/inference_rank_1.json.gz",  # 2022: no header, legacy categories
                                   "hta/backward_thread.json",  # no header, 7 events
                                   "kineto/gpu_metrics_input.json",  # 2021 computeProperties
                                   "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"])  # metadata first
def test_kineto_traces_without_a_header_are_still_read(trace):
    path = corpus_path(trace)
    from tb_gpuinsight.trace.source import read_head

    assert foreign_head(read_head(path), str(path)) == ""
    assert load(path).meta.event_count > 0
