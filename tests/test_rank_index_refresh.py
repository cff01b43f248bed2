"""The plugin's rank index writes (store/rank_refresh.py, rank_table.index_logdir): built in the background so that
a scan never waits for them, one build at a time per run with the newest state queued, ended by `stop()`, a
failure logged in one line without ending the writer; the span states read under the service's lock; each
rank's summary read once per build."""
from __future__ import annotations

import logging
import os
import shutil
import threading

import pytest

from tb_gpuinsight.logdir import discover
from tb_gpuinsight.routes import ranks as ranks_routes
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store import rank_index as ri
from tb_gpuinsight.store import rank_kernels as rkn
from tb_gpuinsight.store import rank_table
from tb_gpuinsight.store.rank_refresh import IndexWriter, Stopped

from .store_reads import count_summary_reads, summarized_dlrm
from .test_rank_index import _request

LIVENESS_S = 120  # only ever waited in full when the code under test is wrong


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    return summarized_dlrm(tmp_path_factory)


def _one_rank_left(dlrm, store_dir) -> LogdirService:
    """A service whose scan just analysed the last rank of the DLRM run (its store had no index and lacked that
    rank's summary): its next scan finds every rank analysed and queues the index build."""
    shutil.copytree(dlrm / "store", store_dir, ignore=shutil.ignore_patterns("ranks"))
    service = LogdirService(str(dlrm / "logdir"), store=str(store_dir), workers=0, scan_interval=3600)
    service.scan()
    last = next(s for s in service.ready_states("dlrm", "*", "all") if s.worker.startswith("worker3"))
    assert service.indexes.writer.wait_idle(LIVENESS_S)  # its first scan indexed the run: start without it
    service.stop()
    shutil.rmtree(store_dir / "ranks")
    os.unlink(store_dir / last.key)
    service = LogdirService(str(dlrm / "logdir"), store=str(store_dir), workers=0, scan_interval=3600)
    service.scan()  # analyses it (workers=0) after listing the store: not indexed by this scan
    return service


def test_the_scan_does_not_wait_for_the_index_build(dlrm, tmp_path, monkeypatch):
    service = _one_rank_left(dlrm, tmp_path / "store")
    started, release = threading.Event(), threading.Event()
    real = rank_table.index_logdir

    def held(*args, **kwargs):
        started.set()
        release.wait(LIVENESS_S)
        return real(*args, **kwargs)
    monkeypatch.setattr(rank_table, "index_logdir", held)
    scanner = threading.Thread(target=service.scan)
    try:
        scanner.start()
        assert started.wait(LIVENESS_S)
        scanner.join(LIVENESS_S / 2)
        assert not scanner.is_alive()  # the scan ended while the build is held
        assert service.indexes.writer.busy() == ["dlrm"]
        assert not (tmp_path / "store" / "ranks").exists()
        # a request meanwhile answers from the summaries, the same report, and writes no index
        ranks_routes._REPORTS._items.clear()
        plugin = type("Plugin", (), {"service": service})()
        during = ranks_routes.rank_report(plugin, _request(run="dlrm"))[0].to_dict(10 ** 6)
        assert not (tmp_path / "store" / "ranks").exists()
    finally:
        release.set()
        scanner.join(LIVENESS_S)
    assert service.indexes.writer.wait_idle(LIVENESS_S)
    assert ri.load(open_store(str(tmp_path / "store")), "dlrm") is not None
    assert rkn.load_answers(open_store(str(tmp_path / "store")), "dlrm")
    ranks_routes._REPORTS._items.clear()
    assert ranks_routes.rank_report(plugin, _request(run="dlrm"))[0].to_dict(10 ** 6) == during
    service.stop()


def test_the_span_states_are_read_under_the_service_lock(dlrm, tmp_path):
    """While another thread holds the lock (an analysis finishing), the refresh waits for it."""
    service = _one_rank_left(dlrm, tmp_path / "store")
    found, keys = discover(service.logdir), service.store.keys()
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with service._lock:
            holding.set()
            done.wait(LIVENESS_S)
    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(LIVENESS_S)
    refresh = threading.Thread(target=service.indexes.refresh, args=(found, keys))
    refresh.start()
    refresh.join(1.0)
    try:
        assert refresh.is_alive()  # waiting for the lock
    finally:
        done.set()
        holder.join(LIVENESS_S)
        refresh.join(LIVENESS_S)
    assert not refresh.is_alive()
    assert service.indexes.writer.wait_idle(LIVENESS_S)
    assert ri.load(service.store, "dlrm") is not None  # and then queued the build as usual
    service.stop()


