"""Capture helpers for training loops: `TensorTrace` records the tensor arguments of torch calls (tensor.trace);
`profile` / `trace_handler` write a Kineto trace, an Execution Trace and a tensor.trace per profiler span.

Imports torch: `import tb_gpuinsight` does not import this package until `tb_gpuinsight.TensorTrace` is used.
"""
from .profiling import TraceHandler, profile, trace_handler
from .tensortrace import TensorTrace, format_line, tensor_trace_path

__all__ = ["TensorTrace", "tensor_trace_path", "format_line", "TraceHandler", "profile", "trace_handler"]
