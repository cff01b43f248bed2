"""Decoding while inflating (trace/stream.py): the event array is cut into blocks at event boundaries, never held
whole, and the tables are those of a whole-file read whatever the block size, the layout of the document
(header before or after the events, a bare event array) or the text inside events that looks like a boundary."""
from __future__ import annotations

import gzip
import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.trace import kineto, source, stream

from .corpus import corpus_path
from .test_reader_golden import digests

REAL = ["hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "kineto/worker0.1623143089861.pt.trace.json.gz",
        "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"]


@pytest.mark.parametrize("rel", REAL)
def test_small_blocks_give_the_tables_of_a_whole_read(monkeypatch, rel):
    path = corpus_path(rel)
    normal = digests(tb_gpuinsight.load(path))
    monkeypatch.setattr(stream, "BLOCK", 700)  # a few events per block: thousands of cuts
    monkeypatch.setattr(kineto, "_read_whole", lambda *a: pytest.fail("the streamed read gave up"))
    assert digests(tb_gpuinsight.load(path)) == normal


def _events():
    """Events whose text holds what looks like a boundary: `},` inside names and nested objects in args."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": 'aten::mm "}, {"', "pid": 1, "tid": 1, "ts": 10, "dur": 50,
         "args": {"External id": 7, "Input Dims": [[8, 4], [4, 2]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "kernel", "name": "gemm}],[{", "pid": 0, "tid": 7, "ts": 20, "dur": 30,
         "args": {"External id": 7, "correlation": 3, "device": 0, "stream": 7, "grid": [1, 1, 1],
                  "block": [128, 1, 1], "nested": {"a": {"b": 1}, "c": [{"d": 2}, {"e": 3}]}}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 3,
         "args": {"External id": 7, "correlation": 3}},
    ] * 40


def _write(path, doc, text=None):
    path.write_text(text if text is not None else json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize("layout", ["header first", "header last", "bare array"])
def test_every_layout_streams_to_the_same_tables(monkeypatch, tmp_path, layout):
    devices = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "computeMajor": 9,
                "computeMinor": 0, "numSms": 132}]
    if layout == "bare array":
        text = json.dumps(_events())
    elif layout == "header first":
        text = json.dumps({"schemaVersion": 1, "deviceProperties": devices, "traceEvents": _events()})
    else:
        text = json.dumps({"traceEvents": _events(), "deviceProperties": devices, "traceName": "t"}, indent=2)
    path = _write(tmp_path / "t.pt.trace.json", None, text)
    expected = digests(_load_whole(monkeypatch, path))
    monkeypatch.setattr(stream, "BLOCK", 300)
    monkeypatch.setattr(kineto, "_read_whole", lambda *a: pytest.fail("the streamed read gave up"))
    trace = tb_gpuinsight.load(path)
    assert digests(trace) == expected
    assert len(trace.kernels) == 40 and trace.kernels.values("name")[0] == "gemm}],[{"
    assert trace.ops.values("name")[0] == 'aten::mm "}, {"'
    assert (trace.devices[0]["name"] if trace.devices else None) == (None if layout == "bare array" else
                                                                     devices[0]["name"])


def _load_whole(monkeypatch, path):
    """A load that takes the whole-file path (as if the text could not be streamed)."""
    with monkeypatch.context() as patch:
        patch.setattr(kineto, "_read_streaming", lambda *a: None)
        return tb_gpuinsight.load(path)


def test_broken_documents_keep_their_one_line_reasons(tmp_path):
    text = json.dumps({"traceEvents": _events()})
    cut = _write(tmp_path / "cut.pt.trace.json", None, text[: len(text) // 2])
    with pytest.raises(TraceError, match="JSON ends early"):
        tb_gpuinsight.load(cut)
    none = _write(tmp_path / "none.pt.trace.json", None, json.dumps({"traceEvents": []}))
    with pytest.raises(TraceError, match="no events"):
        tb_gpuinsight.load(none)
    trailing = _write(tmp_path / "trailing.pt.trace.json", None, json.dumps({"traceEvents": _events()})[:-2] + ",]}")
    with pytest.raises(TraceError, match="invalid JSON"):
        tb_gpuinsight.load(trailing)
    other = _write(tmp_path / "other.pt.trace.json", None, json.dumps({"events": _events()}))
    with pytest.raises(TraceError, match="no 'traceEvents' key"):
        tb_gpuinsight.load(other)
    et = corpus_path("hta/benchmark_simple_add_et.json.gz")
    with pytest.raises(TraceError, match="Execution Trace"):
        tb_gpuinsight.load(et)


def test_the_whole_text_is_never_held(monkeypatch):
    """On the corpus's largest trace (54 MB of JSON) the text waiting to be decoded stays within two blocks and the
    piece inflated last, in one buffer that is reused, not grown."""
    path = corpus_path("hta/df_index_resolver.json.gz")
    most, buffers = [0], set()
    write = stream.EventStream.write

    def spy(self, data):
        write(self, data)
        most[0] = max(most[0], self.waiting)
        buffers.add((id(self._pending), len(self._pending)))

    monkeypatch.setattr(stream.EventStream, "write", spy)
    trace = tb_gpuinsight.load(path)
    assert trace.meta.json_bytes > 50e6 and len(trace.kernels)
    assert 0 < most[0] <= 2 * stream.BLOCK + source._GZ_STEP
    assert len(buffers) == 1 and max(size for _, size in buffers) <= 2 * stream.BLOCK + 2 * stream.PIECE


def test_a_gzipped_copy_streams_like_the_plain_file(tmp_path):
    plain = _write(tmp_path / "t.pt.trace.json", None, json.dumps({"traceEvents": _events()}))
    packed = tmp_path / "t.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert digests(tb_gpuinsight.load(packed)) == digests(tb_gpuinsight.load(plain))
