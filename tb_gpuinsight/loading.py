"""Reading one Kineto trace as the Python API, the CLI, the routes and the analysis workers all do: its kind
sniffed first (an Execution Trace or tensor.trace is named as such), its size capped, every failure a one-line
`TraceError`; and the Execution Traces discovery pairs with it. `tb_gpuinsight.load` is this module's `load`; the
analyses import it from here, never from the package's API module, which imports them."""
from __future__ import annotations

import os
from typing import Iterable, Optional

from .errors import TraceError
from .logdir import sniff
from .trace.kineto import KinetoTrace, Progress, load_kineto


def load(path: "os.PathLike[str] | str", extra_args: Iterable[str] = (),
         progress: Optional[Progress] = None, max_trace_gb: Optional[float] = None) -> KinetoTrace:
    """Read one Kineto trace (`.json` or `.json.gz`) into columnar tables.

    Tables: `ops`, `kernels`, `memops` (memcpy and memset), `launches` (runtime, driver and sync calls),
    `annotations`; plus `devices` and `meta`. Each table converts with `.to_pandas()`. `extra_args` names event
    args to keep as extra columns (for example "Input Strides", "grid"). `max_trace_gb` caps the uncompressed size
    (default: available memory / 3, or $TB_GPUINSIGHT_MAX_TRACE_GB). Raises `TraceError` with a one-line reason.
    """
    from .trace.source import max_trace_bytes

    kind = sniff(path).kind
    if kind == "execution_trace":
        raise TraceError(path, "an Execution Trace, not a Kineto trace")
    if kind == "tensor_trace":
        raise TraceError(path, "a tensor.trace file, not a Kineto trace")
    try:
        return load_kineto(path, extra_args=extra_args, progress=progress, max_bytes=max_trace_bytes(max_trace_gb))
    except (MemoryError, RecursionError) as exc:
        what = "out of memory" if isinstance(exc, MemoryError) else "nesting too deep"
        raise TraceError(path, f"{what} while reading the trace") from None


def companion_execution_traces(trace_path: "os.PathLike[str] | str") -> list:
    """The Execution Traces logdir discovery pairs with a trace: its own, then its directory's run-level ones
    (none when the trace's directory cannot be listed)."""
    from .logdir import ET, companions

    try:
        return companions(trace_path, ET)
    except OSError:
        return []

