"""The All-ranks kernel table, device cards and roofline from the run's rank index (store/rank_kernels.py,
analysis/ranks/kernel_parts.py, device_parts.py): the same rows, order, labels and figures as every span's analysis
combined gives, on the real 8-rank DLRM step and on a gloo DDP run recorded here by real torch; written by `summarize`, read with no summary on a request,
updated for a changed rank only, refused and rebuilt when damaged, and the same from an S3-compatible server."""
from __future__ import annotations

import math
import os
import shutil
import types

import numpy as np
import pytest

from tb_gpuinsight.analysis.ranks import kernel_parts as kp
from tb_gpuinsight.analysis.ranks import report as rk
from tb_gpuinsight.routes import kernels as kernel_routes
from tb_gpuinsight.routes import ranks as ranks_routes
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store import rank_kernels as rkn
from tb_gpuinsight.store.batch import summarize

from .store_reads import count_summary_reads, summarized_dlrm

SORTS = ("total_us", "rank_max_us", "rank_median_us", "count", "name", "tflops", "efficiency")


def _request(**args):
    return types.SimpleNamespace(args={k: str(v) for k, v in args.items()})


def _plugin(logdir: str, store: str):
    service = LogdirService(logdir, store=store, workers=0, scan_interval=3600)
    service.scan()
    assert service.indexes.writer.wait_idle(300)  # the index build its first scan queued, if any, is done
    ranks_routes._REPORTS._items.clear()  # as a fresh server: no answer kept in memory
    return types.SimpleNamespace(service=service, analysis=lambda req: service.analysis(
        req.args["run"], req.args["worker"], req.args.get("span", "all"), req.args.get("dtype", "auto")))


def _combined(plugin, request) -> dict:
    """The table as every span's analysis combined gives it (the path the index replaces)."""
    return kernel_routes.kernels(plugin.analysis(request), request, ranks_routes.span_ranks(plugin, request))


def _same(old: dict, new: dict) -> None:
    """Identical answers: keys, rows, their order and labels exactly; floats to the last bits (per-span sums are
    added in another order than per-call ones)."""
    assert old.keys() == new.keys() and len(old["rows"]) == len(new["rows"])
    assert {k: v for k, v in old.items() if k != "rows"} == {k: v for k, v in new.items() if k != "rows"}
    for a, b in zip(old["rows"], new["rows"]):
        assert a.keys() == b.keys()
        for key, value in a.items():
            if isinstance(value, float) and isinstance(b[key], float):
                assert math.isclose(value, b[key], rel_tol=1e-12, abs_tol=1e-12), (a["name"], key, value, b[key])
            else:
                assert value == b[key], (a["name"], key, value, b[key])