def test_a_run_gone_from_the_logdir_is_forgotten(dlrm, tmp_path):
    """A long-running server keeps no state for runs deleted since; one that comes back is found anew."""
    service = _one_rank_left(dlrm, tmp_path / "store")
    found, keys = discover(service.logdir), service.store.keys()
    service.indexes.refresh(found, keys)
    assert "dlrm" in service.indexes._done
    service.indexes.refresh([], keys)  # the next scan finds no run
    assert service.indexes._done == {}
    service.indexes.refresh(found, keys)
    assert "dlrm" in service.indexes._done
    assert service.indexes.writer.wait_idle(LIVENESS_S)
    service.stop()


def test_each_summary_is_read_once_per_build(dlrm, tmp_path, monkeypatch):
    shutil.copytree(dlrm / "store", tmp_path / "store", ignore=shutil.ignore_patterns("ranks"))
    store = open_store(str(tmp_path / "store"))
    reads = count_summary_reads(monkeypatch)
    assert not rank_table.index_logdir(store, str(dlrm / "logdir"), discover(str(dlrm / "logdir")))
    assert reads[0] == 8  # 8 ranks, one span each: rank rows and kernel rows from one read
    assert ri.load(store, "dlrm") is not None and rkn.load_answers(store, "dlrm")


def test_a_build_stopped_midway_writes_nothing_and_leaves_the_previous_index(dlrm, tmp_path, monkeypatch):
    """The run's kernel objects are missing (its rank index is there): stopped after 3 summary reads, the build ends
    at the next one, writing no object and leaving the rank index as it was."""
    shutil.copytree(dlrm / "store", tmp_path / "store")
    for name in (rkn.inputs_name("dlrm"), rkn.answers_name("dlrm")):
        os.unlink(tmp_path / "store" / name)
    index = (tmp_path / "store" / ri.index_name("dlrm")).read_bytes()
    store, stop = open_store(str(tmp_path / "store")), threading.Event()
    reads = count_summary_reads(monkeypatch)
    real_get = type(store).get

    def get(self, key):
        data = real_get(self, key)
        if reads[0] == 3:
            stop.set()
        return data
    monkeypatch.setattr(type(store), "get", get)
    with pytest.raises(Stopped):
        rank_table.index_logdir(store, str(dlrm / "logdir"), discover(str(dlrm / "logdir")), stop=stop)
    assert reads[0] == 3
    assert sorted(os.listdir(tmp_path / "store" / "ranks")) == [os.path.basename(ri.index_name("dlrm"))]
    assert (tmp_path / "store" / ri.index_name("dlrm")).read_bytes() == index


# ------------------------------------------------------------------------------------------------ the writer

def test_one_build_per_run_at_a_time_and_the_newest_queued_replaces_older():
    writer = IndexWriter()
    gate, ran, running, most = threading.Event(), [], [0], [0]
    lock = threading.Lock()

    def build(name: str):
        def run(stop: threading.Event) -> None:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            if name == "a1":
                gate.wait(LIVENESS_S)
            ran.append(name)
            with lock:
                running[0] -= 1
        return run
    writer.submit("a", build("a1"))
    while writer.busy() != ["a"] or not writer._running:
        threading.Event().wait(0.01)
    writer.submit("a", build("a2"))
    writer.submit("b", build("b1"))
    writer.submit("a", build("a3"))  # replaces a2, queued behind b1
    assert writer.busy() == ["a", "b", "a"]
    gate.set()
    assert writer.wait_idle(LIVENESS_S)
    assert ran == ["a1", "b1", "a3"] and most[0] == 1
    writer.stop()


def test_stop_ends_the_running_build_and_drops_the_queue():
    writer = IndexWriter()
    inside, ran = threading.Event(), []

    def long_build(stop: threading.Event) -> None:
        inside.set()
        while not stop.wait(0.01):  # a build checks `stop` at each summary read
            pass
        raise Stopped()
    writer.submit("a", long_build)
    assert inside.wait(LIVENESS_S)
    writer.submit("b", lambda stop: ran.append("b"))
    writer.stop(LIVENESS_S)
    assert writer._thread is None and not writer.busy() and ran == []
    writer.submit("c", lambda stop: ran.append("c"))  # stopped: nothing more runs
    assert writer._thread is None and ran == []


def test_a_failing_build_is_logged_in_one_line_and_the_writer_goes_on(caplog):
    writer = IndexWriter()
    ran = []

    def broken(stop: threading.Event) -> None:
        raise ValueError("summary unreadable\nTraceback (most recent call last): ...")
    with caplog.at_level(logging.WARNING, logger="tb_gpuinsight.store.rank_refresh"):
        writer.submit("a", broken)
        writer.submit("b", lambda stop: ran.append("b"))
        assert writer.wait_idle(LIVENESS_S)
    assert ran == ["b"]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["gpuinsight: rank index of run 'a' not written: ValueError: summary unreadable"]
    writer.stop()
