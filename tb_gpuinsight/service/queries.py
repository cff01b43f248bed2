"""What a `LogdirService` answers about its runs and spans: their states as JSON, and the spans a request's
(run, worker, span) selection names."""
from __future__ import annotations

import os
from typing import Any, Dict, List

from ..logdir import FileEntry, capture_label
from ..span_state import ALL_SPANS, ALL_WORKERS, NotFound, NotReady, RunState, SpanFailed, SpanState
from ..trace.source import is_url
from ..trace.text import safe_text


class Queries:
    """Runs and span states, read under the service's lock (a mixin of `LogdirService`)."""

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


    def span_entry(self, run: str, worker: str, span: str) -> FileEntry:
        """The trace file of one span (never a path taken from a request)."""
        if span == ALL_SPANS:
            raise NotFound("choose one span to download its trace")
        return self.span_states(run, worker, span)[0].entry
