"""What a view builds from a span's files on demand (the Execution graph, the Tensor shapes op groups and tensor
records) is built off the request threads: by an analysis worker process (or the service's own build thread when it
runs none), never by the request that asks for it; a request answers 503 while the graph builds, and a build whose
process died is tried once more, then answered as a failure."""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import threading
import time

from tb_gpuinsight.routes import graph as graph_routes

from .test_graph import _get, _selection, _wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _client(tmp_path, workers: int):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    root = tmp_path / "logdir"
    root.mkdir()
    shutil.copytree(os.path.join(ROOT, "samples", "cpu_mlp"), root / "cpu_mlp")
    service = LogdirService(str(root), cache_dir=str(tmp_path / "cache"), workers=workers, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(root), flags=None), service=service)
    service.serve()
    return Client(application.TensorBoardWSGI([plugin])), service


@contextlib.contextmanager
def _ready(tmp_path, workers: int):
    """A service over the cpu_mlp sample (trace, ET, tensor.trace) once its latest span is analysed."""
    client, service = _client(tmp_path, workers)
    try:
        _wait(lambda: any(r["run"] == "cpu_mlp" and r["status"] == "ready" for r in service.runs_json()["runs"]),
              timeout=120)
        yield client, service, _selection(service, "cpu_mlp")
    finally:
        service.stop()


def _no_trace_reading_here(monkeypatch):
    """Any read of the Kineto trace, the ET or a tensor.trace in this process fails the test."""
    import tb_gpuinsight.analysis.graph.span as span_mod
    import tb_gpuinsight.loading as loading
    import tb_gpuinsight.trace.tensortrace as tensortrace

    def refuse(*args, **kwargs):
        raise AssertionError("the server process read a trace for a view")

    monkeypatch.setattr(loading, "load", refuse)
    monkeypatch.setattr(span_mod, "load_et", refuse)
    monkeypatch.setattr(tensortrace, "read_tensor_trace", refuse)


def test_a_worker_process_builds_the_graph_and_requests_wait_for_it(tmp_path, monkeypatch):
    with _ready(tmp_path, workers=1) as (client, service, sel):
        _no_trace_reading_here(monkeypatch)
        monkeypatch.setattr(graph_routes, "WAIT_S", 0.0)  # answer at once: 503 until the worker is done
        statuses = []
        end = time.time() + 120
        while time.time() < end:
            code, view = _get(client, "graph/view", **sel)
            statuses.append(code)
            if code != 503:
                break
            assert "building the execution graph" in view["error"]
            time.sleep(0.2)
        assert statuses[-1] == 200 and statuses[0] == 503, statuses
        assert view["nodes"] and view["link"]["linked"] > 0
        op = next(n for n in view["nodes"] if n["kind"] == "op")
        code, detail = _get(client, "graph/node", **sel, id=op["id"])  # the built graph is kept: no new build
        assert code == 200 and detail["et"]


def test_the_tensor_shapes_of_a_span_come_from_a_worker_process(tmp_path, monkeypatch):
    with _ready(tmp_path, workers=1) as (client, service, sel):
        _no_trace_reading_here(monkeypatch)
        code, ops = _get(client, "op_shapes", **sel)  # waits for the worker (the tab's own limit is longer)
        assert code == 200 and ops["record_shapes"] and ops["rows"], ops
        code, tensors = _get(client, "tensors", **sel)
        assert code == 200 and tensors["has_tensor_trace"] and tensors["rows"] and tensors["matched"] > 0, tensors
        code, mix = _get(client, "shape_distribution", **sel, op=ops["rows"][0]["op"])
        assert code == 200 and mix["total_calls"] > 0


def test_without_worker_processes_the_service_thread_builds_it(tmp_path, monkeypatch):
    threads = []
    real = graph_routes.build_span
    monkeypatch.setattr(graph_routes, "build_span",
                        lambda *a, **k: threads.append(threading.current_thread().name) or real(*a, **k))
    with _ready(tmp_path, workers=0) as (client, service, sel):
        code, view = _get(client, "graph/view", **sel)
        assert code == 200 and view["nodes"]
        assert len(threads) == 1 and threads[0].startswith("gpuinsight-build"), threads


def test_a_build_whose_process_died_is_tried_once_more_then_fails():
    from tb_gpuinsight.routes.builds import Builds

    cache = Builds(4)
    submitted = []

    def dying():
        future = concurrent.futures.Future()
        future.set_exception(concurrent.futures.process.BrokenProcessPool("a process died"))
        submitted.append(future)
        return future

    first = cache.get(("k",), dying)
    second = cache.get(("k",), dying)  # the pool broke under it: built again
    third = cache.get(("k",), dying)  # died again: the build's own death, not tried a third time
    assert len(submitted) == 2 and first is not second
    assert third.result() == ("error", "the process building it died, likely out of memory")
    assert cache.get(("k",), dying) is third and len(submitted) == 2


def test_a_graph_that_cannot_be_built_answers_422_with_its_reason(tmp_path):
    with _ready(tmp_path, workers=0) as (client, service, sel):
        for et in (tmp_path / "logdir" / "cpu_mlp").glob("*.et.json"):
            et.write_bytes(b'{"schema": "1.0.1", "nodes": [')  # cut short: the ET cannot be read
        _wait(lambda: _get(client, "graph/view", **sel)[0] != 200, timeout=30)
        code, body = _get(client, "graph/view", **sel)
        assert code == 422 and body["error"].startswith("cannot build the execution graph of "), body
        assert "\n" not in body["error"]
