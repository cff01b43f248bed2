"""The plugin's model of a logdir: runs discovered in the background, spans analysed on a bounded pool of worker
processes, summaries kept in a summary store (`tb_gpuinsight.store`: the local cache directory by default, or any
fsspec URL) and an LRU in memory. Spans whose summary the store already holds are ready without reading the trace.

Span states (`span_state.py`): "pending" (queued), "loading", "waiting" (the file failed to parse but is still
changing, so it is probably being written: retried when it changes or settles), "ready", "error" (with a one-line
reason).
Each scan follows the logdir: a run or span whose trace is gone (deleted, or no longer a trace) is dropped and
what it held in memory released, and a changed file is a new version, analysed again. Nothing here ever writes
into the logdir.
"""
from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

from .analysis.kernels.efficiency import AUTO, Efficiency, combine
from .errors import GpuInsightError
from .estimate.devices import DeviceSpec, load_datasheet
from .logdir import FileEntry, Run, capture_label, discover, following_symlinks, inside, logdir_problem
from .sections import Section
from .settings import default_cache_dir
from .store import envelope as cache_mod
from .store import open_store
from .store.rank_refresh import IndexRefresher
from .store import verified
from .store.jobs import span_job
from .store.worker import augment_file, summarize_file, supervised_job  # the jobs a worker process runs
from .span_state import ALL_SPANS, ALL_WORKERS, NotFound, NotReady, RunState, SpanFailed, SpanState
from .trace.source import is_url
from .trace.text import safe_text

SETTLE_SECONDS = 30.0  # a failing file unchanged this long is reported broken, not "being written"
MAX_WORKER_DEATHS = 2  # a span whose analysis killed its process this often waits for its file to change

log = logging.getLogger(__name__)


