"""What to summarise: one job per span, named by its trace's identity, carrying paths only.

The plugin's scanner and the `summarize` command compute the same key for a span (`span_job`), so a store filled by
a batch run is what the plugin serves, and the other way round.
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..logdir import Run, Span, relative_name
from .summaries import open_store, summary_key, trace_identity


@dataclass(frozen=True)
class Job:
    """One span to summarise. Only names and paths (or URLs): a worker reads the files itself, so submitting a
    job ships a few hundred bytes whatever the trace's size."""
    key: str
    run: str
    worker: str
    span: str
    path: str
    size: int
    execution_traces: Tuple[str, ...] = ()
    tensor_traces: Tuple[str, ...] = ()
    extra_args: Tuple[str, ...] = ()
    max_trace_gb: Optional[float] = None
    identity: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def span_job(root: str, run: Run, span: Span, extra_args: Sequence[str] = (),
             max_trace_gb: Optional[float] = None) -> Job:
    """The job of one discovered span: its companions (the span's own, then the run's) and its identity. ET
    shapes change the analysis, so an Execution Trace that appears or changes later makes a new key."""
    ets = span.execution_traces + run.execution_traces
    tts = span.tensor_traces + run.tensor_traces
    et_ids = "|".join(f"{relative_name(root, c.path)}:{c.size}:{c.version}" for c in ets)
    options = "|".join(extra_args) + "|et:" + et_ids
    ident = trace_identity(relative_name(root, span.trace.path), span.trace.size, span.trace.version, options)
    return Job(summary_key(ident), run.name, span.worker, span.name, span.trace.path, span.trace.size,
               tuple(e.path for e in ets), tuple(e.path for e in tts), tuple(extra_args), max_trace_gb, ident)


def logdir_jobs(root: str, runs: Sequence[Run], extra_args: Sequence[str] = (),
                max_trace_gb: Optional[float] = None) -> List[Job]:
    """Every span of every run, as jobs."""
    return [span_job(root, run, span, extra_args, max_trace_gb) for run in runs for span in run.spans()]


def summarize_job(job: Job) -> Tuple[str, Any, bool]:
    """Summarise one job's trace in this process: ("ok", summary bytes, False) or ("error", reason, incomplete)."""
    from ..service import summarize_file

    return summarize_file(job.path, job.extra_args, job.execution_traces, job.tensor_traces, job.identity,
                          job.max_trace_gb)


def summarize_into(store_url: str, job: Job) -> Tuple[str, str, Dict[str, float]]:
    """Worker entry (local pool or Dask worker): read the trace, write its summary to the store, answer
    ("ok", "", stats) or ("error", one-line reason, stats); stats: wall and CPU seconds, this process's peak RSS
    in bytes and its pid. Only this short answer travels back."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    kind, payload, _ = summarize_job(job)
    answer = ("ok", "")
    if kind != "ok":
        answer = ("error", str(payload))
    elif not open_store(store_url).put(job.key, payload):
        answer = ("error", f"cannot write the summary to the store {store_url}")
    stats = {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu, "pid": os.getpid(),
             "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}  # Linux reports KiB
    return answer[0], answer[1], stats


def _cpu_seconds() -> float:
    """CPU time of this thread (a Dask worker's other threads are not the job's), else of the process."""
    usage = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    return usage.ru_utime + usage.ru_stime
