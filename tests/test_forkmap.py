"""A run of many small traces is read on every core (forkmap.py): the same answers as one process, in the same
order, errors raised as in a loop, a dead worker's share finished here, and no SQLite connection crossing a fork.

Forking is only safe from a process that runs no other thread, as the CLI's; a test worker runs threads left by
other tests, so every test that forks runs its code in a fresh Python process (`_fresh`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

from tb_gpuinsight import forkmap
from tb_gpuinsight.forkmap import run_workers
from tb_gpuinsight.trace import parallel
from tb_gpuinsight.trace.parallel import forking_is_safe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HELPERS = '''
import json, multiprocessing, os
from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.forkmap import fork_map

def pid_and_square(x):
    return os.getpid(), x * x

def fail_on_seven(x):
    if x == 7:
        raise TraceError("/r/w7.pt.trace.json", "not JSON", offset=12, incomplete=True)
    return x

def die_in_a_worker(x):
    if x == 3 and multiprocessing.parent_process() is not None:
        os._exit(9)  # killed, as by the out-of-memory killer: no exception reaches the pool
    return x + 100
'''


def _fresh(code: str, tmp_path=None, env=None):
    """Run `code` (after HELPERS) in a new single-threaded Python process; the JSON it prints last."""
    script = HELPERS + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path or ROOT), capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_results_come_back_in_order_from_other_processes():
    got = _fresh('''
        got = fork_map(pid_and_square, range(40), workers=2)
        print(json.dumps({"squares": [sq for _, sq in got], "others": len({p for p, _ in got} - {os.getpid()})}))
    ''')
    assert got["squares"] == [x * x for x in range(40)]
    assert got["others"] >= 1  # the work was done in forked workers


def test_an_error_of_one_job_is_raised_as_in_a_loop():
    # the error crosses the process boundary with its fields (a TraceError has no one-argument constructor)
    got = _fresh('''
        try:
            fork_map(fail_on_seven, range(20), workers=2)
        except TraceError as exc:
            print(json.dumps([exc.path, exc.reason, exc.offset, exc.incomplete]))
    ''')
    assert got == ["/r/w7.pt.trace.json", "not JSON", 12, True]


def test_a_dead_worker_leaves_the_rest_to_this_process():
    got = _fresh('''
        print(json.dumps(fork_map(die_in_a_worker, range(20), workers=2)))
    ''')
    assert got == [x + 100 for x in range(20)]


def test_workers_only_for_many_small_traces_where_forking_is_safe(monkeypatch):
    monkeypatch.delenv(forkmap.WORKERS_ENV, raising=False)
    monkeypatch.setattr(forkmap, "_cores", lambda: 4)
    monkeypatch.setattr(parallel, "forking_is_safe", lambda: True)
    small = lambda n, size=4096, name="w.pt.trace.json": [(f"{i}/{name}", size) for i in range(n)]  # noqa: E731
    assert run_workers(small(1000)) == 4
    assert run_workers(small(forkmap.MIN_JOBS - 1)) == 1  # a few traces: not worth starting processes
    big = forkmap.BIG_TRACE_BYTES
    assert run_workers(small(999) + [("r/w.pt.trace.json", big)]) == 1  # big ones fan out their own decode
    assert run_workers(small(999) + [("r/w.pt.trace.json.gz", big // 8)]) == 1  # gzip: about 10x that in JSON
    assert run_workers(small(999) + [("r/w.pt.trace.json", big // 8)]) == 4
    monkeypatch.setenv(forkmap.WORKERS_ENV, "3")
    assert run_workers(small(2)) == 2 and run_workers(small(1000)) == 3
    monkeypatch.setattr(parallel, "forking_is_safe", lambda: False)
    assert run_workers(small(1000)) == 1


def test_forking_is_unsafe_while_another_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:  # a lock that thread holds at the fork would stay held in the child
        assert not forking_is_safe()
    finally:
        stop.set()
        other.join()
    assert _fresh('print(json.dumps(__import__("tb_gpuinsight.trace.parallel").trace.parallel.forking_is_safe()))') is True


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


def test_ranks_report_and_critical_path_of_a_big_run_match_one_process(tmp_path):
    """The multi-rank views read 24 ranks in 2 processes: equal to reading them here, rank by rank."""
    run = _tiny_run(tmp_path, 24)
    code = f'''
        import tb_gpuinsight
        from tb_gpuinsight import forkmap
        used, real = [], forkmap.fork_map
        forkmap.fork_map = lambda fn, items, workers=None: used.append(workers) or real(fn, items, workers)
        run = {str(run)!r}
        ranks = tb_gpuinsight.ranks(run).to_dict()
        paths = tb_gpuinsight.critical_path(run)
        report = tb_gpuinsight.report(run)
        print(json.dumps({{"used": used, "answers": [json.dumps(ranks, sort_keys=True, default=str),
                          paths.steps.to_json(), paths.segments.to_json(),
                          json.dumps(report, sort_keys=True, default=str)]}}))
    '''
    one = _fresh(code, tmp_path, {forkmap.WORKERS_ENV: "1"})
    two = _fresh(code, tmp_path, {forkmap.WORKERS_ENV: "2"})
    assert one["answers"] == two["answers"]
    assert len(json.loads(two["answers"][0])["ranks"]) == 24
    # ranks, critical_path and the report's Distributed part: on 1 process, then on 2
    assert one["used"] == [1, 1, 1] and two["used"] == [2, 2, 2]


def test_the_estimate_memo_opens_its_own_connection_after_a_fork(tmp_path):
    got = _fresh(f'''
        from tb_gpuinsight.estimate.flops import OpEstimate
        from tb_gpuinsight.estimate.memo import EstimateMemo

        PARENT = os.getpid()
        MEMO = EstimateMemo({str(tmp_path / "memo.sqlite")!r})
        SIG = ("aten::mm", "[[2, 2]]", "", "")
        MEMO.put_many({{SIG: OpEstimate(16.0, "formula", 48.0, "formula", "fp32")}})  # the parent's connection

        def in_a_worker(_):
            found = MEMO.get_many([SIG])
            return found[SIG].flops, MEMO._pid == os.getpid() != PARENT

        print(json.dumps(fork_map(in_a_worker, ["a", "b", "c"], workers=2)))
    ''', tmp_path)
    assert all(flops == 16.0 and own for flops, own in got)
