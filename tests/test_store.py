"""The summary store: atomic, validated summaries and failure records; `summarize` (resume, retry once, failures
recorded); the plugin serving a store a batch run filled without reading a trace; export to Parquet."""
from __future__ import annotations

import os
import pickle

import pytest

from tb_gpuinsight.store import envelope as cache_mod
from tb_gpuinsight.cli import main
from tb_gpuinsight.logdir import discover
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import open_store
from tb_gpuinsight.store.batch import summarize
from tb_gpuinsight.store.jobs import Job, logdir_jobs

from .browser import SAMPLES
from .corpus import corpus_path

BERT = os.path.join(SAMPLES, "bert_h100", "h100-node.1751410836000000000.pt.trace.json.gz")
STAMP = "1751410836000000000"


def rank_logdir(root, ranks: int, broken: int = 0):
    """A run of `ranks` rank traces (links to one real trace) plus `broken` truncated ones."""
    run = root / "logdir" / "job"
    run.mkdir(parents=True)
    for i in range(ranks):
        os.symlink(BERT, run / f"rank{i}.{STAMP}.pt.trace.json.gz")
    for i in range(broken):
        (run / f"rank{ranks + i}.{STAMP}.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", ')
    return root / "logdir"


def test_store_round_trip_checksum_and_failure_records(tmp_path):
    store = open_store(str(tmp_path / "store"))
    assert store.put("k.npz", b"payload") and store.get("k.npz") == b"payload" and store.keys() == {"k.npz"}
    path = tmp_path / "store" / "k.npz"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(cache_mod.CorruptSummary, match="checksum"):
        store.get("k.npz")
    assert not path.exists()  # a damaged summary is removed, never served
    assert store.put_failure("k.npz", {"path": "run/a"}, "JSON ends\nearly", attempts=2)
    assert store.failure_keys() == {"k.npz"}
    assert store.failure("k.npz")["reason"] == "JSON ends early" and store.failure("k.npz")["attempts"] == 2
    assert store.put("k.npz", b"again") and store.failure("k.npz") is None  # a summary replaces the failure
    assert not [n for n in os.listdir(tmp_path / "store") if n.startswith(".tmp")]
    assert not open_store("").put("k.npz", b"x") and open_store("").get("k.npz") is None


def test_jobs_ship_paths_not_trace_bytes(tmp_path):
    logdir = rank_logdir(tmp_path, 2)
    jobs = logdir_jobs(str(logdir), discover(logdir))
    assert len(jobs) == 2 and len({j.key for j in jobs}) == 2  # same content, two traces: two keys
    for job in jobs:
        assert len(pickle.dumps(job)) < 2048
        assert all(isinstance(v, (str, int, tuple, dict, type(None))) for v in vars(job).values())
        assert job.identity["path"] == f"job/{job.span}"  # relative to the logdir: the store travels with it


def test_summarize_retries_once_records_failures_and_resumes(tmp_path):
    logdir = rank_logdir(tmp_path, 3, broken=1)
    store = str(tmp_path / "store")
    seen = []
    first = summarize(str(logdir), store, workers=0, progress=lambda d, t: seen.append((d, t)))
    assert (first.total, first.done, first.retried, len(first.failed)) == (4, 3, 1, 1)
    name, reason = first.failed[0]
    assert name == f"job/rank3.{STAMP}.pt.trace.json" and "ends early" in reason
    assert seen[-1] == (4, 4)
    record = open_store(store).failure(next(iter(open_store(store).failure_keys())))
    assert record["attempts"] == 2 and record["identity"]["path"] == name
    again = summarize(str(logdir), store, workers=0)
    assert (again.done, again.already, again.failed_before, again.failed) == (0, 3, 1, [])
    retried = summarize(str(logdir), store, workers=0, retry_failed=True)
    assert (retried.done, len(retried.failed)) == (0, 1)


def never_summarize(*args):
    """A summarize job that fails loudly: the service must not need it when the store has the summaries."""
    return "error", "the trace was read although the store had its summary", False


def test_plugin_serves_a_store_filled_by_summarize_without_reading_traces(tmp_path):
    logdir = rank_logdir(tmp_path, 2, broken=1)
    store = str(tmp_path / "store")
    assert main(["summarize", str(logdir), "--store", store, "--workers", "0"]) == 1  # one trace failed
    service = LogdirService(str(logdir), store=store, workers=0, scan_interval=3600, summarize=never_summarize)
    service.scan()
    runs = service.runs_json()
    run = runs["runs"][0]
    assert run["progress"]["files_done"] == 3 and runs["remote_traces"] is False
    assert [e["file"] for e in run["errors"]] == [f"rank2.{STAMP}.pt.trace.json"]
    assert "ends early" in run["errors"][0]["reason"]
    eff = service.analysis("job", "rank0", "all")
    assert len(eff.activities) > 0 and service.sections("job", "rank1", "all", "overview")[0][1].error == ""


def test_local_pool_engine_and_export_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'tb_gpuinsight[parquet]')")
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(corpus_path("param/dlrm_8ranks"), logdir / "dlrm")
    store, out = str(tmp_path / "store"), str(tmp_path / "parquet")
    report = summarize(str(logdir), store, engine="local", workers=2)
    assert report.done == 8 and not report.failed
    assert {s["pid"] for s in report.stats} and os.getpid() not in {s["pid"] for s in report.stats}
    assert main(["export-parquet", store, out, "--logdir", str(logdir)]) == 0
    kernels = pd.read_parquet(os.path.join(out, "kernels.parquet"))
    steps = pd.read_parquet(os.path.join(out, "steps.parquet"))
    collectives = pd.read_parquet(os.path.join(out, "collectives.parquet"))
    ops = pd.read_parquet(os.path.join(out, "ops.parquet"))
    assert sorted(kernels["rank"].unique()) == list(range(8)) and set(kernels["run"]) == {"dlrm"}
    assert len(steps) == 8 and len(ops) > 0
    assert set(collectives["rank"]) == set(range(8)) and "all_reduce" in set(collectives["kind"])
    # the export is the store's analyses: per rank, the rows of that rank's summary
    from tb_gpuinsight.store.envelope import load_summary

    per_rank = {}
    for _, data in open_store(store).summaries():
        summary = load_summary(data)
        per_rank[summary.identity["path"].split("/")[-1].split("_")[0]] = len(summary.eff.activities)
    assert kernels.groupby("worker").size().rename(lambda w: w.split("_")[0]).to_dict() == per_rank
