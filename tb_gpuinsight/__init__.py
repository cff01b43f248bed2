"""tb_gpuinsight: FLOPs, bytes and efficiency of every GPU kernel in PyTorch profiler traces, in TensorBoard.

Python API:
    trace = tb_gpuinsight.load("run/worker0.123.pt.trace.json.gz", extra_args=["Input Strides"])
    trace.kernels.to_pandas()
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from .errors import ConfigError, GpuInsightError, TraceError
from .logdir import discover, sniff
from .trace.kineto import KinetoTrace, Progress, load_kineto

__version__ = "0.1.0"

__all__ = ["load", "discover", "sniff", "KinetoTrace", "GpuInsightError", "TraceError", "ConfigError"]


def load(path: "os.PathLike[str] | str", extra_args: Iterable[str] = (),
         progress: Optional[Progress] = None) -> KinetoTrace:
    """Read one Kineto trace (`.json` or `.json.gz`) into columnar tables.

    Tables: `ops`, `kernels`, `memops` (memcpy and memset), `launches` (runtime, driver and sync calls),
    `annotations`; plus `devices` and `meta`. Each table converts with `.to_pandas()`. `extra_args` names event
    args to keep as extra columns (for example "Input Strides", "grid"). Raises `TraceError` with a one-line reason.
    """
    kind = sniff(path).kind
    if kind == "execution_trace":
        raise TraceError(path, "an Execution Trace, not a Kineto trace")
    if kind == "tensor_trace":
        raise TraceError(path, "a tensor.trace file, not a Kineto trace")
    return load_kineto(path, extra_args=extra_args, progress=progress)
