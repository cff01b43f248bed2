"""One trace decoded on several processes while it is inflated (trace/fanout.py): batches cut at event boundaries
are decoded by forked workers and merged into the very tables of one process (the recorded digests of
test_reader_golden), small batches forcing many parts; text that only looks like a boundary, broken files and the
choice of the worker count."""
from __future__ import annotations

import json
import multiprocessing
import threading

import pytest

import tb_gpuinsight
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.trace import fanout, kineto, parallel, source

from .corpus import corpus_path
from .test_reader_golden import GOLDEN, MALFORMED, digests, malformed_copy
from .test_stream_decode import _events, _write

# (recorded trace, batch bytes): modern H100 (shapes, modules), NCCL args on V100, ROCm MI250, a 2020 trace, vLLM
# graph replay, GPU-only MI210, and a real trace with malformed fields (coerced, dropped, an entry that is no
# object); batches small enough for dozens of parts.
GOLDEN_KEYS = [("tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", 1 << 17),
               ("hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 1 << 18),
               ("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", 2000), ("hta/inference_rank_1.json.gz", 1500),
               ("tracelens/vllm_decode_full__graph_execution.json.gz", 1 << 13),
               ("tracelens/mi210__gpu_only_trace.json.gz", 1 << 13), (MALFORMED, 2000)]


@pytest.fixture
def fan_out(monkeypatch):
    """Two decoding processes (as $TB_GPUINSIGHT_DECODE_WORKERS asks) on batches of `batch` bytes, the workers
    started after `batch` bytes; the whole-file read fails the test unless `fallback` allows it."""
    def setup(batch: int, fallback: bool = False) -> list:
        monkeypatch.setenv(parallel.WORKERS_ENV, "2")
        monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)  # two processes even on a one-core machine
        monkeypatch.setattr(fanout, "HOLD", batch)
        monkeypatch.setattr(fanout, "BATCH", batch)
        whole, used = kineto._read_whole, []

        def read_whole(*args):
            if not fallback:
                pytest.fail("the decode on several processes gave up")
            used.append(args[0])
            return whole(*args)

        monkeypatch.setattr(kineto, "_read_whole", read_whole)
        return used
    return setup


def _parts_spy(monkeypatch) -> list:
    """The number of batches each load handed to workers."""
    counts, drain = [], fanout._Pool.drain

    def spy(self):
        counts.append(self.batches)
        return drain(self)

    monkeypatch.setattr(fanout._Pool, "drain", spy)
    return counts


@pytest.mark.parametrize("key, batch", GOLDEN_KEYS)
def test_several_processes_give_the_recorded_tables(monkeypatch, fan_out, tmp_path, key, batch):
    fan_out(batch)
    batches = _parts_spy(monkeypatch)
    path = malformed_copy(key.split(":", 1)[1], tmp_path) if key == MALFORMED else corpus_path(key)
    expected = json.loads(GOLDEN.read_text())[key]
    got = digests(tb_gpuinsight.load(path))
    assert sorted(k for k, v in expected.items() if got.get(k) != v) == []
    assert batches and batches[0] >= 3


def test_counts_and_logs_keep_the_serial_order(monkeypatch, fan_out, tmp_path):
    """Categories, coerced and dropped fields are listed in the order one process meets them."""
    path = malformed_copy("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", tmp_path)
    serial = kineto.load_kineto(path, workers=1)
    fan_out(batch=2000)
    split = tb_gpuinsight.load(path)
    for key in ("category_counts", "coerced_fields", "dropped_fields"):
        assert list(getattr(split.meta, key).items()) == list(getattr(serial.meta, key).items())
    assert split.meta.malformed_events == 1 and split.shapes == serial.shapes and split.comms == serial.comms


