"""Where the summarise map runs: a local pool of processes, or a Dask cluster.

Both run `worker.summarize_into(store_url, job)` on a worker: the worker reads the trace by its path or URL and writes
the summary to the store; the client submits jobs (names and paths) and receives (status, one-line reason, stats).
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Dict, Optional, Sequence, Tuple

from ..errors import ConfigError
from ..trace.parallel import WORKERS_ENV
from .jobs import Job
from .worker import summarize_into

Result = Tuple[str, str, Dict[str, float]]
OnResult = Callable[[Job, Result], None]
ENGINES = ("local", "dask")


def run(engine: str, store_url: str, jobs: Sequence[Job], on_result: OnResult, workers: Optional[int] = None,
        scheduler: Optional[str] = None, attempt: int = 1) -> None:
    """Summarise `jobs` into the store on `engine`, calling `on_result` as each finishes (in this thread)."""
    if not jobs:
        return
    if engine == "local":
        _run_local(store_url, jobs, on_result, workers)
    elif engine == "dask":
        _run_dask(store_url, jobs, on_result, workers, scheduler, attempt)
    else:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def _run_local(store_url: str, jobs: Sequence[Job], on_result: OnResult, workers: Optional[int]) -> None:
    if workers is not None and workers <= 0:  # in this process (tests, debugging)
        for job in jobs:
            on_result(job, summarize_into(store_url, job))
        return
    todo: "queue.Queue[Optional[Job]]" = queue.Queue()
    done: "queue.Queue[Tuple[Job, Result]]" = queue.Queue()
    for job in jobs:
        todo.put(job)
    count = max(1, min(workers or 1, len(jobs)))
    for _ in range(count):
        todo.put(None)  # one stop mark per worker
    pool = [_LocalWorker(store_url, todo, done) for _ in range(count)]
    finished = False
    try:
        for _ in range(len(jobs)):
            on_result(*done.get())
        finished = True
    finally:
        if not finished:  # interrupted: no further job starts, the running ones end now
            _drain(todo, count)
        for worker in pool:
            worker.stop(kill=not finished)


def _drain(todo: "queue.Queue", marks: int) -> None:
    try:
        while True:
            todo.get_nowait()
    except queue.Empty:
        pass
    for _ in range(marks):
        todo.put(None)


# A worker is a fresh interpreter started from this package (never from the caller's script: multiprocessing's
# spawn re-runs the main script in every worker, so a plain script calling `summarize()` without an
# `if __name__ == "__main__":` guard would start workers that start workers).
WORKER_CODE = "from tb_gpuinsight.store.engines import serve; serve()"


class _LocalWorker:
    """One worker process fed by a thread: takes jobs from `todo` until a stop mark, answers into `done`. A
    worker that dies is replaced, and its job answered with why it died; one that cannot start fails the jobs
    it takes with that reason (never "out of memory")."""

    def __init__(self, store_url: str, todo: "queue.Queue", done: "queue.Queue") -> None:
        self.store_url, self.todo, self.done = store_url, todo, done
        self.proc: Optional[subprocess.Popen] = None
        self.thread = threading.Thread(target=self._loop, name="tb-gpuinsight-summarize", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.todo.get()
            if job is None:
                return
            self.done.put((job, self._run(job)))

    def _run(self, job: Job) -> Result:
        started = self._ensure_started()
        if started:
            return "error", started, {}
        try:
            _send(self.proc.stdin, (self.store_url, job))
            answer = _receive(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError):
            answer = None
        if answer is None:
            return "error", self._death(), {}
        return answer

    def _ensure_started(self) -> str:
        """Start the process if none runs: "" when ready, else why it could not start."""
        if self.proc is not None and self.proc.poll() is None:
            return ""
        if self.proc is not None:
            self.stderr.close()
        self.stderr = tempfile.TemporaryFile()
        # Workers load traces side by side: each decodes its own on one process unless the user asked otherwise.
        env = {WORKERS_ENV: "1", **os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER_CODE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        try:
            if _receive(self.proc.stdout) == READY:
                return ""
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        return "could not start an analysis process: " + self._death(started=False)

    def _death(self, started: bool = True) -> str:
        """Why the process ended without answering (it is reaped here)."""
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code < 0 and started:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            likely = ", likely out of memory" if -code == signal.SIGKILL else ""
            return f"the analysis process was killed by {name}{likely}"
        return f"the analysis process exited with code {code}" + (f": {self._last_error()}" if self._last_error()
                                                                   else "")

    def _last_error(self) -> str:
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read()[-4000:].decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else ""

    def stop(self, kill: bool = False) -> None:
        """End the process: its stdin closes and it leaves its loop (`kill`: at once)."""
        proc = self.proc
        if proc is None:
            return
        try:
            if kill:
                proc.kill()
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        self.stderr.close()


READY = ("ready",)


def serve() -> None:
    """A worker process's loop: jobs (framed pickles) on stdin, answers on the original stdout; anything the
    analysis prints goes to stderr, so that it never mixes with the answers."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _send(out, READY)
    while True:
        try:
            store_url, job = _receive(sys.stdin.buffer)
        except EOFError:
            return
        try:
            answer = summarize_into(store_url, job)
        except Exception as exc:  # noqa: BLE001 - a bug in one job must not end the worker
            answer = "error", f"{type(exc).__name__}: {exc}"[:300], {}
        _send(out, answer)


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the other side closed the pipe")
    size = struct.unpack("<Q", head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed the pipe")
    return pickle.loads(data)


def _outcome(future) -> Result:
    try:
        return future.result()
    except Exception as exc:  # the answer could not come back, or a Dask worker was lost
        return "error", f"worker failed: {type(exc).__name__}: {exc}"[:300], {}


def _run_dask(store_url: str, jobs: Sequence[Job], on_result: OnResult, workers: Optional[int],
              scheduler: Optional[str], attempt: int) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("--engine dask needs dask.distributed: pip install 'tb_gpuinsight[cluster]'") from None
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="30s")
        else:  # a cluster of this machine's processes, for the duration of the run
            cluster = LocalCluster(n_workers=workers or 1, processes=True, threads_per_worker=1,
                                   dashboard_address=None)
            client = Client(cluster)
    except OSError as exc:
        raise ConfigError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
    try:
        # Keys name the attempt: a retry must not be answered with the failed attempt's cached result.
        futures = client.map(summarize_into, [store_url] * len(jobs), list(jobs),
                             key=[f"tb-gpuinsight-summarize-{attempt}-{job.key}" for job in jobs], pure=False)
        by_key = {future.key: job for future, job in zip(futures, jobs)}
        for future in as_completed(futures):
            on_result(by_key[future.key], _outcome(future))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
