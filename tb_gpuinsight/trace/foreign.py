"""Traces other tools write, told apart from a PyTorch profiler (Kineto) trace so that every command refuses them
with one line naming what the file looks like and what to record instead, and discovery lists them as skipped.

From a file's first block: an Nsight Systems JSON export (one JSON object per line: `{"Type": 79, "CudaEvent":
...}`, then `{"data": [...strings]}`), an Nsight Systems report or its SQLite export, a Perfetto protobuf trace, a
TensorFlow / JAX XPlane (`*.xplane.pb`), and a Chrome trace whose events carry no Kineto category and whose header
no Kineto field. From a whole read trace (`chrome_without_kineto`): events of which none is of a Kineto category,
and no Kineto header field (a trace whose first block could not tell).
"""
from __future__ import annotations

import re
from typing import Any

from .events import CATEGORIES, LEGACY_CATEGORIES

RECORD = ("record the run with torch.profiler (on_trace_ready=torch.profiler.tensorboard_trace_handler(DIR)) to "
          "get a trace this tool reads")
_NSYS_JSON = re.compile(rb'^\{\s*"(?:Type"\s*:\s*\d+\s*,\s*"\w+Event"|data"\s*:\s*\[|type"\s*:\s*"(?:String|ThreadName)")')
_NSYS_EVENTS = re.compile(rb'"(?:TraceProcessEvent|CudaEvent|NvtxEvent|OSRuntimeEvent|CommEvent)"\s*:')
_KINETO_HEADER = re.compile(rb'"(?:schemaVersion|deviceProperties|computeProperties|distributedInfo|traceName|'
                            rb'baseTimeNanoseconds)"\s*:|"PyTorch Profiler"')
_CATEGORY = re.compile(rb'"cat"\s*:\s*"([^"]{0,64})"')
_PHASE = re.compile(rb'"ph"\s*:\s*"[^M"]')
_KINETO_CATEGORIES = frozenset(CATEGORIES) | {c.lower() for c in LEGACY_CATEGORIES}
_CHROME_EVENTS = 5  # events seen in the first block, none of Kineto's, before the file is judged another tool's
_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_PERFETTO_SUFFIXES = (".perfetto-trace", ".pftrace", ".perfetto")


LOOKS_LIKE = "looks like "


def looks_like(what: str) -> str:
    """The one-line reason for a file that looks like `what`."""
    return f"{LOOKS_LIKE}{what}, not a PyTorch profiler (Kineto) trace; {RECORD}"


def foreign_head(head: bytes, name: str = "") -> str:
    """Why a file whose first block is `head` (inflated) is another tool's trace, or "" when it may be Kineto's."""
    lower = str(name).lower()
    if lower.endswith(_REPORT_SUFFIXES):
        return looks_like("an Nsight Systems report")
    if head.startswith(b"SQLite format 3\0"):
        return looks_like("an SQLite database (an Nsight Systems --type sqlite export?)")
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if _NSYS_JSON.match(text) or (text.startswith(b"{") and _NSYS_EVENTS.search(text[:4096])):
        return looks_like("an Nsight Systems JSON export (nsys export --type json)")
    if b"\0" in head or lower.endswith((".pb",) + _PERFETTO_SUFFIXES):
        return _protobuf(head, lower)
    if text[:1] in (b"{", b"[") and not _KINETO_HEADER.search(text) and len(_PHASE.findall(text)) >= _CHROME_EVENTS:
        if not any(c.decode("utf-8", "replace").lower() in _KINETO_CATEGORIES for c in _CATEGORY.findall(text)):
            return chrome_reason()
    return ""


def _protobuf(head: bytes, lower: str) -> str:
    """A binary first block: an XPlane or a Perfetto trace by its name and first field (both open with a length-
    delimited field 1, tag byte 0x0a), else "" (the reader says "binary data")."""
    if lower.endswith(".xplane.pb") or (head[:1] == b"\x0a" and (b"/host:" in head or b"/device:" in head)):
        return looks_like("a TensorFlow / JAX XPlane profile (*.xplane.pb)")
    if lower.endswith(_PERFETTO_SUFFIXES) or (head[:1] == b"\x0a" and lower.endswith((".pb", ".trace"))):
        return looks_like("a Perfetto protobuf trace")
    return ""


def chrome_reason() -> str:
    return looks_like("a Chrome trace without Kineto fields (no schemaVersion, no cpu_op / kernel / cuda_runtime "
                      "events)")


def chrome_without_kineto(meta: Any, devices: Any) -> str:
    """Why a read trace is a Chrome trace of another tool ("" when it is Kineto's): its events have categories,
    none of them Kineto's, and its header no Kineto field. (Events without a category, as 2021's memory events,
    decide nothing here; the first block judged them when it showed them.)"""
    if meta.schema_version is not None or devices or meta.distributed or meta.trace_name or meta.base_time_ns:
        return ""
    categories = {str(c).lower() for c in meta.category_counts if c != "(none)"}
    return chrome_reason() if categories and not categories & _KINETO_CATEGORIES else ""
