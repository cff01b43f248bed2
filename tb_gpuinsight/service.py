"""The plugin's model of a logdir: runs discovered in the background, spans analysed on a bounded pool of worker
processes, summaries kept in a persistent cache and an LRU in memory.

Span states: "pending" (queued), "loading", "waiting" (the file failed to parse but is still changing, so it is
probably being written: retried when it changes or settles), "ready", "error" (with a one-line reason).
Nothing here ever writes into the logdir.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import cache as cache_mod
from .analysis.efficiency import AUTO, Efficiency, combine
from .errors import GpuInsightError, TraceError
from .estimate.devices import DeviceSpec, load_datasheet
from .logdir import FileEntry, Run, discover
from .sections import Section, SectionContext, build_all

ALL_SPANS = "all"
ALL_WORKERS = "*"  # a selection's worker "all ranks": every worker of the run
SETTLE_SECONDS = 30.0  # a failing file unchanged this long is reported broken, not "being written"


class NotFound(GpuInsightError):
    """A run, worker or span the logdir does not have."""


class NotReady(GpuInsightError):
    """A span that is still loading (or failed: the message says which)."""


@dataclass
class SpanState:
    run: str
    worker: str
    span: str
    entry: FileEntry
    stamp: Optional[int]
    key: str
    status: str = "pending"
    reason: str = ""
    future: Any = None
    execution_traces: List[FileEntry] = field(default_factory=list)  # the span's own, then the run's
    tensor_traces: List[FileEntry] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"span": self.span, "stamp": self.stamp, "status": self.status, "bytes": self.entry.size,
                **({"reason": self.reason} if self.reason else {})}


@dataclass
class RunState:
    name: str
    spans: Dict[Tuple[str, str], SpanState] = field(default_factory=dict)
    unreadable: List[FileEntry] = field(default_factory=list)


def summarize_file(path: str, extra_args: Tuple[str, ...], execution_traces: Sequence[str] = (),
                   tensor_traces: Sequence[str] = ()) -> Tuple[str, Any, bool]:
    """Worker-process entry: ("ok", summary bytes, False) or ("error", reason, incomplete)."""
    from . import load
    from .analysis.efficiency import analyze_trace
    from .analysis.enrich import enrich

    try:
        trace = load(path, extra_args=extra_args)
        enrich(trace, execution_traces)
        eff = analyze_trace(trace)
        sections = build_all(SectionContext(trace, eff, tuple(execution_traces), tuple(tensor_traces)))
        return "ok", cache_mod.to_bytes(eff, cache_mod.meta_dict(trace.meta), sections), False
    except TraceError as exc:
        return "error", str(exc.reason) + (f" (at byte {exc.offset})" if exc.offset is not None else ""), \
            exc.incomplete
    except GpuInsightError as exc:
        return "error", str(exc), False
    except MemoryError:
        return "error", "out of memory while reading this trace", False
    except Exception as exc:  # a bug must not take the server down; say what happened in one line
        return "error", f"internal error: {type(exc).__name__}: {exc}"[:300], False


class LogdirService:
    """Runs of one logdir, their loading state and their analyses."""

    def __init__(self, logdir: str, cache_dir: Optional[str] = None, devices_file: Optional[str] = None,
                 extra_args: Sequence[str] = (), workers: Optional[int] = None, scan_interval: float = 10.0,
                 max_loaded: int = 32) -> None:
        self.logdir = logdir
        self.cache = cache_mod.SummaryCache(cache_dir if cache_dir is not None else cache_mod.default_cache_dir())
        self.devices_file = devices_file
        self.extra_args = tuple(extra_args)
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
        self._pool: Optional[concurrent.futures.Executor] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._datasheet: Optional[List[DeviceSpec]] = None

    # ------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Scan now and then every `scan_interval` seconds, in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gpuinsight-scan", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self._stop.wait(self.scan_interval)

    def datasheet(self) -> List[DeviceSpec]:
        if self._datasheet is None:
            self._datasheet = load_datasheet(self.devices_file)
        return self._datasheet

    # ------------------------------------------------------------------------------------------- scanning

    def scan(self) -> None:
        """Discover runs and spans; queue new or changed spans for analysis."""
        try:
            found = discover(self.logdir) if self.logdir else []
            self.scan_error = ""
        except GpuInsightError as exc:
            self.scan_error = str(exc)
            return
        except OSError as exc:
            self.scan_error = f"{self.logdir}: {exc.strerror or exc}"
            return
        with self._lock:
            for run in found:
                self._update_run(run)
            if self.runs:
                self.active = True
            todo = [s for r in self.runs.values() for s in r.spans.values() if s.status == "pending"]
        for span in todo:
            self._submit(span)

    def _update_run(self, run: Run) -> None:
        state = self.runs.setdefault(run.name, RunState(run.name))
        state.unreadable = run.unreadable
        for worker, spans in run.workers.items():
            for span in spans:
                e = span.trace
                companions = {"execution_traces": span.execution_traces + run.execution_traces,
                              "tensor_traces": span.tensor_traces + run.tensor_traces}
                # ET shapes change the analysis: an ET that appears or changes later makes a new summary.
                ets = "|".join(f"{c.path}:{c.size}:{c.mtime_ns}" for c in companions["execution_traces"])
                key = cache_mod.cache_key(e.path, e.size, e.mtime_ns, "|".join(self.extra_args) + "|et:" + ets)
                old = state.spans.get((worker, span.name))
                if old is not None and old.key == key:
                    self._maybe_retry(old)
                    old.__dict__.update(companions)
                    continue
                new = SpanState(run.name, worker, span.name, e, span.stamp, key, **companions)
                self.generation += 1
                if self.cache.has(key):
                    new.status = "ready"
                state.spans[(worker, span.name)] = new

    def _maybe_retry(self, span: SpanState) -> None:
        """A span that failed while its file was still changing gets another try once it settles."""
        if span.status == "waiting" and time.time() - span.entry.mtime_ns / 1e9 > SETTLE_SECONDS:
            span.status = "pending"

    def _submit(self, span: SpanState) -> None:
        span.status = "loading"
        job = (summarize_file, span.entry.path, self.extra_args, [e.path for e in span.execution_traces],
               [e.path for e in span.tensor_traces])
        if self.workers <= 0:
            self._finish(span, job[0](*job[1:]))
            return
        if self._pool is None:
            # spawn, not fork: TensorBoard is multi-threaded and forking it can deadlock.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
        future = self._pool.submit(*job)
        span.future = future
        future.add_done_callback(lambda f, s=span: self._finish(s, _result(f)))

    def _finish(self, span: SpanState, result: Tuple[str, Any, bool]) -> None:
        kind, payload, incomplete = result
        with self._lock:
            span.future = None
            self.generation += 1
            if kind == "ok":
                if not self.cache.put(span.key, payload):
                    self._remember(span.key, self._rated(payload, span.key))  # cache not writable: keep in memory
                span.status, span.reason = "ready", ""
                return
            age = time.time() - span.entry.mtime_ns / 1e9
            if incomplete and age < SETTLE_SECONDS:
                span.status, span.reason = "waiting", f"still being written? {payload}"
            else:
                span.status, span.reason = "error", payload

    # ------------------------------------------------------------------------------------------- queries

    def runs_json(self) -> Dict[str, Any]:
        with self._lock:
            runs = [self._run_json(r) for r in sorted(self.runs.values(), key=lambda r: r.name)]
        return {"runs": runs, "scan_interval_s": self.scan_interval, "logdir_error": self.scan_error or None}

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
            "progress": {"files_done": len(done), "files_total": len(spans),
                         "bytes_done": sum(s.entry.size for s in done),
                         "bytes_total": sum(s.entry.size for s in spans)},
            "workers": [{"worker": w, "spans": [s.to_dict() for s in sorted(
                ss, key=lambda s: (s.stamp if s.stamp is not None else s.entry.mtime_ns, s.span))]}
                for w, ss in sorted(workers.items())],
        }

    def span_states(self, run: str, worker: str, span: str) -> List[SpanState]:
        """The spans a (run, worker, span) selection names; span may be "all". Raises NotFound."""
        with self._lock:
            state = self.runs.get(run)
            if state is None:
                raise NotFound(f"unknown run {run!r}")
            spans = [s for (w, _), s in state.spans.items() if w == worker or worker == ALL_WORKERS]
            if not spans:
                raise NotFound(f"run {run!r} has no worker {worker!r}")
            if span != ALL_SPANS:
                spans = [s for s in spans if s.span == span]
                if not spans:
                    raise NotFound(f"worker {worker!r} of run {run!r} has no span {span!r}")
            return sorted(spans, key=lambda s: (s.stamp if s.stamp is not None else s.entry.mtime_ns, s.span))

    def ready_states(self, run: str, worker: str, span: str) -> List[SpanState]:
        """The analysed spans of a selection: one span, or the ready spans of a worker ("all", at least one).
        Raises NotFound, or NotReady while a named span (or every span of "all") is not analysed."""
        states = self.span_states(run, worker, span)
        pending = [s for s in states if s.status != "ready"]
        ready = [s for s in states if s.status == "ready"]
        if pending and (span != ALL_SPANS or not ready):
            s = pending[0]
            raise NotReady(f"{s.span}: {s.reason}" if s.status == "error" else f"{s.span} is {s.status}")
        return ready

    def analysis(self, run: str, worker: str, span: str, dtype: str = AUTO) -> Efficiency:
        """The rated analysis of one span, or of all ready spans of a worker combined ("all")."""
        ready = self.ready_states(run, worker, span)
        key = "+".join(s.key for s in ready) + "|" + dtype
        with self._lock:
            hit = self._loaded.get(key)
            if hit is not None:
                self._loaded.move_to_end(key)
                return hit
        parts = [self._load(s) for s in ready]
        eff = parts[0] if len(parts) == 1 else combine(parts, self.datasheet())  # "all spans"
        if dtype != AUTO:
            eff = eff.rerate(dtype, self.datasheet())
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
        data = self.cache.get(span.key)
        if data is None:  # evicted from disk meanwhile: analyse again
            with self._lock:
                span.status = "pending"
            raise NotReady(f"{span.span} is being analysed again (its cached summary went missing)")
        eff = self._rated(data, span.key)
        self._remember(span.key, eff)
        return eff

    def _rated(self, data: bytes, key: str) -> Efficiency:
        summary = cache_mod.load_summary(data)
        with self._lock:
            self._sections[key] = summary.sections
        return summary.eff.rerate(AUTO, self.datasheet())

    def _remember(self, key: str, eff: Efficiency) -> None:
        with self._lock:
            self._loaded[key] = eff
            self._loaded.move_to_end(key)
            while len(self._loaded) > self.max_loaded:
                old, _ = self._loaded.popitem(last=False)
                self._sections.pop(old, None)

    def span_entry(self, run: str, worker: str, span: str) -> FileEntry:
        """The trace file of one span (never a path taken from a request)."""
        if span == ALL_SPANS:
            raise NotFound("choose one span to download its trace")
        return self.span_states(run, worker, span)[0].entry


def _result(future: concurrent.futures.Future) -> Tuple[str, Any, bool]:
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        return "error", "analysis cancelled", True
    except Exception as exc:  # a worker process died (killed, out of memory)
        return "error", f"analysis process failed: {type(exc).__name__}: {exc}"[:300], False
