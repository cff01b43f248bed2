"""Logdirs and summary stores on S3 (moto's S3 server on 127.0.0.1): listing without downloading, summarising into
an S3 store, the plugin serving an S3 logdir from it with the same answers as for the local copy."""
from __future__ import annotations

import json

import pytest

from tb_gpuinsight.store import envelope as cache_mod
from tb_gpuinsight.errors import ConfigError
from tb_gpuinsight.logdir import KINETO, discover
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store.batch import summarize
from tb_gpuinsight.trace import source

from .corpus import corpus_path
from .s3server import s3_server, upload
from .test_store import never_summarize

LOGDIR, STORE = "s3://logs/exp", "s3://logs/store"


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:  # first: without the s3 extra, the skip names it, whether the corpus is here or not
        upload(server["endpoint"], "logs", str(corpus_path("param/dlrm_8ranks")), "exp/dlrm")
        yield server


def test_listing_reads_no_trace(s3, monkeypatch):
    real_open = source._open_remote

    def guarded(url, block_size):
        assert ".pt.trace." not in url, f"discovery opened a trace: {url}"
        return real_open(url, block_size)

    monkeypatch.setattr(source, "_open_remote", guarded)
    runs = discover(LOGDIR)
    assert [r.name for r in runs] == ["dlrm"] and len(runs[0].spans()) == 8
    span = runs[0].spans()[0]
    assert span.trace.kind == KINETO and span.trace.size > 0 and span.trace.etag
    assert span.trace.path.startswith("s3://logs/exp/dlrm/worker0_step_12.")
    assert len(span.execution_traces) == 1  # companions sniffed from their first block


def test_plugin_serves_s3_logdir_from_s3_store_like_the_local_copy(s3, dlrm_logdir):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin

    report = summarize(LOGDIR, STORE, workers=0)
    assert report.done == 8 and not report.failed and len(open_store(STORE).keys()) == 8

    def ranks(logdir, **kw):
        service = LogdirService(logdir, workers=0, scan_interval=3600, **kw)
        service.scan()
        plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=logdir, flags=None), service=service)
        client = Client(application.TensorBoardWSGI([plugin]))
        response = client.get("/data/plugin/gpuinsight/ranks", query_string={"run": "dlrm", "span": "all"})
        assert response.status_code == 200, response.get_data(as_text=True)
        return json.loads(response.get_data(as_text=True))

    local, cache = dlrm_logdir
    remote = ranks(LOGDIR, store=STORE, summarize=never_summarize)  # served from the store: no trace read
    assert len(remote["ranks"]) == 8 and remote["stragglers"]
    assert remote == ranks(str(local), cache_dir=str(cache))


def test_damaged_s3_summary_is_refused_and_removed(s3):
    store = open_store("s3://logs/damaged")
    assert store.put("k.npz", b"summary bytes") and store.get("k.npz") == b"summary bytes"
    store._fs.pipe_file("logs/damaged/k.npz", b"TBGI-SUMMARY-1\n" + b"\0" * 32 + b"summary bytes")
    with pytest.raises(cache_mod.CorruptSummary):
        store.get("k.npz")
    assert store.keys() == set() and not store.has("k.npz")


def test_unknown_protocol_is_one_line():
    with pytest.raises(ConfigError, match="nosuchfs"):
        source.url_filesystem("nosuchfs://bucket/logs")


def test_a_store_that_cannot_be_opened_is_said_not_fatal(tmp_path):
    service = LogdirService(str(tmp_path), store="nosuchfs://bucket/store", workers=0, scan_interval=3600)
    service.scan()
    assert "nosuchfs" in service.runs_json()["logdir_error"] and not service.store
