"""Conformance over every real trace: kinds sniffed right; counts and devices equal an independent json.load."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight import logdir

from .corpus import CORPUS, corpus_files, need_corpus, plain_json

FILES = corpus_files()
IDS = [str(p.relative_to(CORPUS)) for p in FILES]


def _reference_counts(doc):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    counts = Counter()
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        key = {"kernel": "kernels", "cpu_op": "ops", "operator": "ops",
               "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}.get(cat)
        if key:
            counts[key] += 1
    return counts


def test_corpus_present_or_skipped():
    need_corpus()
    assert len(FILES) >= 30


_REFERENCE = {}  # path -> what the stdlib's reading says of it (json.load of a big trace is slow: read once)


def _reference(path):
    """The independent json.load reading of one file, kept as the few facts the tests compare with."""
    if path not in _REFERENCE:
        doc = plain_json(path)
        if isinstance(doc, dict) and "nodes" in doc:
            _REFERENCE[path] = {"kind": logdir.ET}
        else:
            props = (doc.get("deviceProperties") or doc.get("computeProperties") or []) \
                if isinstance(doc, dict) else []
            events = doc["traceEvents"] if isinstance(doc, dict) else doc
            kernels = sorted((e["name"], float(e["dur"])) for e in events
                             if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X")
            _REFERENCE[path] = {"kind": logdir.KINETO, "counts": _reference_counts(doc),
                                "devices": [p["name"] for p in props], "kernels": kernels}
    return _REFERENCE[path]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_file_is_classified(path):
    assert logdir.sniff(path).kind == _reference(path)["kind"]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_counts_and_devices_match_plain_json(path):
    ref = _reference(path)
    if ref["kind"] == logdir.ET:
        with pytest.raises(tb_gpuinsight.TraceError, match="Execution Trace"):
            tb_gpuinsight.load(path)
        return
    trace = tb_gpuinsight.load(path)
    counts = ref["counts"]
    assert len(trace.kernels) == counts["kernels"]
    assert len(trace.ops) == counts["ops"]
    kinds = trace.memops.values("kind")
    assert kinds.count("memcpy") == counts["memcpy"]
    assert kinds.count("memset") == counts["memset"]
    assert [d["name"] for d in trace.devices] == ref["devices"]
    assert trace.meta.malformed_events == 0
    # Kernel names and durations survive exactly.
    ours = sorted(zip(trace.kernels.values("name"), trace.kernels["dur"].tolist()))
    assert ours == ref["kernels"]


def test_external_id_spellings_and_correlation(corpus):
    legacy = tb_gpuinsight.load(corpus / "kineto" / "worker0.1623143089861.pt.trace.json.gz")
    assert (legacy.kernels["ext_id"] >= 0).all(), "2021 'external id' must be read"
    assert (legacy.kernels["correlation"] >= 0).all()
    assert (legacy.ops["shape"] >= 0).any(), "2021 traces carry Input Dims"
    modern = tb_gpuinsight.load(corpus / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz")
    assert modern.meta.base_time_ns == 1751410836000000000
    assert modern.meta.has_record_function_ids


def test_legacy_input_dims_spelling(corpus):
    trace = tb_gpuinsight.load(corpus / "kineto" / "resnet50_profiler_api_num_workers_0__worker0.pt.trace.json.gz")
    dims, types, _ = trace.shape(int(trace.ops["shape"][trace.ops["shape"] >= 0][0]))
    assert isinstance(dims, list) and isinstance(types, list)


def test_extra_args_per_load(corpus):
    path = corpus / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"
    trace = tb_gpuinsight.load(path, extra_args=["Input Strides", "grid", "cbid"])
    doc = plain_json(path)
    strides = [e["args"].get("Input Strides") for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert sorted(map(repr, trace.ops["Input Strides"].tolist())) == sorted(map(repr, strides))
    assert all(isinstance(g, list) and len(g) == 3 for g in trace.kernels["grid"])
    assert all(v is not None for v in trace.launches["cbid"])
    plain = tb_gpuinsight.load(path)
    assert "Input Strides" not in plain.ops


def test_amd_and_cpu_only(corpus):
    amd = tb_gpuinsight.load(corpus / "hta" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert amd.meta.vendor == "amd"
    assert np.isnan(amd.kernels["occupancy"]).all()
    cpu = tb_gpuinsight.load(corpus / "hta" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert cpu.devices == [] and len(cpu.kernels) == 0 and len(cpu.ops) == 4


def test_to_pandas(corpus):
    trace = tb_gpuinsight.load(corpus / "hta" / "benchmark_simple_add_trace.json.gz")
    df = trace.kernels.to_pandas()
    assert len(df) == 4 and str(df["name"].dtype) == "category"
    assert df["dur"].sum() == pytest.approx(trace.kernels["dur"].sum())
