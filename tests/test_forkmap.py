"""A run of many small traces is read on every core (forkmap.py): the same answers as one process, in the same
order, errors raised as in a loop, a dead worker's share finished here, and no SQLite connection crossing a fork."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading

import pytest

import tb_gpuinsight
from tb_gpuinsight import forkmap
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.forkmap import fork_map, run_workers


def _pid_and_square(x: int):
    return os.getpid(), x * x


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise TraceError("/r/w7.pt.trace.json", "not JSON", offset=12, incomplete=True)
    return x


def _die_in_a_worker(x: int) -> int:
    if x == 3 and multiprocessing.parent_process() is not None:
        os._exit(9)  # killed, as by the out-of-memory killer: no exception reaches the pool
    return x + 100


def test_results_come_back_in_order_from_other_processes():
    got = fork_map(_pid_and_square, range(40), workers=2)
    assert [sq for _, sq in got] == [x * x for x in range(40)]
    assert {pid for pid, _ in got} - {os.getpid()}  # the work was done in forked workers


def test_an_error_of_one_job_is_raised_as_in_a_loop():
    with pytest.raises(TraceError) as caught:
        fork_map(_fail_on_seven, range(20), workers=2)
    # the error crosses the process boundary with its fields (a TraceError has no one-argument constructor)
    assert (caught.value.path, caught.value.reason, caught.value.offset, caught.value.incomplete) == \
        ("/r/w7.pt.trace.json", "not JSON", 12, True)


def test_a_dead_worker_leaves_the_rest_to_this_process():
    assert fork_map(_die_in_a_worker, range(20), workers=2) == [x + 100 for x in range(20)]


def test_workers_only_for_many_small_traces_in_a_single_threaded_process(monkeypatch):
    monkeypatch.delenv(forkmap.WORKERS_ENV, raising=False)
    monkeypatch.setattr(forkmap, "_cores", lambda: 4)
    small = lambda n, size=4096, name="w.pt.trace.json": [(f"{i}/{name}", size) for i in range(n)]  # noqa: E731
    assert run_workers(small(1000)) == 4
    assert run_workers(small(forkmap.MIN_JOBS - 1)) == 1  # a few traces: not worth starting processes
    big = forkmap.BIG_TRACE_BYTES
    assert run_workers(small(999) + [("r/w.pt.trace.json", big)]) == 1  # big ones fan out their own decode
    assert run_workers(small(999) + [("r/w.pt.trace.json.gz", big // 8)]) == 1  # gzip: about 10x that in JSON
    assert run_workers(small(999) + [("r/w.pt.trace.json", big // 8)]) == 4
    monkeypatch.setenv(forkmap.WORKERS_ENV, "3")
    assert run_workers(small(2)) == 2 and run_workers(small(1000)) == 3
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:  # forking a process that runs other threads can deadlock the child
        assert run_workers(small(1000)) == 1
    finally:
        stop.set()
        other.join()


def _tiny_run(root, ranks: int):
    run = root / "run"
    run.mkdir()
    for r in range(ranks):
        events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
                   "dur": 100 + r},
                  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 20},
                  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5,
                   "dur": 5, "args": {"correlation": 1}},
                  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 12, "dur": 50 + r % 7,
                   "args": {"device": 0, "stream": 7, "correlation": 1}}]
        doc = {"distributedInfo": {"rank": r, "world_size": ranks, "backend": "nccl"}, "traceEvents": events}
        (run / f"w{r}.1700000000000000000.pt.trace.json").write_text(json.dumps(doc))
    return run


def test_ranks_report_and_critical_path_of_a_big_run_match_one_process(tmp_path, monkeypatch):
    """The multi-rank views read 24 ranks in 2 processes: equal to reading them here, rank by rank."""
    run = _tiny_run(tmp_path, 24)
    answers, used = {}, []
    real = forkmap.fork_map
    monkeypatch.setattr(forkmap, "fork_map", lambda fn, items, workers=None: used.append(workers) or
                        real(fn, items, workers))
    for workers in ("1", "2"):
        monkeypatch.setenv(forkmap.WORKERS_ENV, workers)
        ranks = tb_gpuinsight.ranks(run).to_dict()
        paths = tb_gpuinsight.critical_path(run)
        report = tb_gpuinsight.report(run)
        answers[workers] = (json.dumps(ranks, sort_keys=True, default=str), paths.steps.to_json(),
                            paths.segments.to_json(), json.dumps(report, sort_keys=True, default=str))
    assert answers["1"] == answers["2"]
    assert used == [1, 1, 1, 2, 2, 2]  # ranks, critical_path and the report's Distributed part, then on 2 cores
    assert len(json.loads(answers["2"][0])["ranks"]) == 24


def _memo_in_a_worker(path: str):
    return _MEMO.get_many([("aten::mm", "[[2, 2]]", "", "")]), _MEMO._pid == os.getpid(), path


_MEMO = None


def test_the_estimate_memo_opens_its_own_connection_after_a_fork(tmp_path):
    global _MEMO
    from tb_gpuinsight.estimate.flops import OpEstimate
    from tb_gpuinsight.estimate.memo import EstimateMemo

    _MEMO = EstimateMemo(str(tmp_path / "memo.sqlite"))
    sig = ("aten::mm", "[[2, 2]]", "", "")
    _MEMO.put_many({sig: OpEstimate(16.0, "formula", 48.0, "formula", "fp32")})  # the parent's connection is open
    try:
        got = fork_map(_memo_in_a_worker, ["a", "b", "c"], workers=2)
    finally:
        _MEMO = None
    assert all(found[sig].flops == 16.0 and own for found, own, _ in got)
