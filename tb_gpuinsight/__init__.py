"""tb_gpuinsight: FLOPs, bytes and efficiency of every GPU kernel in PyTorch profiler traces, in TensorBoard.

Python API:
    trace = tb_gpuinsight.load("run/worker0.123.pt.trace.json.gz", extra_args=["Input Strides"])
    trace.kernels.to_pandas()

The public names are imported on first use: `import tb_gpuinsight` (which every command line and the plugin run
first) loads no analysis, no numpy and no torch until a name that needs them is used.
"""
from typing import List

from .errors import ConfigError, GpuInsightError, TraceError
from .lazy import lazy_getattr
from .version import __version__  # noqa: F401 - public

__all__ = ["load", "analyze", "companion_execution_traces", "augment", "diff", "shapes", "overview", "memory", "ranks",
           "memory_snapshot", "compare_memory_snapshots", "kernels_across_ranks", "kernel_table", "critical_path",
           "critical_path_ranks", "discover",
           "sniff", "read_tensor_trace", "TensorTrace", "timeline", "timeline_index", "timeline_ranks",
           "summarize", "export_parquet", "report", "trend", "profile", "trace_handler", "KinetoTrace", "devices",
           "GpuInsightError", "TraceError", "ConfigError"]

# The module each lazily imported name comes from (the capture helpers need torch).
_HOMES = {"load": "loading", "companion_execution_traces": "loading", "analyze": "pipeline",
          "worker_traces": "pipeline", "discover": "logdir", "sniff": "logdir", "KinetoTrace": "trace.kineto",
          "TensorTrace": "capture.tensortrace", "trace_handler": "capture.profiling", "profile": "capture.profiling",
          **{name: "api" for name in ("augment", "diff", "shapes", "overview", "memory", "ranks",
                                      "kernels_across_ranks", "kernel_table", "critical_path", "critical_path_ranks",
                                      "read_tensor_trace", "timeline", "timeline_index", "timeline_ranks",
                                      "summarize", "export_parquet", "report", "memory_snapshot",
                                      "compare_memory_snapshots", "trend", "devices")}}


__getattr__ = lazy_getattr(__name__, _HOMES, globals())


def __dir__() -> List[str]:
    """The public names only (not the helpers this module imports)."""
    return sorted(__all__ + ["__version__"])
