"""The work a worker process does for one span, in one place: summarise its trace (the summary's bytes, for the
plugin's pool and for `summarize`'s local or Dask workers, which also write it to the store), write its augmented
trace (the plugin's download) or build what a view makes of its files on demand (the Execution graph, the Tensor
shapes op groups). Every failure comes back as a one-line reason, never an exception.
"""
from __future__ import annotations

import os
import resource
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from ..errors import GpuInsightError, TraceError
from ..estimate.devices import load_datasheet
from ..estimate.model_config import load_model_config
from ..sections import SectionContext, build_all
from . import envelope as cache_mod
from . import verified
from .jobs import Job
from .summaries import open_store


def summarize_file(path: str, extra_args: Tuple[str, ...], execution_traces: Sequence[str] = (),
                   tensor_traces: Sequence[str] = (), trace_identity: Optional[Dict[str, Any]] = None,
                   max_trace_gb: Optional[float] = None, model_config: Optional[str] = None) -> Tuple[str, Any, bool]:
    """Worker-process entry: ("ok", summary bytes, False) or ("error", reason, incomplete). `model_config`: the
    run's model_config.json (a bad one fails the span with its one-line reason)."""
    from ..analysis.enrich import enrich
    from ..analysis.kernels.efficiency import analyze_trace
    from ..analysis.kernels.graph_capture import with_captures
    from ..loading import load
    from ..trace.source import set_max_trace_gb

    try:
        set_max_trace_gb(max_trace_gb)  # also caps the ET and tensor.trace readers of the sections
        config = load_model_config(model_config)
        trace = load(path, extra_args=extra_args)
        enrich(trace, execution_traces)
        eff = with_captures(analyze_trace(trace, model_config=config))  # graph replays rated from their capture, where one is found
        sections = build_all(SectionContext(trace, eff, tuple(execution_traces), tuple(tensor_traces)))
        return "ok", cache_mod.to_bytes(eff, cache_mod.meta_dict(trace.meta), sections, trace_identity), False
    except TraceError as exc:
        return "error", str(exc.reason) + (f" (at byte {exc.offset})" if exc.offset is not None else ""), \
            exc.incomplete
    except GpuInsightError as exc:
        return "error", str(exc), False
    except MemoryError:
        return "error", "out of memory while analysing this trace; lower --gpuinsight_max_trace_gb", False
    except RecursionError:
        return "error", "nesting too deep to analyse", False
    except Exception as exc:  # a bug must not take the server down; say what happened in one line
        return "error", f"internal error: {type(exc).__name__}: {exc}"[:300], False


def augment_file(path: str, dst: str, extra_args: Tuple[str, ...], devices_file: Optional[str],
                 max_trace_gb: Optional[float] = None) -> Tuple[str, str]:
    """Worker-process entry: write the augmented trace of `path` to `dst` (gzip); ("ok", dst) or ("error", reason)."""
    from ..analysis.kernels.augment import write_augmented
    from ..analysis.kernels.efficiency import analyze_trace
    from ..analysis.kernels.graph_capture import with_captures
    from ..loading import load
    from ..trace.source import set_max_trace_gb

    try:
        set_max_trace_gb(max_trace_gb)
        trace = load(path, extra_args=extra_args)
        datasheet = load_datasheet(devices_file)
        write_augmented(path, dst, with_captures(analyze_trace(trace, datasheet=datasheet), datasheet=datasheet))
        if not verified.record(dst):
            return "error", "cannot record the checksum of the augmented trace (is the cache directory writable?)"
        return "ok", dst
    except GpuInsightError as exc:
        return "error", str(exc.reason) if isinstance(exc, TraceError) else str(exc)
    except MemoryError:
        return "error", "out of memory while writing the augmented trace"
    except OSError as exc:  # the cache directory read-only or full: said without its path
        return "error", f"cannot write it into the cache directory: {exc.strerror or type(exc).__name__}"
    except Exception as exc:  # a bug must not take the server down
        return "error", f"internal error: {type(exc).__name__}: {exc}"[:300]


def view_build(what: str, max_trace_gb: Optional[float], func: Callable[..., Any], *args: Any) -> Tuple[str, Any]:
    """Worker-process entry of a view's build from a span's files (routes/builds.py: the Execution graph, the
    Tensor shapes op groups): ("ok", func(*args)) or ("error", one-line reason). `func` is a module-level function
    (it travels to the worker by name)."""
    from ..trace.source import set_max_trace_gb

    try:
        set_max_trace_gb(max_trace_gb)
        return "ok", func(*args)
    except GpuInsightError as exc:
        return "error", str(exc)
    except MemoryError:
        return "error", f"out of memory while building {what}"
    except RecursionError:
        return "error", f"nesting too deep to build {what}"
    except Exception as exc:  # a bug must not take the server down
        return "error", f"internal error: {type(exc).__name__}: {exc}"[:300]


def supervised_job(marker_dir: str, key: str, func: Callable[..., Any], *args: Any) -> Any:
    """Worker-process entry: `func(*args)`, leaving a marker (file named by this process id, holding the job's
    key) while it runs, so that the server knows which span a process was working on if it dies."""
    marker = os.path.join(marker_dir, str(os.getpid()))
    with open(marker, "w", encoding="utf-8") as f:
        f.write(key)
    try:
        return func(*args)
    finally:
        try:
            os.unlink(marker)
        except OSError:
            pass


def summarize_job(job: Job) -> Tuple[str, Any, bool]:
    """Summarise one job's trace in this process: ("ok", summary bytes, False) or ("error", reason, incomplete)."""
    return summarize_file(job.path, job.extra_args, job.execution_traces, job.tensor_traces, job.identity,
                          job.max_trace_gb, job.model_config)


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
