"""The rank index of a run (store/rank_index.py, analysis/rank_table.py): the Distributed tab's answers from one
object per run equal the answers computed from every rank's own summary, on the real 8-rank DLRM step and on a gloo
DDP run recorded here by real torch; the index is written by `summarize` and the plugin's background writer, never
by a request, updated for a changed rank only, refused and rebuilt when damaged, and works the same from an
S3-compatible server."""
from __future__ import annotations

import os
import shutil
import types

import pytest

from tb_gpuinsight.routes import kernels as kernel_routes
from tb_gpuinsight.store import envelope as cache
from tb_gpuinsight.store import rank_table
from tb_gpuinsight.routes import ranks as ranks_routes
from tb_gpuinsight.routes.params import BadRequest
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store import rank_index as ri
from tb_gpuinsight.store.batch import summarize

from .store_reads import count_summary_reads, summarized_dlrm


def _request(**args):
    return types.SimpleNamespace(args={k: str(v) for k, v in args.items()})


def _plugin(logdir: str, store: str):
    service = LogdirService(logdir, store=store, workers=0, scan_interval=3600)
    service.scan()
    assert service.indexes.writer.wait_idle(300)  # the index build its first scan queued, if any, is done
    return types.SimpleNamespace(service=service)


def _per_rank(plugin, run: str) -> dict:
    chosen = ranks_routes._chosen_spans(plugin, run, -1)[0]
    report = ranks_routes.per_rank_report(plugin, run, chosen)
    return {"report": report.to_dict(10 ** 6), "heatmaps": [report.heatmap(m, 0, 1024) for m in ("dur", "comm_wait")]}


def _from_index(plugin, run: str) -> dict:
    ranks_routes._REPORTS._items.clear()  # as a fresh server: no answer kept in memory
    report = ranks_routes.rank_report(plugin, _request(run=run))[0]
    return {"report": report.to_dict(10 ** 6), "heatmaps": [report.heatmap(m, 0, 1024) for m in ("dur", "comm_wait")]}


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    """The real DLRM run summarised into a store by `summarize` (which writes the rank index)."""
    return summarized_dlrm(tmp_path_factory)


def test_index_answers_equal_the_per_rank_computation_on_dlrm(dlrm, monkeypatch):
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    assert os.path.basename(ri.index_name("dlrm")) in os.listdir(dlrm / "store" / "ranks")
    reads = count_summary_reads(monkeypatch)
    indexed = _from_index(plugin, "dlrm")
    assert reads[0] == 0  # one read of the index, no summary
    assert indexed == _per_rank(plugin, "dlrm")
    assert reads[0] == 8  # the per-rank path: every rank's summary
    assert indexed["report"]["stragglers"][0]["rank"] == 7 and indexed["report"]["rank_count"] == 8


def test_gloo_run_from_the_index_equals_the_per_rank_computation(tmp_path):
    pytest.importorskip("torch")
    from .gloo_ddp import record

    run = record(str(tmp_path / "logdir" / "ddp"), world=3, slow_rank=1)
    plugin = _plugin(os.path.dirname(run), str(tmp_path / "store"))  # analysed by the plugin (no summarize)
    indexed = _from_index(plugin, "ddp")
    assert indexed == _per_rank(plugin, "ddp")
    assert indexed["report"]["source"] == "cpu" and indexed["report"]["stragglers"][0]["rank"] == 1
    store = open_store(str(tmp_path / "store"))
    assert store._read(ri.index_name("ddp")) is None  # a request writes no index
    plugin.service.scan()  # every rank analysed and stored: the writer builds the index
    assert plugin.service.indexes.writer.wait_idle(300)
    assert store._read(ri.index_name("ddp")) is not None
    assert _from_index(plugin, "ddp") == indexed
    plugin.service.stop()


def test_a_changed_rank_reads_only_its_own_summary(dlrm, tmp_path, monkeypatch):
    logdir = tmp_path / "logdir"
    shutil.copytree(dlrm / "logdir", logdir)
    store = tmp_path / "store"
    shutil.copytree(dlrm / "store", store)
    summarize(str(logdir), str(store), workers=0)  # the copies' summaries (the paths' mtimes are new)
    changed = next((logdir / "dlrm").glob("worker3_*.pt.trace.json.gz"))
    data = bytearray(changed.read_bytes())  # a rank written again: its bytes change (the gzip header's time)
    data[4] ^= 1  # (summaries are keyed by content: a new mtime alone is the same trace)
    changed.write_bytes(bytes(data))
    report = summarize(str(logdir), str(store), workers=0)
    assert report.done == 1
    index = ri.load(open_store(str(store)), "dlrm")
    plugin = _plugin(str(logdir), str(store))
    assert plugin.service.indexes.writer.wait_idle(300)  # its first scan's build (the index is current)
    reads = count_summary_reads(monkeypatch)
    chosen = ranks_routes._chosen_spans(plugin, "dlrm", -1)[0]
    spans = [(s.key, w, s.span, s.identity) for w, s in chosen]
    assert len(index.inputs) == 8 and set(index.inputs) == {s[0] for s in spans}
    # An index one rank behind: only that rank's summary is read, the other rows are kept.
    del index.inputs[spans[3][0]]
    index.reports.clear()
    ri.save(open_store(str(store)), index)
    _, cost = rank_table.report_for(open_store(str(store)), "dlrm", spans, [s[0] for s in spans],
                                    plugin.service.datasheet())
    assert cost == {"summaries_read": 1, "from_index": 0} and reads[0] == 1
    assert _from_index(plugin, "dlrm") == _per_rank(plugin, "dlrm")