def _alike(old, new, where: str = "") -> None:
    """The same JSON answer: keys, lists and labels exactly, floats to the last bits."""
    if isinstance(old, float) and isinstance(new, float):
        assert math.isclose(old, new, rel_tol=1e-12, abs_tol=1e-12), (where, old, new)
    elif isinstance(old, dict):
        assert isinstance(new, dict) and old.keys() == new.keys(), (where, old, new)
        for key in old:
            _alike(old[key], new[key], f"{where}.{key}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(old) == len(new), (where, old, new)
        for i, (a, b) in enumerate(zip(old, new)):
            _alike(a, b, f"{where}[{i}]")
    else:
        assert old == new, (where, old, new)


def _cards_and_roofline_alike(plugin, run: str, devices=(None,)) -> None:
    """/devices and /roofline of "All ranks" from the index equal those of the combined analysis."""
    request = _request(run=run, worker="*")
    eff = plugin.analysis(request)
    _alike(kernel_routes.devices(eff, plugin.service.datasheet(), ranks_routes.span_ranks(plugin, request)),
           kernel_routes.devices_route(plugin, request))
    for device in devices:
        request = _request(run=run, worker="*", **({} if device is None else {"device": device}))
        _alike(kernel_routes.roofline(eff, device), kernel_routes.roofline_route(plugin, request))


def _every_view(plugin, run: str):
    """(combined, indexed) answers of the All-ranks table: both groupings, several sorts, a filter, a page."""
    for group in ("name", "op"):
        for sort in SORTS:
            for order in ("desc", "asc"):
                yield _request(run=run, worker="*", group=group, sort=sort, order=order, limit=5000)
    yield _request(run=run, worker="*", filter="nccl", sort="rank_min_us")
    yield _request(run=run, worker="*", group="op", offset=5, limit=7)


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    """The real DLRM run summarised into a store by `summarize` (which writes the rank index)."""
    return summarized_dlrm(tmp_path_factory)


def test_all_ranks_table_from_the_index_equals_the_combined_analysis_on_dlrm(dlrm, monkeypatch):
    names = sorted(os.listdir(dlrm / "store" / "ranks"))
    assert [n.split(".", 1)[1] for n in names] == ["kernel-table.npz", "kernels.npz", "npz"]
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    reads = count_summary_reads(monkeypatch)
    first = kernel_routes.kernels_route(plugin, _request(run="dlrm", worker="*", limit=5000))
    assert reads[0] == 0  # the table summarize stored: one small read, no summary
    assert first["rank_count"] == 8 and first["rows"][0]["name"].startswith("ncclKernel")
    for request in _every_view(plugin, "dlrm"):
        _same(_combined(plugin, request), kernel_routes.kernels_route(plugin, request))
    nccl = [r for r in first["rows"] if r["name"].startswith("ncclKernel")]
    assert sum(r["count"] for r in nccl) == 64 and all(r["ranks"] == 8 for r in nccl)


def test_all_ranks_device_cards_and_roofline_from_the_index_equal_the_combined_analysis(dlrm, monkeypatch):
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    reads = count_summary_reads(monkeypatch)
    cards = kernel_routes.devices_route(plugin, _request(run="dlrm", worker="*"))
    points = kernel_routes.roofline_route(plugin, _request(run="dlrm", worker="*"))
    assert reads[0] == 0  # what summarize stored: no summary read
    assert [d["id"] for d in cards["devices"]] == list(range(8)) and cards["hint"]
    assert all(d["summary"]["gpu_busy_us"] > 0 and d["summary"]["unrated_families"] for d in cards["devices"])
    assert points["points"] and points["dtype"]
    _cards_and_roofline_alike(plugin, "dlrm", (None, 0, 5, 9))


def test_merge_equals_across_ranks_column_by_column(dlrm):
    """Below the routes: every column of the merged table, including the ones no row shows."""
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    service = plugin.service
    states = service.ready_states("dlrm", "*", "all")
    span_rank = ranks_routes.span_ranks(plugin, _request(run="dlrm", worker="*"))
    parts = kp.joined([kp.span_parts(service.analysis("dlrm", s.worker, s.span).activities) for s in states])
    every = service.analysis("dlrm", "*", "all").activities
    for group, keys in rk.KERNEL_KEYS.items():
        old = rk.across_ranks(every, span_rank, keys)
        new = kp.merge(parts, range(len(states)), span_rank, keys)
        assert set(old.columns) == set(new.columns) and len(old) == len(new)
        for col, values in old.columns.items():
            labels = old.strings.get(col)
            if labels is not None:  # labels compared as text: the merged table may number them otherwise
                assert [labels[c] if c >= 0 else None for c in values.tolist()] == \
                    [new.strings[col][c] if c >= 0 else None for c in new[col].tolist()], col
            elif values.dtype.kind == "f":
                np.testing.assert_allclose(new[col], values, rtol=1e-12, atol=1e-12, err_msg=col)
            else:
                assert new[col].tolist() == values.tolist(), col
        # Spans in another order (ranks unchanged): the rows follow the label order of that combination.
        backwards = list(range(len(states)))[::-1]
        flipped = kp.merge(parts, backwards, span_rank[backwards], keys)
        assert sorted(flipped.strings["name"]) == sorted(new.strings["name"])
        assert flipped["total_us"].sum() == pytest.approx(new["total_us"].sum())


def test_gloo_run_table_from_the_index_equals_the_combined_analysis(tmp_path):
    pytest.importorskip("torch")
    from .gloo_ddp import record

    run = record(str(tmp_path / "logdir" / "ddp"), world=3, slow_rank=1)
    plugin = _plugin(os.path.dirname(run), str(tmp_path / "store"))  # analysed by the plugin (no summarize)
    for request in (_request(run="ddp", worker="*"), _request(run="ddp", worker="*", group="op", sort="name")):
        indexed = kernel_routes.kernels_route(plugin, request)
        _same(_combined(plugin, request), indexed)
        assert indexed["rank_count"] == 3
    _cards_and_roofline_alike(plugin, "ddp", (None, 0))
    assert not rkn.load_answers(open_store(str(tmp_path / "store")), "ddp")  # a request writes no index
    plugin.service.scan()  # every rank analysed and stored: the writer builds the index
    assert plugin.service.indexes.writer.wait_idle(300)
    assert rkn.load_answers(open_store(str(tmp_path / "store")), "ddp")
    plugin.service.stop()


def test_a_changed_rank_reads_only_its_own_summary(dlrm, tmp_path, monkeypatch):
    logdir, store = tmp_path / "logdir", tmp_path / "store"
    shutil.copytree(dlrm / "logdir", logdir)
    shutil.copytree(dlrm / "store", store)
    summarize(str(logdir), str(store), workers=0)  # the copies' summaries (the paths' mtimes are new)
    changed = next((logdir / "dlrm").glob("worker3_*.pt.trace.json.gz"))
    data = bytearray(changed.read_bytes())  # a rank written again: its bytes change (the gzip header's time)
    data[4] ^= 1  # (summaries are keyed by content: a new mtime alone is the same trace)
    changed.write_bytes(bytes(data))
    reads = count_summary_reads(monkeypatch)
    assert summarize(str(logdir), str(store), workers=0).done == 1
    assert reads[0] == 1  # summarize: the changed rank's summary, once for both its rank rows and its kernel rows
    plugin = _plugin(str(logdir), str(store))
    keys, _ = rkn.load_inputs(open_store(str(store)), "dlrm", plugin.service.datasheet())
    assert sorted(keys) == sorted(s.key for s in plugin.service.ready_states("dlrm", "*", "all"))
    request = _request(run="dlrm", worker="*", limit=5000)
    indexed = kernel_routes.kernels_route(plugin, request)
    assert reads[0] == 1  # the request: the stored table
    rkn._save(open_store(str(store)), rkn.answers_name("dlrm"), {}, {})  # no answer: merged from the inputs
    ranks_routes._REPORTS._items.clear()
    assert kernel_routes.kernels_route(plugin, request) == indexed and reads[0] == 1
    _same(_combined(plugin, request), indexed)


def test_damaged_or_foreign_kernel_index_is_refused_deleted_and_rebuilt(dlrm, tmp_path):
    store_dir = tmp_path / "store"
    shutil.copytree(dlrm / "store", store_dir)
    store = open_store(str(store_dir))
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))
    for name in (rkn.inputs_name("dlrm"), rkn.answers_name("dlrm")):
        path = store_dir / name
        data = bytearray(path.read_bytes())
        data[-100] ^= 0xFF  # one flipped byte: the checksum fails
        path.write_bytes(bytes(data))
    request = _request(run="dlrm", worker="*", group="op", limit=5000)
    _same(_combined(plugin, request), kernel_routes.kernels_route(plugin, request))  # from the summaries
    assert (store_dir / rkn.answers_name("dlrm")).exists()  # a request leaves them: the writer replaces them
    assert rkn.load_answers(store, "dlrm") == {} and not (store_dir / rkn.answers_name("dlrm")).exists()
    assert rkn.load_inputs(store, "dlrm", plugin.service.datasheet()) is None
    assert not (store_dir / rkn.inputs_name("dlrm")).exists()
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))  # a server started on it: its writer rebuilds them
    assert rkn.load_answers(store, "dlrm") and rkn.load_inputs(store, "dlrm", plugin.service.datasheet())
    # Another run's objects under this run's name are refused too; another datasheet's inputs are not used.
    shutil.copy(store_dir / rkn.answers_name("dlrm"), store_dir / rkn.answers_name("other"))
    assert rkn.load_answers(store, "other") == {} and not (store_dir / rkn.answers_name("other")).exists()
    assert rkn.load_inputs(store, "dlrm", plugin.service.datasheet()[:1]) is None


