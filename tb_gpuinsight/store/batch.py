"""Summarise a whole logdir into a store: every span not summarised yet, each failure retried once and then
recorded in the store with its one-line reason. A rerun resumes: what the store holds (summaries, and failures
unless `retry_failed`) is skipped."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..logdir import discover, relative_name
from ..settings import default_cache_dir
from ..trace.source import is_url
from . import engines
from .jobs import Job, logdir_jobs
from .summaries import open_store

RETRIES = 1


@dataclass
class BatchReport:
    """What a `summarize` run did. `stats` holds each summarised file's seconds, worker pid and peak RSS."""
    store: str
    total: int = 0
    already: int = 0
    failed_before: int = 0
    done: int = 0
    failed: List[Tuple[str, str]] = field(default_factory=list)  # (trace name, reason)
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # failed in an earlier run: (trace, reason)
    retried: int = 0
    seconds: float = 0.0
    stats: List[Dict[str, float]] = field(default_factory=list)
    indexed: int = 0  # runs of several workers with a rank index written or found up to date

    def lines(self) -> List[str]:
        """Human lines for the command line."""
        out = [f"store     {self.store}",
               f"traces    {self.total}: {self.done} summarised now, {self.already} already in the store, "
               f"{len(self.failed)} failed" + (f", {self.failed_before} failed before (--retry-failed to try again)"
                                               if self.failed_before else ""),
               f"time      {self.seconds:.1f} s" + (f" ({self.retried} retried)" if self.retried else "")]
        if self.stats:
            peak = max(s["peak_rss"] for s in self.stats)
            out.append(f"per file  {sum(s['seconds'] for s in self.stats) / len(self.stats):.2f} s mean; "
                       f"peak worker RSS {peak / 2**20:.0f} MiB")
        if self.indexed:
            out.append(f"ranks     rank index of {self.indexed} multi-rank run(s) written beside the summaries")
        out += [f"failed    {name}: {reason}" for name, reason in self.failed]
        out += [f"skipped   {name}: failed before: {reason}" for name, reason in self.skipped]
        return out


def summarize(logdir: str, store: Optional[str] = None, engine: str = "local", scheduler: Optional[str] = None,
              workers: Optional[int] = None, extra_args: Sequence[str] = (), max_trace_gb: Optional[float] = None,
              retry_failed: bool = False, progress: Optional[Callable[[int, int], None]] = None) -> BatchReport:
    """Summarise every span of `logdir` (a path or URL) not yet in `store` (a path or URL; default the plugin's
    cache directory, so a TensorBoard on this machine serves the result at once)."""
    root = logdir if is_url(logdir) else os.path.abspath(os.path.expanduser(logdir))
    target = open_store(store or default_cache_dir())
    url = target.url if target.remote else target.directory
    report = BatchReport(store=url)
    start = time.perf_counter()
    runs = discover(root)
    jobs = logdir_jobs(root, runs, extra_args, max_trace_gb)
    report.failed += [(relative_name(root, e.path), e.reason or "unreadable") for r in runs for e in r.unreadable]
    todo = _todo(target, jobs, retry_failed, report)
    total, done = len(todo), [0]

    def finished(job: Job, result: engines.Result) -> None:
        kind, reason, stats = result
        if kind == "ok":
            report.done += 1
            report.stats.append(stats)
        else:
            failures[job] = reason
        done[0] += 1
        if progress:
            progress(done[0], total)

    for attempt in range(1, RETRIES + 2):
        failures: Dict[Job, str] = {}
        engines.run(engine, url, todo, finished, workers, scheduler, attempt)
        if attempt > RETRIES or not failures:
            break
        todo = list(failures)
        done[0] -= len(todo)
        report.retried += len(todo)
    for job, reason in failures.items():
        target.put_failure(job.key, job.identity, reason, attempts=RETRIES + 1)
        report.failed.append((job.identity["path"], reason))
    _index_runs(target, root, runs, extra_args, report)
    report.seconds = time.perf_counter() - start
    return report


def _index_runs(target, root: str, runs, extra_args: Sequence[str], report: BatchReport) -> None:
    """Each run's rank index beside the summaries (the Distributed tab then reads one object per run)."""
    from .rank_table import index_logdir

    several = [run for run in runs if len(run.workers) > 1]
    report.indexed = len(several) - len(index_logdir(target, root, several, extra_args))


def _todo(target, jobs: List[Job], retry_failed: bool, report: BatchReport) -> List[Job]:
    have, failed = target.keys(), target.failure_keys()
    report.total = len(jobs)
    todo = []
    for job in jobs:
        if job.key in have:
            report.already += 1
        elif job.key in failed and not retry_failed:
            report.failed_before += 1
            record = target.failure(job.key) or {}
            report.skipped.append((job.identity.get("path", job.path), str(record.get("reason", "unknown reason"))))
        else:
            todo.append(job)
    return todo
