"""The traces of a big run analysed on every core: one forked process per core, each reading whole traces.

A run of thousands of ranks is thousands of small, independent jobs (load, analyse, build the sections), each a few
milliseconds of Python: one process takes minutes where the machine's cores together take a fraction. Big traces are
left to run one after another here, because each one fans its own decode out over the cores (trace/fanout.py) and
several at once would hold several traces' memory.

Forked workers start with this process's imports and datasheet, so a job pays nothing to set up; results come back
pickled, in the order of the inputs. Fork is only used where it is safe: a process that runs no other thread and is
no pool's worker itself (TensorBoard's, a user's application and the plugin's pool analyse one trace at a time).
"""
from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

T = TypeVar("T")
R = TypeVar("R")

WORKERS_ENV = "TB_GPUINSIGHT_RUN_WORKERS"
MAX_WORKERS = 8
MIN_JOBS = 16  # below this, starting the workers costs about what they save
BIG_TRACE_BYTES = 64 << 20  # JSON text of a trace read alone: several at once would hold several big traces


def run_workers(files: Sequence[Tuple[str, int]]) -> int:
    """Processes to read `files` [(path, size)], one independent trace job each (1: here, one after another):
    $TB_GPUINSIGHT_RUN_WORKERS when set, else the cores this process may use (up to MAX_WORKERS) for MIN_JOBS or
    more traces none of which likely holds BIG_TRACE_BYTES of JSON (a gzipped file's size times GZIP_RATIO), in a
    single-threaded process that is no pool's worker."""
    from .trace.parallel import GZIP_RATIO, forking_is_safe

    jobs = len(files)
    if jobs < 2 or not forking_is_safe():
        return 1
    try:
        wanted = int(os.environ[WORKERS_ENV])
    except (KeyError, ValueError):
        text = max(size * (GZIP_RATIO if str(path).endswith(".gz") else 1) for path, size in files)
        if jobs < MIN_JOBS or text >= BIG_TRACE_BYTES:
            return 1
        wanted = MAX_WORKERS
    return max(1, min(wanted, _cores(), jobs))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fork_map(fn: Callable[[T], R], items: Sequence[T], workers: Optional[int] = None) -> List[R]:
    """`[fn(x) for x in items]`, computed by `workers` forked processes (`run_workers` says how many).
    `fn` must be picklable by reference (a module-level function or a functools.partial of one); an exception
    raised by `fn` is raised here as it would be in a loop. A worker that dies (killed, out of memory) leaves the
    remaining items to this process, one after another."""
    items = list(items)
    workers = 1 if workers is None else max(1, min(workers, len(items)))
    if workers == 1:
        return [fn(x) for x in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    chunk = max(1, min(64, len(items) // (workers * 8)))  # a few chunks per worker keep them all busy to the end
    done: List[R] = []
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for result in pool.map(fn, items, chunksize=chunk):
                done.append(result)
    except (BrokenProcessPool, OSError):  # no process could start, or one died: finish here
        done += [fn(x) for x in items[len(done):]]
    return done