def test_other_ratings_and_step_windows_use_the_combined_analysis(dlrm, monkeypatch):
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    calls = []
    monkeypatch.setattr(ranks_routes, "all_ranks_table", lambda *a: calls.append(a) or (_ for _ in ()).throw(
        AssertionError("the index does not hold this rating")))
    forced = kernel_routes.kernels_route(plugin, _request(run="dlrm", worker="*", dtype="fp16"))
    assert forced["dtype"] == "fp16" and forced["rank_count"] == 8 and not calls
    window = kernel_routes.kernels_route(plugin, _request(run="dlrm", worker="*", t0=0, t1=1e18))
    assert window["rank_count"] == 8 and not calls
    for args in ({"dtype": "fp16"}, {"device_name": plugin.service.datasheet()[0].name}):
        request = _request(run="dlrm", worker="*", **args)
        assert kernel_routes.devices_route(plugin, request) == kernel_routes.devices(
            plugin.analysis(request), plugin.service.datasheet(), ranks_routes.span_ranks(plugin, request))
        assert kernel_routes.roofline_route(plugin, request)["dtype"] == args.get("dtype", "fp32")
    assert not calls


def test_s3_store_serves_the_table_from_one_object(dlrm, monkeypatch):
    from .s3server import s3_server

    with s3_server() as server:
        import s3fs

        s3fs.S3FileSystem(endpoint_url=server["endpoint"], key="testing", secret="testing").mkdir("kernels-test")
        url = "s3://kernels-test/store"
        assert summarize(str(dlrm / "logdir"), url, workers=0).indexed == 1
        store = open_store(url)
        assert store._fs.exists(store._path(rkn.answers_name("dlrm")))
        plugin = _plugin(str(dlrm / "logdir"), url)
        reads = count_summary_reads(monkeypatch)
        request = _request(run="dlrm", worker="*", sort="rank_max_us", limit=5000)
        indexed = kernel_routes.kernels_route(plugin, request)
        assert reads[0] == 0  # one GET of the stored table
        _same(_combined(_plugin(str(dlrm / "logdir"), str(dlrm / "store")), request), indexed)


