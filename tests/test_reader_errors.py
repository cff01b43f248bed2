"""Bad input gives a TraceError with a one-line reason; fuzzed real traces never raise anything else."""
from __future__ import annotations

import gzip
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tb_gpuinsight
from tb_gpuinsight import TraceError
from tb_gpuinsight.trace.kineto import load_kineto

from .corpus import CORPUS

SMALL = CORPUS / "hta" / "benchmark_simple_add_trace.json.gz"


def _small_bytes() -> bytes:
    if not SMALL.exists():
        pytest.skip(f"corpus trace {SMALL} not found")
    return gzip.decompress(SMALL.read_bytes())


def _expect_error(path, match):
    with pytest.raises(TraceError) as info:
        load_kineto(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert match in message, message
    return info.value


def test_truncated_json_is_incomplete(tmp_path):
    p = tmp_path / "t.pt.trace.json"
    p.write_bytes(_small_bytes()[:5000])
    err = _expect_error(p, "ends early")
    assert err.incomplete


def test_truncated_gzip_is_incomplete(tmp_path):
    p = tmp_path / "t.pt.trace.json.gz"
    p.write_bytes(gzip.compress(_small_bytes())[:1000])
    assert _expect_error(p, "gzip stream ends early").incomplete


def test_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress(_small_bytes()))
    data[20:40] = b"\x00" * 20
    p = tmp_path / "c.json.gz"
    p.write_bytes(bytes(data))
    _expect_error(p, "gzip")


def test_invalid_json_reports_offset(tmp_path):
    p = tmp_path / "bad.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X",, }]}')
    err = _expect_error(p, "invalid JSON")
    assert err.offset is not None


@pytest.mark.parametrize("content,match", [
    (b'"just a string"', "not a JSON trace"),
    (b"", "empty"),
    (b'{"traceEvents": []}', "no events"),
    (b'{"schemaVersion": 1}', "no 'traceEvents'"),
    (b'{"traceEvents": 5}', "unexpected JSON layout"),
    (b'{"schema": "1.0.1", "nodes": [{"id": 1}]}', "Execution Trace"),
])
def test_wrong_shapes(tmp_path, content, match):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    _expect_error(p, match)


def test_directory_and_missing_file(tmp_path):
    _expect_error(tmp_path, "directory")
    _expect_error(tmp_path / "missing.json", "no such file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file(tmp_path):
    p = tmp_path / "secret.json"
    p.write_bytes(b"{}")
    p.chmod(0)
    _expect_error(p, "permission denied")


def test_odd_but_valid_events_are_kept_or_counted(tmp_path):
    p = tmp_path / "odd.json"
    p.write_bytes(b'{"traceEvents": [5, "x", {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,'
                  b' "args": {"External id": "not-an-int", "stream": "0x7", "device": 0}},'
                  b' {"ph": "X", "cat": "Kernel", "name": "k2", "ts": "3", "dur": 1, "pid": 0}]}')
    trace = load_kineto(p)
    assert trace.kernels.values("name") == ["k", "k2"]
    assert trace.kernels["stream"].tolist() == [7, -1]
    assert trace.meta.malformed_events == 2 and trace.meta.malformed_args == 1


def test_file_is_never_modified(tmp_path):
    p = tmp_path / "t.pt.trace.json"
    p.write_bytes(_small_bytes())
    before = (p.stat().st_mtime_ns, p.read_bytes())
    tb_gpuinsight.load(p, extra_args=["grid"])
    assert (p.stat().st_mtime_ns, p.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["t.pt.trace.json"]


_FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(cut=st.floats(0, 1))
def test_fuzz_truncation(tmp_path, cut):
    data = _small_bytes()
    p = tmp_path / "f.json"
    p.write_bytes(data[: int(len(data) * cut)])
    _load_or_trace_error(p)


@_FUZZ
@given(edits=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=4)), min_size=1, max_size=8),
       compress=st.booleans())
def test_fuzz_mutation(tmp_path, edits, compress):
    data = bytearray(_small_bytes())
    for where, blob in edits:
        i = int(where * (len(data) - 1))
        data[i:i + len(blob)] = blob
    raw = bytes(data)
    p = tmp_path / ("m.json.gz" if compress else "m.json")
    p.write_bytes(gzip.compress(raw) if compress else raw)
    _load_or_trace_error(p)


@_FUZZ
@given(where=st.floats(0, 1), blob=st.binary(min_size=1, max_size=16))
def test_fuzz_gzip_bytes(tmp_path, where, blob):
    data = bytearray(gzip.compress(_small_bytes()))
    i = int(where * (len(data) - 1))
    data[i:i + len(blob)] = blob
    p = tmp_path / "g.json.gz"
    p.write_bytes(bytes(data))
    _load_or_trace_error(p)


def _load_or_trace_error(path):
    try:
        trace = tb_gpuinsight.load(path)
    except TraceError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert trace.meta.event_count > 0
