"""The reader's fast column path (whole lists converted in C) gives the very tables of its one-by-one reference
path, on real traces of every era and vendor and on values at the edges (ids past 2**53, past int64, nulls,
numbers out of range); and the stage timer splits a load into its stages."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.trace import columns, stages

from .corpus import corpus_path

# Modern H100 (shapes, python_function, modules), ROCm MI250, 2021 legacy categories, a 2019-era trace without
# cpu_ops, NCCL args and a profile_memory trace with 28k [memory] events, vLLM graph replay.
TRACES = ["tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "kineto/worker0.1623143089861.pt.trace.json.gz", "hta/inference_rank_1.json.gz",
          "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "hta/df_index_resolver.json.gz",
          "tracelens/vllm_decode_full__graph_execution.json.gz", "tracelens/mi210__gpu_only_trace.json.gz"]


def _load_both(path):
    fast = tb_gpuinsight.load(path)
    columns.FAST = False
    try:
        reference = tb_gpuinsight.load(path)
    finally:
        columns.FAST = True
    return fast, reference


def _assert_same(fast, reference):
    for name, table in reference.tables().items():
        other = fast.tables()[name]
        assert list(other.columns) == list(table.columns), name
        for col, arr in table.columns.items():
            got = other.columns[col]
            assert got.dtype == arr.dtype, (name, col)
            np.testing.assert_array_equal(got, arr, err_msg=f"{name}.{col}")
            assert other.strings.get(col) == table.strings.get(col), (name, col)
    assert fast.shapes == reference.shapes and fast.comms == reference.comms
    assert vars(fast.meta) == vars(reference.meta)


@pytest.mark.parametrize("rel", TRACES)
def test_fast_columns_equal_the_reference_path_on_real_traces(rel):
    fast, reference = _load_both(corpus_path(rel))
    assert len(fast.kernels) or len(fast.ops)
    _assert_same(fast, reference)


def test_fast_columns_equal_the_reference_path_at_the_edges(tmp_path):
    """Ids beyond float64's exact integers and beyond int64, nulls, negative and out-of-range sizes, text
    streams, huge FLOP counts: each is read (or dropped, and counted) as the one-by-one path does."""
    events = []
    for i, (ext, corr, regs, flop) in enumerate([
            (2 ** 53 + 1, 7, 32, 1e12), (None, 2 ** 63 + 5, -1, None), (-3, None, 1 << 20, 1e30),
            (10 ** 30, 9, None, 5), (12, 10, 64, 2.5)]):
        args = {"External id": ext, "correlation": corr, "registers per thread": regs, "stream": "0x7" if i % 2 else 7,
                "device": 0, "grid": [i, 1, 1]}
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 2}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5,
                       "args": args})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": i, "ts": 10 * i, "dur": 8,
                       "args": {"External id": ext, "kernel_flop": flop, "Sequence number": 2 ** 62 if i else None}})
    path = tmp_path / "edges.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    fast, reference = _load_both(path)
    _assert_same(fast, reference)
    assert fast.kernels["ext_id"].tolist()[0] == 2 ** 53 + 1  # exact, not rounded through a float
    assert fast.meta.dropped_fields  # the values past their ranges are counted


def test_stages_split_a_load():
    stages.reset()
    tb_gpuinsight.load(corpus_path("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    spent = stages.totals()
    assert {"inflate", "decode", "columns"} <= set(spent)
    assert all(v >= 0 for v in spent.values())
    stages.reset()
    with stages.stage("outer"):
        with stages.stage("inner"):
            sum(range(100000))
    spent = stages.totals()
    assert spent["inner"] > 0 and spent["outer"] >= 0  # the inner stage's time is not counted twice


def test_decoding_a_whole_read_on_several_processes_gives_the_serial_tables(monkeypatch):
    """A file read whole (one not laid out for streaming) on several processes: the event array split at event
    boundaries, parts decoded in forked workers and merged: the same rows, string categories, shape and collective
    codes, counts and logs as one process (small chunks and parts, so that a real trace is split in four)."""
    from tb_gpuinsight.trace import kineto, parallel

    monkeypatch.setattr(kineto, "_CHUNK_EVENTS", 256)
    monkeypatch.setattr(parallel, "MIN_EVENTS_PER_PART", 1000)
    monkeypatch.setattr(kineto, "_read_streaming", lambda *a: None)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 4)  # four parts even on a smaller machine
    path = corpus_path("tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    serial = kineto.load_kineto(path, workers=1)
    assert len(parallel.split(serial.meta.event_count, 4, 256)) == 4
    split = kineto.load_kineto(path, workers=4)
    _assert_same(split, serial)
    for key in ("category_counts", "coerced_fields", "dropped_fields"):  # in the same order, too
        assert list(getattr(split.meta, key).items()) == list(getattr(serial.meta, key).items())
