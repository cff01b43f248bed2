"""What the service knows of each span and run of a logdir, and the errors its routes answer with.

Span states: "pending" (queued), "loading", "waiting" (the file failed to parse but is still changing, so it is
probably being written: retried when it changes or settles), "ready", "error" (with a one-line reason).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import GpuInsightError
from .logdir import FileEntry
from .trace.source import is_url

ALL_SPANS = "all"
ALL_WORKERS = "*"  # a selection's worker "all ranks": every worker of the run


class NotFound(GpuInsightError):
    """A run, worker or span the logdir does not have."""


class NotReady(GpuInsightError):
    """A span that is still loading: ask again later (HTTP 503 with Retry-After)."""


class SpanFailed(GpuInsightError):
    """A span whose analysis failed for good (until its file changes): the message says why (HTTP 422)."""


@dataclass
class SpanState:
    run: str
    worker: str
    span: str
    entry: FileEntry
    stamp: Optional[int]
    key: str
    status: str = "pending"
    reason: str = ""
    future: Any = None
    deaths: int = 0  # analysis processes that died while analysing this version of the file
    identity: Dict[str, Any] = field(default_factory=dict)  # what its cached summary must say it is
    repaired: bool = False  # its cached summary was found damaged once and recomputed
    execution_traces: List[FileEntry] = field(default_factory=list)  # the span's own, then the run's
    tensor_traces: List[FileEntry] = field(default_factory=list)
    model_config: Optional[str] = None  # the run's model_config.json

    def to_dict(self) -> Dict[str, Any]:
        return {"span": self.span, "stamp": self.stamp, "status": self.status, "bytes": self.entry.size,
                **({"reason": self.reason} if self.reason else {}),
                **({"remote": True} if is_url(self.entry.path) else {})}  # a download fetches it first


@dataclass
class RunState:
    name: str
    spans: Dict[Tuple[str, str], SpanState] = field(default_factory=dict)
    unreadable: List[FileEntry] = field(default_factory=list)
    memory_snapshots: List[FileEntry] = field(default_factory=list)  # *.pickle[.gz] beside the run's traces
    captures: List[FileEntry] = field(default_factory=list)  # graph-capture traces of a capture folder in the run
    gone: List[SpanState] = field(default_factory=list)  # dropped by the current scan, released after it