def test_the_plugin_writes_the_index_once_its_ranks_are_analysed(dlrm, tmp_path, monkeypatch):
    """A rank the plugin analyses itself: its scan writes the run's index (report and kernel table) once every
    rank is in the store, so the next request reads no summary."""
    from tb_gpuinsight.store import rank_index as ri

    store_dir = tmp_path / "store"
    shutil.copytree(dlrm / "store", store_dir, ignore=shutil.ignore_patterns("ranks"))
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))
    worker3 = next(s for s in plugin.service.ready_states("dlrm", "*", "all") if s.worker.startswith("worker3"))
    assert plugin.service.indexes.writer.wait_idle(300)  # its first scan indexed the run: start without it
    plugin.service.stop()
    shutil.rmtree(store_dir / "ranks")
    os.unlink(store_dir / worker3.key)
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))  # analyses worker3 in this scan (workers=0)
    assert not (store_dir / "ranks").exists()  # the scan listed the store before worker3 was in it
    plugin.service.scan()  # the next scan finds every rank analysed: the index is written now, in the background
    assert plugin.service.indexes.writer.wait_idle(300)
    assert sorted(os.listdir(store_dir / "ranks")) == sorted(
        os.path.basename(n) for n in (ri.index_name("dlrm"), rkn.inputs_name("dlrm"), rkn.answers_name("dlrm")))
    reads = count_summary_reads(monkeypatch)
    ranks_routes._REPORTS._items.clear()
    request = _request(run="dlrm", worker="*", limit=5000)
    indexed = kernel_routes.kernels_route(plugin, request)
    ranks_routes.ranks_route(plugin, _request(run="dlrm"))
    assert reads[0] == 0
    _same(_combined(plugin, request), indexed)
    mtime = os.stat(store_dir / rkn.answers_name("dlrm")).st_mtime_ns
    plugin.service.scan()  # nothing changed: not written again
    assert plugin.service.indexes.writer.wait_idle(300)
    assert os.stat(store_dir / rkn.answers_name("dlrm")).st_mtime_ns == mtime
