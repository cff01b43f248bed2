"""Where the summarise map runs: a local pool of processes, or a Dask cluster.

Both run `jobs.summarize_into(store_url, job)` on a worker: the worker reads the trace by its path or URL and writes
the summary to the store; the client submits jobs (names and paths) and receives (status, one-line reason, stats).
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
from typing import Callable, Dict, Optional, Sequence, Tuple

from ..errors import ConfigError
from .jobs import Job, summarize_into

Result = Tuple[str, str, Dict[str, float]]
OnResult = Callable[[Job, Result], None]
ENGINES = ("local", "dask")
_DIED = "the analysis process died, likely out of memory"


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
    # spawn: a clean interpreter per worker, as the plugin's pool does.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers or 1, mp_context=context) as pool:
        futures = {pool.submit(summarize_into, store_url, job): job for job in jobs}
        for future in concurrent.futures.as_completed(futures):
            on_result(futures[future], _outcome(future))


def _outcome(future) -> Result:
    try:
        return future.result()
    except concurrent.futures.process.BrokenProcessPool:
        # Every unfinished job of a broken pool lands here; the caller's retry runs them again on a new pool.
        return "error", _DIED, {}
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
