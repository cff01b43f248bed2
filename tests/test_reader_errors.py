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


# ------------------------------------------------------------------------------------------------------------------
# A malformed value spoils only its own field of its own event.

MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9,
          "computeMinor": 4, "warpSize": 64, "numSms": 304}


def rocm_mm_trace(memcpy_bytes) -> dict:
    """An aten::mm, its launch and Tensile kernel, then a hipMemcpyWithStream whose "bytes" arg is `memcpy_bytes`."""
    return {"schemaVersion": 1, "deviceProperties": [MI300X], "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
         "args": {"External id": 5, "Record function id": 7, "Input Dims": [[128, 256], [256, 64]],
                  "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5,
         "args": {"External id": 5, "correlation": 11}},
        {"ph": "X", "cat": "kernel", "name": "Cijk_Alik_Bljk_SB_MT64x16x32", "pid": 0, "tid": 7, "ts": 130,
         "dur": 20, "args": {"External id": 5, "correlation": 11, "device": 0, "stream": 7, "grid": [8, 1, 1],
                             "block": [256, 1, 1]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1, "ts": 160, "dur": 5,
         "args": {"External id": 6, "correlation": 12, "bytes": memcpy_bytes}}]}


def test_rocm_string_bytes_spoil_nothing(tmp_path):
    """ROCm writes "bytes": "1" on hipMemcpy* events: on the copy itself it is read as the number 1 (counted as
    coerced; on the runtime call no table reads it, so it is not decoded at all); the mm keeps its shapes and the
    GEMM kernel its FLOPs, exactly as in the trace with "bytes": 1."""
    import json

    results = {}
    for label, value in (("string", "1"), ("number", 1)):
        doc = rocm_mm_trace(value)
        doc["traceEvents"].append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7,
                                   "ts": 170, "dur": 2, "args": {"External id": 6, "correlation": 12, "device": 0,
                                                                 "stream": 7, "bytes": value}})
        path = tmp_path / f"{label}.pt.trace.json"
        path.write_text(json.dumps(doc))
        trace = tb_gpuinsight.load(path)
        assert trace.memops["bytes"].tolist() == [1.0]
        code = int(trace.ops["shape"][0])
        assert code >= 0 and trace.shape(code)[0] == [[128, 256], [256, 64]]
        assert trace.kernels.values("grid") == ["[8, 1, 1]"]
        eff = tb_gpuinsight.analyze(trace)
        results[label] = (trace.meta, float(eff.by_name()["flops"][0]))
    assert results["string"][1] == results["number"][1] == 2 * 128 * 256 * 64
    meta = results["string"][0]
    assert meta.coerced_fields == {"arg 'bytes': string read as number": 1}
    assert meta.dropped_fields == {} and meta.malformed_args == 0 and meta.malformed_events == 0
    assert results["number"][0].coerced_fields == {}


def test_a_value_that_cannot_be_read_is_dropped_with_its_reason(tmp_path):
    import json

    doc = rocm_mm_trace(1)
    kernel = doc["traceEvents"][2]
    kernel["args"]["correlation"] = "eleven"  # not a number: dropped
    kernel["args"]["registers per thread"] = [1]  # wrong type: dropped
    kernel["name"] = 12345  # a number where a name should be: read as its text
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps(doc))
    trace = tb_gpuinsight.load(path)
    m = trace.meta
    assert m.dropped_fields == {"arg 'correlation': string where int | null was expected": 1,
                                "arg 'registers per thread': array where int | null was expected": 1}
    assert m.coerced_fields == {"event 'name': number read as text": 1} and m.malformed_args == 2
    assert trace.kernels.values("name") == ["12345"] and trace.kernels["correlation"].tolist() == [-1]
    assert trace.kernels.values("grid") == ["[8, 1, 1]"] and trace.kernels["stream"].tolist() == [7]
    assert trace.shape(int(trace.ops["shape"][0]))[0] == [[128, 256], [256, 64]]


def _rows(trace) -> dict:
    """event index -> (table, decoded row) of every table: what a mutation of another event must leave as is."""
    import math

    out = {}
    for name, table in trace.tables().items():
        for i in range(len(table)):
            row = []
            for col, arr in table.columns.items():
                v = arr[i].item() if hasattr(arr[i], "item") else arr[i]
                if col in table.strings:
                    v = table.strings[col][v] if v >= 0 else None
                elif col == "shape":
                    v = trace.shape(v) if v >= 0 else None
                elif col == "comm":
                    v = trace.comm(v) if v >= 0 else None
                elif isinstance(v, float) and math.isnan(v):
                    v = None
                row.append((col, v))
            out[int(table["event"][i])] = (name, row)
    return out


# How one arg is mutated: the raw JSON written in its place (as_string: the original value's JSON text, quoted).
_MUTANTS = {"as_string": None, "huge": b"1" + b"0" * 400, "wrong_type": b'[[1, 2], "x"]', "object": b'{"a": {}}',
            "bad_utf8": b'"\xff\xfe"', "null": b"null", "infinite": b"1e999"}


@pytest.mark.parametrize("rel", ["hta/benchmark_simple_add_trace.json.gz", "tracelens/torch_compile_triton__trace.json.gz",
                                 "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"])
def test_fuzz_one_arg_spoils_only_its_event(tmp_path, rel):
    """Mutate one arg of one event of a real trace (a number as a string, a 401-digit number, a wrong type,
    invalid UTF-8, null, 1e999): every other event keeps every field; a number given as a string is read as the
    same number, so its own event is unchanged too."""
    import json
    import random

    from .corpus import corpus_path

    doc = json.loads(gzip.decompress(corpus_path(rel).read_bytes()))
    base = _rows(tb_gpuinsight.load(corpus_path(rel)))
    rng = random.Random(rel)
    candidates = [i for i, e in enumerate(doc["traceEvents"])
                  if isinstance(e, dict) and isinstance(e.get("args"), dict) and e["args"] and i in base]
    hows = sorted(_MUTANTS)
    for n in range(3 * len(hows)):
        index, how = rng.choice(candidates), hows[n % len(hows)]
        args = doc["traceEvents"][index]["args"]
        key = rng.choice(sorted(args))
        original = args[key]
        args[key] = "@@MUT@@"
        text = json.dumps(doc).encode("utf-8")
        args[key] = original
        raw = _MUTANTS[how] or json.dumps(json.dumps(original)).encode("utf-8")
        path = tmp_path / f"m{n}.json"
        path.write_bytes(text.replace(b'"@@MUT@@"', raw, 1))
        mutated = _rows(tb_gpuinsight.load(path))
        assert set(mutated) == set(base), (rel, index, key, how)
        same_value = how == "as_string" and isinstance(original, (int, float)) and not isinstance(original, bool)
        for ev, row in base.items():
            if ev != index or same_value:
                assert mutated[ev] == row, (rel, ev, index, key, how)