def test_text_that_looks_like_a_boundary_is_read_whole(fan_out, tmp_path):
    """A `}, {` inside a long name ends a batch in the middle of a string: that batch does not decode, and the file
    is read again whole, to the same tables."""
    kernel = _events()[1]
    events = [dict(kernel, name=f"{i}{'a' * 1500}}}, {{{'b' * 1500}") for i in range(20)] + _events()
    path = _write(tmp_path / "t.pt.trace.json", None, json.dumps({"traceEvents": events}))
    expected = digests(kineto.load_kineto(path, workers=1))
    used = fan_out(batch=1000, fallback=True)
    trace = tb_gpuinsight.load(path)
    assert used == [str(path)]  # the first batch was cut inside the first name
    assert digests(trace) == expected and trace.kernels.values("name")[0].startswith("0aaa")
    assert not multiprocessing.active_children()  # the workers were stopped


def test_broken_documents_keep_their_one_line_reasons(fan_out, tmp_path):
    fan_out(batch=500, fallback=True)
    text = json.dumps({"traceEvents": [_events()[2]] * 200})
    cut = _write(tmp_path / "cut.pt.trace.json", None, text[: len(text) // 2])
    with pytest.raises(TraceError, match="JSON ends early"):
        tb_gpuinsight.load(cut)
    trailing = _write(tmp_path / "trailing.pt.trace.json", None, text[:-2] + ",]}")
    with pytest.raises(TraceError, match="invalid JSON"):
        tb_gpuinsight.load(trailing)
    garbage = _write(tmp_path / "garbage.pt.trace.json", None, text[:5000] + "}, {oops" + text[5000:])
    with pytest.raises(TraceError, match="invalid JSON"):
        tb_gpuinsight.load(garbage)
    assert not multiprocessing.active_children()


def test_the_parent_holds_a_few_batches_of_text(monkeypatch, fan_out):
    """Neither the parent nor a worker ever holds the whole text: the parent's waiting text stays within the
    hold, a batch and a piece the source writes."""
    fan_out(batch=1 << 18)
    most = [0]
    write = fanout.FanOut.write

    def spy(self, data):
        write(self, data)
        most[0] = max(most[0], len(self._pending))

    monkeypatch.setattr(fanout.FanOut, "write", spy)
    trace = tb_gpuinsight.load(corpus_path("hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    assert trace.meta.json_bytes > 15e6 and len(trace.kernels)
    assert 0 < most[0] <= 2 * fanout.BATCH + source._CHUNK


def test_the_worker_count(monkeypatch):
    """Asked for, from the environment, else several only for a big file in a process that is no pool's worker
    and runs no other thread; never more than the cores."""
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 8)
    assert parallel.decode_workers(3) == 3 and parallel.decode_workers(99) == 8
    assert parallel.decode_workers(None, 3_000_000, "t.json.gz") == 1  # ~50 MB of JSON: one process
    assert parallel.decode_workers(None, 60_000_000, "t.json.gz") == parallel.AUTO_WORKERS
    assert parallel.decode_workers(None, 60_000_000, "t.json") == 1
    assert parallel.decode_workers(None, 2 ** 30, "t.json") == parallel.AUTO_WORKERS
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.decode_workers(None, 2 ** 30, "t.json") == 2
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    assert parallel.decode_workers(None, 2 ** 30, "t.json") == 1
    monkeypatch.delenv(parallel.WORKERS_ENV)
    monkeypatch.setattr(threading, "active_count", lambda: 3)  # forking a threaded process could deadlock
    assert parallel.decode_workers(None, 2 ** 30, "t.json") == 1
    assert parallel.decode_workers(2, 2 ** 30, "t.json") == 2  # unless asked for
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())  # a pool's worker: one each
    assert parallel.decode_workers(None, 2 ** 30, "t.json") == 1


def test_where_no_process_can_start_one_decodes_it_all(monkeypatch, fan_out):
    """A daemon's child (or a process at its limits) cannot fork workers: the stream decodes in this process."""
    path = corpus_path("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    expected = digests(kineto.load_kineto(path, workers=1))
    fan_out(batch=2000)

    def refuse(*args):
        raise AssertionError("daemonic processes are not allowed to have children")

    monkeypatch.setattr(fanout._Pool, "__init__", refuse)
    assert digests(tb_gpuinsight.load(path)) == expected
