"""Following the logdir: each scan discovers runs and spans, updates what changed, forgets what is gone and
queues new or changed spans for analysis. Nothing here ever writes into the logdir."""
from __future__ import annotations

import logging
import time
from typing import List

from ..errors import GpuInsightError
from ..logdir import Run, discover, logdir_problem
from ..span_state import RunState, SpanState
from ..store import verified
from ..store.jobs import span_job

SETTLE_SECONDS = 30.0  # a failing file unchanged this long is reported broken, not "being written"

log = logging.getLogger(__package__)  # the service's logger, as before the split


class Following:
    """The scan of a `LogdirService` (a mixin: the state lives on the service)."""

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


    def _logdir_problem(self, problem: str) -> None:
        """Keep why the logdir yields no run (the tab shows it); logged once, when it appears or changes."""
        if problem and problem != self.scan_error:
            log.warning("gpuinsight: %s", problem)
        self.scan_error = problem