class LogdirService:
    """Runs of one logdir, their loading state and their analyses."""

    def __init__(self, logdir: str, cache_dir: Optional[str] = None, devices_file: Optional[str] = None,
                 extra_args: Sequence[str] = (), workers: Optional[int] = None, scan_interval: float = 10.0,
                 max_loaded: int = 32, max_trace_gb: Optional[float] = None,
                 summarize: Optional[Callable[..., Tuple[str, Any, bool]]] = None, store: Optional[str] = None,
                 deferred: bool = False, follow_symlinks: Optional[bool] = None) -> None:
        """`summarize`: the worker-process job that turns a trace into a summary (default `summarize_file`; a
        module-level function with its signature, so that spawned workers can import it). `store`: the summary
        store's URL or path (default `cache_dir`, else the user's cache directory; "" keeps summaries in memory).
        `deferred`: discover runs but analyse nothing until `serve()` is called (TensorBoard builds its plugins
        before it binds its port, and may never serve). `follow_symlinks`: list runs behind symbolic links that
        lead out of the logdir (default: as $TB_GPUINSIGHT_FOLLOW_SYMLINKS says, else skipped)."""
        self.logdir = logdir
        self.follow_symlinks = following_symlinks() if follow_symlinks is None else follow_symlinks
        self.summarize = summarize or summarize_file
        self.store_error = ""  # a store that cannot be opened (its protocol's package missing): said, not fatal
        try:
            self.store = open_store(store if store is not None else
                                    cache_dir if cache_dir is not None else default_cache_dir())
        except GpuInsightError as exc:
            self.store, self.store_error = open_store(""), f"summary store: {exc}; summaries are kept in memory"
        self.devices_file = devices_file
        self.extra_args = tuple(extra_args)
        self.max_trace_gb = max_trace_gb  # None: the default cap of each worker (its available memory / 3)
        self.workers = min(os.cpu_count() or 1, 4) if workers is None else workers
        self.scan_interval = scan_interval
        self.max_loaded = max_loaded
        self.runs: Dict[str, RunState] = {}
        self.scan_error = ""
        self.active = False
        self.generation = 0  # bumped whenever a span's state changes: answers computed before are stale
        self._lock = threading.RLock()
        self._loaded: "OrderedDict[str, Efficiency]" = OrderedDict()
        self._sections: Dict[str, Dict[str, Section]] = {}  # by summary key, evicted with `_loaded`
        self._pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
        self._marker_dir = ""
        self._culprits: Dict[int, set] = {}  # by id(broken pool): keys of the spans whose process died
        self._downloads: Dict[str, concurrent.futures.Future] = {}  # augmented traces being written, by span key
        self._scratch = ""  # where augmented traces go when there is no cache directory
        self._download_lock = threading.Lock()  # checks and starts augmented-trace writes, one at a time
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._serving = threading.Event()  # analyses start only once set (at once unless `deferred`)
        if not deferred:
            self._serving.set()
        self._exit_hook = False
        self._thread: Optional[threading.Thread] = None
        self._datasheet: Optional[List[DeviceSpec]] = None
        self.indexes = IndexRefresher(self)  # rank indexes, written in the background once a run's ranks are analysed

    # ------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Scan now and then every `scan_interval` seconds, in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gpuinsight-scan", daemon=True)
            self._thread.start()

    def serve(self) -> None:
        """The server is answering requests: start analysing what discovery found (idempotent, no I/O)."""
        if not self._serving.is_set():
            self._serving.set()
            self._wake.set()

    def stop(self) -> None:
        """Stop scanning and analysing now: queued analyses are dropped and running ones killed."""
        self._stop.set()
        self._wake.set()
        self.indexes.stop()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            _kill_pool(pool)
        for folder in (self._marker_dir, self._scratch):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # the scanner must outlive any bug: log it and scan again next time
                log.exception("gpuinsight: scanning the logdir failed")
            self._wake.wait(self.scan_interval)
            self._wake.clear()

    def datasheet(self) -> List[DeviceSpec]:
        if self._datasheet is None:
            self._datasheet = load_datasheet(self.devices_file)
        return self._datasheet

    # ------------------------------------------------------------------------------------------- scanning

    def scan(self) -> None:
        """Discover runs and spans; queue new or changed spans for analysis."""
        try:
            found = discover(self.logdir, self.follow_symlinks) if self.logdir else []
            self._logdir_problem("" if found or self.runs else logdir_problem(self.logdir))
        except GpuInsightError as exc:
            self._logdir_problem(logdir_problem(self.logdir) or str(exc))
            return
        except OSError as exc:
            self._logdir_problem(f"{self.logdir}: {exc.strerror or exc}")
            return
        stored = (self.store.keys(), self.store.failure_keys())  # two listings per scan, not a request per span
        with self._lock:
            for run in found:
                self._update_run(run, *stored)
            gone = self._forget_gone({run.name for run in found})
            if self.runs:
                self.active = True
            todo = [s for r in self.runs.values() for s in r.spans.values() if s.status == "pending"]
        for span in gone:
            self._release(span)
        if not self._serving.is_set():
            return  # discovered and listed, analysed once the server answers requests
        for span in todo:
            self._submit(span)
        self.indexes.refresh(found, stored[0])  # runs whose ranks are all analysed: their rank index, in the background

    def _update_run(self, run: Run, stored: set, failed: set) -> None:
        state = self.runs.setdefault(run.name, RunState(run.name))
        state.unreadable, state.captures = run.unreadable, run.captures
        versions = [(e.path, e.version) for e in run.memory_snapshots]
        if [(e.path, e.version) for e in state.memory_snapshots] != versions:
            state.memory_snapshots = run.memory_snapshots
            self.generation += 1  # answers that named the run's snapshots are stale
        present = {(worker, span.name) for worker, spans in run.workers.items() for span in spans}
        for ident in [i for i in state.spans if i not in present]:  # its file is gone (or no longer a trace)
            state.gone.append(state.spans.pop(ident))
            self.generation += 1
        for worker, spans in run.workers.items():
            for span in spans:
                job = span_job(self.logdir, run, span, self.extra_args)
                companions = {"execution_traces": span.execution_traces + run.execution_traces,
                              "tensor_traces": span.tensor_traces + run.tensor_traces,
                              "model_config": job.model_config}
                old = state.spans.get((worker, span.name))
                if old is not None and old.key == job.key:
                    self._maybe_retry(old)
                    old.__dict__.update(companions)
                    continue
                new = SpanState(run.name, worker, span.name, span.trace, span.stamp, job.key, **companions,
                                identity=job.identity)
                self.generation += 1
                if job.key in stored:
                    new.status = "ready"
                elif job.key in failed:
                    self._failed_before(new)
                if old is not None:  # the file changed: its old analysis goes, the new version is analysed
                    state.gone.append(old)
                state.spans[(worker, span.name)] = new

    def _forget_gone(self, present: set) -> List[SpanState]:
        """Drop the runs this scan did not find and collect every span dropped by this scan (called with the lock
        held): they answer 404 from now on, and `_release` frees what they held."""
        gone: List[SpanState] = []
        for name in [n for n in self.runs if n not in present]:
            state = self.runs.pop(name)
            gone += list(state.spans.values()) + state.gone
            self.generation += 1
        for state in self.runs.values():
            gone += state.gone
            state.gone = []
        return gone

    def _release(self, span: SpanState) -> None:
        """Free what a dropped span (file deleted or replaced) held: its queued analysis, its analyses in memory
        and its cached augmented trace. Its summary stays in the store: the same file back is ready at once."""
        if span.future is not None:
            span.future.cancel()
        with self._lock:
            for key in [k for k in self._loaded if span.key in k]:
                del self._loaded[key]
            self._sections.pop(span.key, None)
        directory = self.store.directory or self._scratch
        with self._download_lock:
            if directory and span.key not in self._downloads:
                verified.discard(self._download_path(span, directory))
    def _failed_before(self, span: SpanState) -> None:
        """A span the store records as failed (by this server or a `summarize` run) is not analysed again until
        its file changes; the record's reason is the span's."""
        record = self.store.failure(span.key)
        if record is not None:
            span.status, span.reason = "error", record["reason"]

    def _maybe_retry(self, span: SpanState) -> None:
        """A span that failed while its file was still changing gets another try once it settles."""
        if span.status == "waiting" and time.time() - span.entry.mtime_ns / 1e9 > SETTLE_SECONDS:
            span.status = "pending"

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

    def _pool_now(self) -> concurrent.futures.ProcessPoolExecutor:
        """The worker pool, (re)built when missing."""
        if self._pool is None:
            if not self._marker_dir or not os.path.isdir(self._marker_dir):
                self._marker_dir = tempfile.mkdtemp(prefix="tb-gpuinsight-running-")
            # spawn, not fork: TensorBoard is multi-threaded and forking it can deadlock.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            if not self._exit_hook:
                self._exit_hook = _at_exit(self.stop)
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

    def _logdir_problem(self, problem: str) -> None:
        """Keep why the logdir yields no run (the tab shows it); logged once, when it appears or changes."""
        if problem and problem != self.scan_error:
            log.warning("gpuinsight: %s", problem)
        self.scan_error = problem

    # ------------------------------------------------------------------------------------------- queries

    def runs_json(self) -> Dict[str, Any]:
        with self._lock:
            runs = [self._run_json(r) for r in sorted(self.runs.values(), key=lambda r: r.name)]
        # remote_traces: a trace download fetches the trace from object storage first (the UI says how much).
        return {"runs": runs, "scan_interval_s": self.scan_interval,
                "logdir_error": "; ".join(e for e in (self.store_error, self.scan_error) if e) or None,
                "remote_traces": is_url(self.logdir)}

    def _run_json(self, run: RunState) -> Dict[str, Any]:
        spans = list(run.spans.values())
        done = [s for s in spans if s.status in ("ready", "error")]
        workers: Dict[str, List[SpanState]] = {}
        for s in spans:
            workers.setdefault(s.worker, []).append(s)
        statuses = {s.status for s in spans}
        status = ("ready" if statuses <= {"ready", "error"} and "ready" in statuses else
                  "error" if statuses == {"error"} or not spans else "loading")
        errors = [{"file": s.span, "reason": s.reason} for s in spans if s.status == "error"]
        errors += [{"file": os.path.basename(e.path), "reason": e.reason} for e in run.unreadable]
        return {
            "run": run.name, "status": status, "errors": errors,
            "memory_snapshots": [os.path.basename(e.path.rsplit("/", 1)[-1]) for e in run.memory_snapshots],
            "companions": [{"file": capture_label(e.path), "kind": "graph capture"} for e in run.captures],
            "progress": {"files_done": len(done), "files_total": len(spans),
                         "bytes_done": sum(s.entry.size for s in done),
                         "bytes_total": sum(s.entry.size for s in spans)},
            "workers": [{"worker": w, "spans": [s.to_dict() for s in sorted(
                ss, key=lambda s: (s.stamp if s.stamp is not None else s.entry.mtime_ns, s.span))]}
                for w, ss in sorted(workers.items())],
        }

    def run_json(self, run: str) -> Dict[str, Any]:
        """One run as `runs_json` lists it (workers, spans, statuses). Raises NotFound."""
        with self._lock:
            return self._run_json(self._run_named(run))

    def _run_named(self, run: str) -> RunState:
        """The run of that name; a name with invalid UTF-8 bytes also by the U+FFFD a browser sends for them."""
        state = self.runs.get(run)
        if state is None:
            state = next((r for name, r in self.runs.items() if safe_text(name) == run), None)
        if state is None:
            raise NotFound(f"unknown run {run!r}")
        return state

    def memory_snapshots(self, run: str) -> List[FileEntry]:
        """The run's memory snapshot files (`*.pickle[.gz]` beside its traces), in name order. Raises NotFound."""
        with self._lock:
            return list(self._run_named(run).memory_snapshots)

    def span_states(self, run: str, worker: str, span: str) -> List[SpanState]:
        """The spans a (run, worker, span) selection names; span may be "all". Raises NotFound."""
        with self._lock:
            state = self._run_named(run)
            spans = [s for (w, _), s in state.spans.items() if worker in (w, ALL_WORKERS) or safe_text(w) == worker]
            if not spans:
                raise NotFound(f"run {run!r} has no worker {worker!r}")
            if span != ALL_SPANS:
                spans = [s for s in spans if span in (s.span, safe_text(s.span))]
                if not spans:
                    raise NotFound(f"worker {worker!r} of run {run!r} has no span {span!r}")
            return sorted(spans, key=lambda s: (s.stamp if s.stamp is not None else s.entry.mtime_ns, s.span))

    def ready_states(self, run: str, worker: str, span: str) -> List[SpanState]:
        """The analysed spans of a selection: one span, or the ready spans of a worker ("all", at least one).
        Raises NotFound; NotReady while a named span (or a span of "all" with none ready) is still loading;
        SpanFailed when it failed (for "all": when every span failed)."""
        states = self.span_states(run, worker, span)
        pending = [s for s in states if s.status != "ready"]
        ready = [s for s in states if s.status == "ready"]
        if pending and (span != ALL_SPANS or not ready):
            loading = [s for s in pending if s.status != "error"]
            if loading:
                raise NotReady(f"{loading[0].span} is {loading[0].status}")
            raise SpanFailed(f"{pending[0].span}: {pending[0].reason}")
        return ready

    def analysis(self, run: str, worker: str, span: str, dtype: str = AUTO,
                 device_name: Optional[str] = None) -> Efficiency:
        """The rated analysis of one span, or of all ready spans of a worker combined ("all"); `device_name` (a
        datasheet row the user picked) rates every device as that row."""
        ready = self.ready_states(run, worker, span)
        key = "+".join(s.key for s in ready) + "|" + dtype + "|" + (device_name or "")
        with self._lock:
            hit = self._loaded.get(key)
            if hit is not None:
                self._loaded.move_to_end(key)
                return hit
        parts = [self._load(s) for s in ready]
        eff = parts[0] if len(parts) == 1 else combine(parts, self.datasheet())  # "all spans"
        if dtype != AUTO or device_name:  # -- device override (picked in the UI): rated at request time
            eff = eff.rerate(dtype, self.datasheet(), device_name or None)
        self._remember(key, eff)
        return eff

    def sections(self, run: str, worker: str, span: str, name: str) -> List[Tuple[SpanState, Section]]:
        """One view's stored section for each analysed span of a selection (see `ready_states`)."""
        out = []
        for state in self.ready_states(run, worker, span):
            self._load(state)
            with self._lock:
                stored = self._sections.get(state.key, {})
            out.append((state, stored.get(name) or Section(name, error="not in this summary")))
        return out

    def _load(self, span: SpanState) -> Efficiency:
        with self._lock:
            hit = self._loaded.get(span.key)
            if hit is not None and span.key in self._sections:
                self._loaded.move_to_end(span.key)
                return hit
        try:
            data = self.store.get(span.key)
            eff = self._rated(data, span) if data is not None else None
        except cache_mod.CorruptSummary as exc:
            self.store.delete(span.key)
            self._repair(span, str(exc))
        if eff is None:  # evicted from disk meanwhile: analyse again
            self._requeue(span)
            raise NotReady(f"{span.span} is being analysed again (its cached summary went missing)")
        self._remember(span.key, eff)
        return eff

    def _repair(self, span: SpanState, why: str) -> NoReturn:
        """A damaged summary is analysed again, once per version of the file; a second one is an error."""
        with self._lock:
            if span.repaired:
                span.status = "error"
                span.reason = f"its cached summary is damaged again ({why}); check the cache directory"
                self.generation += 1
                raise SpanFailed(f"{span.span}: {span.reason}")
            span.repaired = True
        self._requeue(span)
        raise NotReady(f"{span.span} is being analysed again ({why})")

    def _requeue(self, span: SpanState) -> None:
        with self._lock:
            if span.status == "ready":
                span.status = "pending"
                self.generation += 1
        self._wake.set()

    def _rated(self, data: bytes, span: SpanState) -> Efficiency:
        summary = cache_mod.load_summary(data, span.identity or None)
        with self._lock:
            self._sections[span.key] = summary.sections
        return summary.eff.rerate(AUTO, self.datasheet())

    def _remember(self, key: str, eff: Efficiency) -> None:
        with self._lock:
            self._loaded[key] = eff
            self._loaded.move_to_end(key)
            while len(self._loaded) > self.max_loaded:
                old, _ = self._loaded.popitem(last=False)
                self._sections.pop(old, None)

    def augmented_trace(self, span: SpanState, timeout: float = 900.0) -> str:
        """Path of the augmented trace (gzip) of an analysed span: written once per version of the file, by an
        analysis worker (never in this process, whatever the trace's size), with its size and checksum recorded
        beside it; served from the cache while it matches them, written again when it does not (truncated,
        damaged, or written by a process that died). Raises NotReady while it is still being written after
        `timeout` seconds, SpanFailed when it cannot be."""
        dst = self._download_path(span)
        if not (self.follow_symlinks or is_url(self.logdir) or inside(self.logdir, span.entry.path)):
            raise SpanFailed(f"{span.span}: the trace now lies outside the logdir (a symbolic link): not served")
        with self._download_lock:  # concurrent downloads of one span share one check and one job
            future = self._downloads.get(span.key)
            if future is None:
                if verified.intact(dst):
                    return dst
                verified.discard(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                future = self._write_download(span, dst)
        kind, payload = self._await_download(span, future, timeout)
        if kind != "ok":
            raise SpanFailed(f"{span.span}: cannot write the augmented trace: {payload}")
        return dst

    def _download_path(self, span: SpanState, directory: Optional[str] = None) -> str:
        directory = directory or self.store.directory or self._scratch_dir()
        return os.path.join(directory, span.key[: -len(".npz")] + ".augmented.json.gz")

    def _write_download(self, span: SpanState, dst: str) -> concurrent.futures.Future:
        """Start writing a span's augmented trace (called with the download lock held)."""
        job = (span.entry.path, dst, self.extra_args, self.devices_file, self.max_trace_gb)
        if self.workers <= 0:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_result(augment_file(*job))
            return future
        with self._lock:
            pool = self._pool_now()
        future = pool.submit(supervised_job, self._marker_dir, span.key + "#augmented", augment_file, *job)
        self._downloads[span.key] = future
        future.add_done_callback(lambda f, k=span.key: self._drop_download(k))
        return future

    def _drop_download(self, key: str) -> None:
        with self._download_lock:
            self._downloads.pop(key, None)

    def _await_download(self, span: SpanState, future: concurrent.futures.Future,
                        timeout: float) -> Tuple[str, str]:
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise NotReady(f"{span.span}: the augmented trace is still being written") from None
        except (concurrent.futures.process.BrokenProcessPool, concurrent.futures.CancelledError):
            with self._lock:
                if self._pool is not None and getattr(self._pool, "_broken", False):
                    self._pool = None
            return "error", f"the process writing it died, likely out of memory; size {span.entry.size / 1e6:.0f} MB"

    def _scratch_dir(self) -> str:
        if not self._scratch:
            self._scratch = tempfile.mkdtemp(prefix="tb-gpuinsight-downloads-")
        return self._scratch

    def span_entry(self, run: str, worker: str, span: str) -> FileEntry:
        """The trace file of one span (never a path taken from a request)."""
        if span == ALL_SPANS:
            raise NotFound("choose one span to download its trace")
        return self.span_states(run, worker, span)[0].entry


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