def test_a_damaged_index_is_refused_deleted_and_rebuilt(dlrm, tmp_path):
    store_dir = tmp_path / "store"
    shutil.copytree(dlrm / "store", store_dir)
    path = store_dir / ri.index_name("dlrm")
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte: the checksum fails
    path.write_bytes(bytes(data))
    assert ri.load(open_store(str(store_dir)), "dlrm") is None and not path.exists()
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))  # its first scan queues the index build
    assert plugin.service.indexes.writer.wait_idle(300)
    assert ri.load(open_store(str(store_dir)), "dlrm") is not None  # rebuilt from the summaries
    assert _from_index(plugin, "dlrm") == _per_rank(plugin, "dlrm")
    plugin.service.stop()
    # An index of another run under this run's name is refused too.
    other = ri.RankIndex("other")
    with pytest.raises(cache.CorruptSummary):
        ri.from_bytes(ri.to_bytes(other), "dlrm")


def _files(folder) -> dict:
    """Every file under `folder`: its bytes, size and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_request_writes_nothing_to_the_store(dlrm, tmp_path):
    """The rank index is the writer's: requests that find it damaged answer from the ranks' summaries (the same
    report and All-ranks kernel table) and leave the store exactly as they found it, nothing written or deleted."""
    store_dir = tmp_path / "store"
    shutil.copytree(dlrm / "store", store_dir)
    plugin = _plugin(str(dlrm / "logdir"), str(store_dir))
    assert plugin.service.indexes.writer.wait_idle(300)  # the first scan's build (the index is current)
    objects = sorted((store_dir / "ranks").iterdir())
    assert len(objects) == 3  # the report index, the kernel rows, the kernel tables
    for path in objects:
        data = bytearray(path.read_bytes())
        data[-100] ^= 0xFF  # one flipped byte: the checksum fails
        path.write_bytes(bytes(data))
    before = _files(store_dir)
    assert _from_index(plugin, "dlrm") == _per_rank(plugin, "dlrm")
    ranks_routes.heatmap_route(plugin, _request(run="dlrm", order="straggler", size=2))
    table = kernel_routes.kernels_route(plugin, _request(run="dlrm", worker="*", group="op"))
    assert table["rank_count"] == 8 and table["rows"]
    assert _files(store_dir) == before
    plugin.service.stop()
    fresh = _plugin(str(dlrm / "logdir"), str(store_dir))  # a server started on it: its writer rebuilds them
    assert fresh.service.indexes.writer.wait_idle(300)
    assert ri.load(open_store(str(store_dir)), "dlrm") is not None
    fresh.service.stop()


def test_heatmap_pages_order_and_search(dlrm):
    plugin = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
    page = ranks_routes.heatmap_route(plugin, _request(run="dlrm", page=1, size=3))
    assert page["ranks"] == [3, 4, 5] and page["page"] == 1 and page["size"] == 3 and page["matches"] == 8
    top = ranks_routes.heatmap_route(plugin, _request(run="dlrm", order="straggler", size=2))
    assert top["ranks"][0] == 7  # the straggler first
    waits = {r["rank"]: r["others_waited_us"] for r in ranks_routes.rank_report(plugin, _request(run="dlrm"))[0].ranks}
    assert waits[top["ranks"][0]] >= waits[top["ranks"][1]]
    found = ranks_routes.heatmap_route(plugin, _request(run="dlrm", q="5"))
    assert found["ranks"] == [5] and found["matches"] == 1 and found["total_ranks"] == 8
    by_worker = ranks_routes.heatmap_route(plugin, _request(run="dlrm", q="WORKER1_"))
    assert by_worker["ranks"] == [1]
    assert ranks_routes.heatmap_route(plugin, _request(run="dlrm", q="nobody"))["ranks"] == []
    report = ranks_routes.rank_report(plugin, _request(run="dlrm"))[0]
    for metric in ("idle", "comm_wait"):  # rank order, no search: the report's own heatmap, extra keys aside
        same = ranks_routes.heatmap_route(plugin, _request(run="dlrm", metric=metric, page=1, size=3))
        assert {k: v for k, v in same.items() if k in report.heatmap(metric)} == report.heatmap(metric, 3, 3)
    for bad in ({"page": -1}, {"size": 0}, {"size": 5000}, {"page": "x"}, {"order": "fastest"}):
        with pytest.raises(BadRequest):
            ranks_routes.heatmap_route(plugin, _request(run="dlrm", **bad))


def test_s3_store_serves_ranks_from_one_object(dlrm, monkeypatch):
    from .s3server import s3_server

    with s3_server() as server:
        import s3fs

        s3fs.S3FileSystem(endpoint_url=server["endpoint"], key="testing", secret="testing").mkdir("ranks-test")
        url = "s3://ranks-test/store"
        report = summarize(str(dlrm / "logdir"), url, workers=0)
        assert report.done == 8 and report.indexed == 1
        store = open_store(url)
        assert store._fs.exists(store._path(ri.index_name("dlrm")))
        plugin = _plugin(str(dlrm / "logdir"), url)
        reads = count_summary_reads(monkeypatch)
        indexed = _from_index(plugin, "dlrm")
        assert reads[0] == 0  # one GET of the index
        local = _plugin(str(dlrm / "logdir"), str(dlrm / "store"))
        assert indexed == _per_rank(local, "dlrm")
