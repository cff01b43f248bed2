"""Summarising on a real dask.distributed cluster (2 worker processes): the workers read the traces and write the
summaries; the client sends paths and gets back one-line answers."""
from __future__ import annotations

import os

import pytest

from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store.batch import summarize

from .test_store import STAMP, never_summarize, rank_logdir

pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'tb_gpuinsight[cluster]')")


def test_local_cluster_summarises_sixteen_ranks(tmp_path):
    from distributed import LocalCluster

    logdir = rank_logdir(tmp_path, 16, broken=1)
    store = str(tmp_path / "store")
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        worker_pids = {w.pid for w in cluster.workers.values()}
        report = summarize(str(logdir), store, engine="dask", scheduler=cluster.scheduler_address)
    assert (report.total, report.done, report.retried) == (17, 16, 1)
    assert [name for name, _ in report.failed] == [f"job/rank16.{STAMP}.pt.trace.json"]
    # every summary was made (its trace read) in a worker process of the cluster, none in this one
    pids = {s["pid"] for s in report.stats}
    assert pids <= worker_pids and os.getpid() not in pids
    assert len(open_store(store).keys()) == 16 and len(open_store(store).failure_keys()) == 1
    # what the cluster wrote is what the plugin serves, without reading a trace
    service = LogdirService(str(logdir), store=store, workers=0, scan_interval=3600, summarize=never_summarize)
    service.scan()
    statuses = [s["status"] for w in service.runs_json()["runs"][0]["workers"] for s in w["spans"]]
    assert statuses.count("ready") == 16 and statuses.count("error") == 1
    assert len(service.analysis("job", "rank15", "all").activities) > 0
    # a rerun resumes: nothing left to do
    again = summarize(str(logdir), store, engine="dask", workers=1)
    assert (again.done, again.already, again.failed_before) == (0, 16, 1)
