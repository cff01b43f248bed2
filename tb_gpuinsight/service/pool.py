"""The analysis pool of a `LogdirService`: spans submitted to worker processes, their outcomes (a dead process
blames only its span), and the pool killed when the service stops."""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Tuple

from ..span_state import NotReady, SpanState
from ..store.worker import supervised_job
from .follow import SETTLE_SECONDS

MAX_WORKER_DEATHS = 2  # a span whose analysis killed its process this often waits for its file to change


class AnalysisPool:
    """Submitting spans to the worker processes and taking in their outcomes (a mixin of `LogdirService`)."""

    def _submit(self, span: SpanState) -> None:
        if span.status != "pending":  # dropped, or taken by another path meanwhile
            return
        span.status = "loading"
        job = (self.summarize, span.entry.path, self.extra_args, [e.path for e in span.execution_traces],
               [e.path for e in span.tensor_traces], span.identity, self.max_trace_gb, span.model_config)
        if self.workers <= 0:
            self._finish(span, job[0](*job[1:]))
            return
        with self._lock:
            pool = self._pool_now()
        try:
            future = pool.submit(supervised_job, self._marker_dir, span.key, *job)
        except (concurrent.futures.process.BrokenProcessPool, RuntimeError):
            with self._lock:  # broke between our check and the submit: the next scan uses a new pool
                if self._pool is pool:
                    self._pool = None
                span.status = "pending"
            self._wake.set()
            return
        span.future = future
        future.add_done_callback(lambda f, s=span, p=pool: self._finish(s, self._outcome(f, s, p)))

    def background(self, key: str, func: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        """`func(*args)` off the request threads: in an analysis worker process (marked with `key`, so that a
        death is blamed on it), or on the service's own thread when it has no worker processes. For a view's build
        that reads a trace (the Execution graph), which no request may do itself."""
        if self.workers <= 0:
            with self._lock:
                if self._thread_pool is None:
                    self._thread_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpuinsight-build")
                return self._thread_pool.submit(func, *args)
        with self._lock:
            pool = self._pool_now()
        try:
            return pool.submit(supervised_job, self._marker_dir, key, func, *args)
        except (concurrent.futures.process.BrokenProcessPool, RuntimeError):
            with self._lock:  # broke (or stopped) since: the next call starts a fresh pool
                if self._pool is pool:
                    self._pool = None
            raise NotReady("the analysis processes are restarting") from None

    def _pool_now(self) -> concurrent.futures.ProcessPoolExecutor:
        """The worker pool, (re)built when missing."""
        if self._pool is None:
            if not self._marker_dir or not os.path.isdir(self._marker_dir):
                self._marker_dir = tempfile.mkdtemp(prefix="tb-gpuinsight-running-")
            # spawn, not fork: TensorBoard is multi-threaded and forking it can deadlock.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            if not self._exit_hook:
                self._exit_hook = _at_exit(lambda: self.stop(join_timeout=0.0))  # exit without waiting for a scan
        return self._pool

    def _outcome(self, future: concurrent.futures.Future, span: SpanState,
                 pool: concurrent.futures.ProcessPoolExecutor) -> Tuple[str, Any, bool]:
        """A finished future's result; when its pool broke, blame only the span whose process died and send
        the others back to the queue (on a fresh pool)."""
        if self._stop.is_set():  # killed by `stop`, not by its trace
            return "cancelled", None, False
        try:
            return future.result()
        except concurrent.futures.CancelledError:  # its span was dropped, or the service stopped
            return "cancelled", None, False
        except concurrent.futures.process.BrokenProcessPool:
            pass
        except Exception as exc:  # the result could not come back (e.g. it did not unpickle)
            return "error", f"analysis process failed: {type(exc).__name__}: {exc}"[:300], False
        with self._lock:
            if self._pool is pool:
                self._pool = None
            if id(pool) not in self._culprits:  # told once per broken pool: its first future reads the markers
                self._culprits[id(pool)] = self._dead_spans(pool)
            culprits = self._culprits[id(pool)]
            if span.key not in culprits:
                return "retry", None, False
            span.deaths += 1
            if span.deaths < MAX_WORKER_DEATHS:
                return "retry", None, False
        return "error", (f"the analysis process died, likely out of memory; size {span.entry.size / 1e6:.0f} MB "
                         f"(not retried until the file changes)"), False

    def _dead_spans(self, pool: concurrent.futures.ProcessPoolExecutor) -> set:
        """Keys of the spans that processes of a broken pool were analysing when they died. Called while the pool
        reports the break, before it stops its surviving processes: the dead ones are those with an exit code.
        When that cannot be told, every span that was running is a suspect."""
        running: Dict[int, str] = {}
        for name in os.listdir(self._marker_dir) if os.path.isdir(self._marker_dir) else []:
            try:
                with open(os.path.join(self._marker_dir, name), encoding="utf-8") as f:
                    running[int(name)] = f.read()
                os.unlink(os.path.join(self._marker_dir, name))
            except (OSError, ValueError):
                continue
        procs = getattr(pool, "_processes", None) or {}
        dead = {pid for pid, proc in procs.items() if proc.exitcode not in (None, -signal.SIGTERM)}
        if dead & set(running):
            return {key for pid, key in running.items() if pid in dead}
        return set(running.values())

    def _finish(self, span: SpanState, result: Tuple[str, Any, bool]) -> None:
        kind, payload, incomplete = result
        if kind == "cancelled":  # nothing was learnt about the file: no record, analysed again if still wanted
            with self._lock:
                span.future, span.status = None, "pending"
            return
        # Store I/O (a network round trip on an object store) happens before taking the lock.
        if kind == "ok" and not self.store.put(span.key, payload):
            self._remember(span.key, self._rated(payload, span))  # store not writable: keep in memory
        age = time.time() - span.entry.mtime_ns / 1e9
        waiting = kind == "error" and incomplete and age < SETTLE_SECONDS
        if kind == "error" and not waiting:
            self.store.put_failure(span.key, span.identity, payload)
        with self._lock:
            span.future = None
            self.generation += 1
            if kind == "retry":
                span.status, span.reason = "pending", ""
                self._wake.set()
            elif kind == "ok":
                span.status, span.reason = "ready", ""
            elif waiting:
                span.status, span.reason = "waiting", f"still being written? {payload}"
            else:
                span.status, span.reason = "error", payload


def _kill_pool(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Drop a pool's queue and end its processes now: an analysis in flight is not waited for."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError, AttributeError):
            pass


def _at_exit(hook: Callable[[], None]) -> bool:
    """Run `hook` when the interpreter exits, before concurrent.futures waits for running jobs (its own exit
    hook joins every pool's processes: a TensorBoard that could not bind its port would otherwise linger until
    every analysis in flight finished)."""
    register = getattr(threading, "_register_atexit", None)  # runs before atexit, newest first
    try:
        if register is not None:
            register(hook)
        else:  # pragma: no cover - Python without the hook
            import atexit
            atexit.register(hook)
        return True
    except RuntimeError:  # the interpreter is already shutting down
        return False
