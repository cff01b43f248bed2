"""What the Tensor shapes tab needs of one span's files, built from them by an analysis worker (never in a request's
thread): the op groups and top-level op timeline of its Kineto trace, and its tensor.trace files joined to the ops.
Both come back pickled: plain dataclasses of numpy columns and lists."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import TraceError
from . import report as sh


@dataclass
class SpanShapes:
    """What the tab needs of one span's trace: its op groups and its top-level op timeline."""
    groups: Dict[Tuple[str, str, str], sh.OpGroup]
    timeline: sh.Timeline
    record_shapes: bool
    key: Tuple[str, int, str]  # (path, size, version: content digest or ETag) of the trace it was read from


def span_shapes(trace_path: str, extra_args: Sequence[str], activities, shapes: Dict[int, Any],
                key: Tuple[str, int, str]) -> SpanShapes:
    """Read a span's trace and reduce it to its op groups (device time and peaks from `activities` and `shapes`,
    the span's stored analysis: a CPU-only trace's analysis holds none of its ops) and op timeline."""
    from ...loading import load

    trace = load(trace_path, extra_args=extra_args)
    return SpanShapes(sh.op_groups(trace, activities, shapes), sh.Timeline.of(trace), sh.has_shapes(trace), key)


def joined_tensors(paths: Sequence[str], timelines: Sequence[sh.Timeline]) -> Tuple[Optional[sh.Tensors], List[str]]:
    """The tensor.trace files at `paths` joined to the ops of `timelines` (None when none reads), and
    "file: reason" of each damaged one (a companion that does not read is damaged, as the CLI says, not missing)."""
    import os

    from ...trace.tensortrace import read_tensor_trace

    read, damaged = [], []
    for path in paths:
        try:
            read.append(read_tensor_trace(path))
        except TraceError as exc:
            damaged.append(f"{os.path.basename(path)}: {exc.reason}")
    if not read:
        return None, damaged
    return sh.join_tensors(read, sh.Timeline.concat(list(timelines))), damaged
