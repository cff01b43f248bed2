"""Kineto (Chrome trace JSON) reader for every PyTorch era, producing compact columnar tables.

How it stays fast and lean on gigabyte traces:
1. The file is inflated block by block and the event array's text is decoded as it comes, in blocks cut at event
   boundaries (`stream.py`): neither the whole JSON text nor more than one block of events is held at once.
2. Blocks are decoded into typed structs that name only the fields the tables need (plus the extra args a caller
   asks for); msgspec skips every other key in C. Each block is turned into numpy columns and dropped.
   On several cores (`workers`), batches of whole events are decoded by forked workers instead (`fanout.py`).
3. A file whose text is not laid out for that is read into one buffer instead, split into `msgspec.Raw` slices per
   event and decoded in chunks of them, first chunk first.
A chunk that does not fit the typed schema (a string where an id should be, say) is decoded again event by event,
and an event that still does not fit field by field (repair.py): a bad value spoils only its own field, numbers
written as strings are read as numbers; `meta.coerced_fields` / `meta.dropped_fields` count both. Numbers outside
sane ranges (here and in header.py) are made absent once, at read time. Entries that are no JSON object are counted
in `meta.malformed_events` and skipped, never fatal.

The event schema and categories are in `events.py`, the chunk decoder in `reader.py`, the per-table column builders
in `columns.py`, decoding on several cores in `fanout.py` and `parallel.py`.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import msgspec
import numpy as np

from . import parallel
from .strides import fold_strides
from ..errors import TraceError
from .columns import _ORDER, _Columns
from .events import COMM_ARGS, LEGACY_CATEGORIES, TABLES
from .foreign import chrome_without_kineto
from .header import decode_header_value, sane_base_time, sane_devices, sane_distributed
from .reader import _Reader, renumber_by_first_use
from .repair import FieldLog
from .source import TraceBytes, file_size, os_error_reason, read_all
from .stages import stage
from .stream import BLOCK, EventStream, NotStreamable, trim_heap
from .table import Table

_CHUNK_EVENTS = 4096


_HEADER_KEYS = ("schemaVersion", "deviceProperties", "computeProperties", "baseTimeNanoseconds", "displayTimeUnit",
                "distributedInfo", "traceName", "record_shapes", "profile_memory", "with_stack", "with_flops",
                "cuda_runtime_version", "cuda_driver_version", "cupti_version", "hip_runtime_version",
                "roctracer_version", "schema")
_RAW = msgspec.field(default_factory=msgspec.Raw)
# The top-level object: events stay raw slices; the metadata keys we report stay raw until decode_header_value
# reads each on its own (a 1e999 in deviceProperties then spoils that property, not the whole trace). `schema`
# and `nodes` are an Execution Trace's keys: they let us say "this is an ET" rather than "no events".
_Top = msgspec.defstruct("_Top", [("traceEvents", Optional[List[msgspec.Raw]], None)]
                         + [(k, msgspec.Raw, _RAW) for k in _HEADER_KEYS] + [("nodes", msgspec.Raw, _RAW)])


@dataclass
class TraceMeta:
    """What a trace says about itself, plus what reading it found."""
    path: str
    file_bytes: int
    json_bytes: int
    era: str
    vendor: str
    schema_version: Any = None
    base_time_ns: Optional[int] = None
    display_time_unit: Optional[str] = None
    trace_name: Optional[str] = None
    distributed: Optional[dict] = None
    record_shapes: bool = False
    has_record_function_ids: bool = False
    has_external_ids: bool = False
    versions: Dict[str, Any] = field(default_factory=dict)
    category_counts: Dict[str, int] = field(default_factory=dict)
    python_calls: Dict[int, int] = field(default_factory=dict)  # start bucket (reader.PYTHON_BUCKET_US) -> events
    event_count: int = 0
    malformed_events: int = 0  # traceEvents entries that are no JSON object: skipped
    malformed_args: int = 0  # field values dropped (the total of dropped_fields)
    # "field: how" -> count: values read after a conversion (a number written as a string), and values left out
    # (wrong type, outside their sane range) - each spoils only its own field of its own event.
    coerced_fields: Dict[str, int] = field(default_factory=dict)
    dropped_fields: Dict[str, int] = field(default_factory=dict)
    start_us: Optional[float] = None
    end_us: Optional[float] = None
    extra_args: Tuple[str, ...] = ()

    @property
    def duration_us(self) -> float:
        if self.start_us is None or self.end_us is None:
            return 0.0
        return self.end_us - self.start_us


@dataclass
class KinetoTrace:
    """A Kineto trace as tables. Times are microseconds as written in the file (`ts`); for absolute times add
    `meta.base_time_ns / 1000` when the trace has a base time. Shape signatures (`ops['shape']`) index
    `shapes`; decode one with `shape(code)`."""
    meta: TraceMeta
    devices: List[Dict[str, Any]]
    ops: Table
    kernels: Table
    memops: Table
    launches: Table
    annotations: Table
    shapes: List[Tuple[bytes, ...]]  # dims, types, concrete (+ strides of broadcast views, see strides.py)
    comms: List[Tuple[bytes, ...]] = field(default_factory=list)
    memory: Table = field(default_factory=lambda: _Columns().finish("memory", _ORDER["memory"]))
    modules: Table = field(default_factory=lambda: _Columns().finish("modules", _ORDER["modules"]))
    enrichment: Any = None  # analysis/enrich.py's report once shapes were filled from companions
    _shape_cache: Dict[int, Tuple[Any, Any, Any]] = field(default_factory=dict, repr=False)
    _comm_cache: Dict[int, Dict[str, Any]] = field(default_factory=dict, repr=False)

    def tables(self) -> Dict[str, Table]:
        """All event tables by name."""
        return {name: getattr(self, name) for name in TABLES}

    def shape(self, code: int) -> Tuple[Any, Any, Any]:
        """(Input Dims, Input type, Concrete Inputs) of a shape code, as Python lists (None where absent)."""
        hit = self._shape_cache.get(code)
        if hit is None:
            hit = self._shape_cache[code] = _decode_shape(self.shapes[code])
        return hit

    def comm(self, code: int) -> Dict[str, Any]:
        """The collective args of a `comm` code (ops, kernels, annotations) by arg name; only those present. Decoded
        once per code (thousands of collectives share a few codes): read it, do not change it."""
        hit = self._comm_cache.get(code)
        if hit is None:
            hit = self._comm_cache[code] = {name: _decode_json(raw) for name, raw in zip(COMM_ARGS, self.comms[code])
                                            if raw}
        return hit


def _decode_shape(raw: Tuple[bytes, ...]) -> Tuple[Any, Any, Any]:
    """(dims, types, concrete); strides interned beside them (4th item) fold into concrete (strides.py)."""
    dims, types, concrete = (_decode_json(b) for b in raw[:3])
    return dims, types, fold_strides(dims, concrete, _decode_json(raw[3])) if len(raw) > 3 else concrete


def _decode_json(raw: bytes) -> Any:
    """A stored raw arg (shapes, types, concrete inputs); None when absent or not valid JSON text."""
    try:
        return msgspec.json.decode(raw) if raw else None
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------------------------------------------------------

Progress = Callable[[str, int, int], None]
_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")


def load_kineto(path: "os.PathLike[str] | str", extra_args: Iterable[str] = (),
                progress: Optional[Progress] = None, max_bytes: Optional[int] = None,
                workers: Optional[int] = None) -> KinetoTrace:
    """Read a Kineto trace (`.json` or `.json.gz`) into tables.

    `extra_args` names event args to keep besides the standard ones (for example "Input Strides",
    "Module Hierarchy", "Collective name"); each becomes an object column in every table, None where absent.
    `progress(stage, done, total)` is called while reading ("read", bytes; events are decoded as they are read)
    and once the events are decoded ("decode", events).
    `max_bytes` caps the uncompressed size (default: `source.max_trace_bytes()`).
    `workers`: processes decoding parts of a big trace at once (default $TB_GPUINSIGHT_DECODE_WORKERS, else
    several for a big trace: see parallel.decode_workers); the tables are those of one process (fanout.py).
    Raises `TraceError` with a one-line reason for anything that is not a readable Kineto trace.
    """
    path = os.fspath(path)
    extra = tuple(dict.fromkeys(str(a) for a in extra_args))
    file_bytes = _file_size(path)
    read_progress = (lambda d, t: progress("read", d, t)) if progress else None
    workers = parallel.decode_workers(workers, file_bytes, path)
    loaded = _read_streaming(path, extra, read_progress, max_bytes, workers)
    if loaded is None:
        loaded = _read_whole(path, extra, read_progress, max_bytes, workers)
    top, reader, tables, json_bytes, total = loaded
    _drop_unrecorded(tables["kernels"], "graph_node")
    if json_bytes >= BLOCK:  # what decoding a big trace freed goes back to the OS before the analysis allocates
        trim_heap()
    reader.shapes.items[:] = renumber_by_first_use(tables, "shape", reader.shapes.items)
    reader.comms.items[:] = renumber_by_first_use(tables, "comm", reader.comms.items)
    _header_values(top, reader)
    if progress:
        progress("decode", total, total)
    devices = _devices(top, reader.log)
    meta = _meta(path, top, reader, tables, devices, file_bytes, json_bytes, total)
    other_tool = chrome_without_kineto(meta, devices)
    if other_tool:
        raise TraceError(path, other_tool)
    return KinetoTrace(meta=meta, devices=devices, shapes=reader.shapes.items, comms=reader.comms.items, **tables)


def _drop_unrecorded(table: Table, column: str) -> None:
    """A column most traces never record (Kineto's `graph node id`) is kept only when some row has it."""
    if column in table.columns and not (table.columns[column] >= 0).any():
        del table.columns[column]


_Loaded = Tuple[Any, _Reader, Dict[str, Table], int, int]  # header, reader, tables, JSON bytes, event count


def _read_streaming(path: str, extra: Tuple[str, ...], read_progress, max_bytes: Optional[int],
                    workers: int = 1) -> Optional[_Loaded]:
    """The tables decoded while the file is inflated (stream.py; on several processes: fanout.py); None when the
    text is not laid out for it."""
    reader = _Reader(path, extra)
    if workers == 1:
        events = EventStream(reader)
    else:
        from .fanout import FanOut  # here: one process decoding never imports the process machinery

        events = FanOut(reader, lambda: _Reader(path, extra), workers)
    try:
        with stage("inflate"), events:
            read_all(path, read_progress, max_bytes, sink=events)
            header = events.finish()
    except (NotStreamable, RecursionError, msgspec.DecodeError):
        return None
    with stage("decode"):
        top = _decode_header(header)
    if top is None:
        return None
    with stage("columns"):
        tables = events.tables()
    return top, events.reader, tables, events.size, events.events


def _decode_header(text: bytes) -> Any:
    """The document around the streamed event array (that array left empty); None when it does not decode as
    a Kineto header with one event array (the whole-file read then says why)."""
    try:
        if _first_byte(text) == ord("["):
            msgspec.json.decode(text, type=List[msgspec.Raw])
            return _Top()
        top = msgspec.json.decode(text, type=_Top)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return None if top.traceEvents else top


def _read_whole(path: str, extra: Tuple[str, ...], read_progress, max_bytes: Optional[int],
                workers: Optional[int]) -> _Loaded:
    """The whole text in one buffer, split into events, decoded in one process or several (parallel.py)."""
    with stage("inflate"):
        buf = read_all(path, read_progress, max_bytes)
    with stage("decode"):
        top = _decode_top(path, buf)
    events = top.traceEvents
    if not events:
        raise TraceError(path, "the trace has no events")
    top.traceEvents = None
    reader = _Reader(path, extra)
    total = len(events)
    json_bytes = len(buf)
    ranges = parallel.split(total, parallel.decode_workers(workers), _CHUNK_EVENTS)
    if len(ranges) > 1:
        with stage("columns"):
            parts = parallel.decode_parallel(lambda: _Reader(path, extra), events, ranges, _feed_range)
            tables = parallel.merge_into(reader, parts)
        del buf, events, parts
    else:
        _decode_serially(reader, buf, events)
        del buf, events
        with stage("columns"):
            tables = reader.finish()
    return top, reader, tables, json_bytes, total


def _header_values(top: Any, reader: _Reader) -> None:
    """Decode the header's values; what they log is counted before what the events logged, as they come first."""
    log = FieldLog()
    for key in _HEADER_KEYS:
        setattr(top, key, decode_header_value(getattr(top, key), key, log))
    log.coerced.update(reader.log.coerced)
    log.dropped.update(reader.log.dropped)
    reader.log = log


def _decode_serially(reader: _Reader, buf: TraceBytes, events: List[msgspec.Raw]) -> None:
    """First chunk first (the order of a streamed read), taking chunks off the end of the reversed slice list:
    its memory shrinks while the tables grow, and the buffer's pages before the next chunk go back to the OS."""
    total = len(events)
    events.reverse()
    for start in range(0, total, _CHUNK_EVENTS):
        cut = max(len(events) - _CHUNK_EVENTS, 0)
        chunk = events[cut:]
        del events[cut:]
        chunk.reverse()
        with stage("columns"):
            reader.feed(chunk, start)
        del chunk
        buf.release_before(buf.offset_of(events[-1]) if events else len(buf))


def _feed_range(reader: _Reader, events: Sequence[msgspec.Raw], start: int, end: int) -> None:
    """Events [start, end) into `reader`, in the chunks and the order of a serial decode (start is a chunk's)."""
    for first in range(start, end, _CHUNK_EVENTS):
        reader.feed(events[first:min(first + _CHUNK_EVENTS, end)], first)


def _file_size(path: str) -> int:
    try:
        return file_size(path)  # a local file or an object-store URL
    except OSError as exc:
        raise TraceError(path, os_error_reason(exc)) from None


def _decode_top(path: str, content: TraceBytes) -> Any:
    buf = content.view()
    first = _first_byte(buf)
    try:
        if first == ord("["):
            return _Top(traceEvents=msgspec.json.decode(buf, type=List[msgspec.Raw]))
        if first != ord("{"):
            what = "is empty" if first is None else f"starts with {chr(first)!r}"
            if bytes(buf[257:262]) == b"ustar":  # a tar archive (of traces, most likely)
                what = "is a tar archive: extract it and give the trace files inside"
            raise TraceError(path, f"not a JSON trace: the file {what}", incomplete=first is None)
        top = msgspec.json.decode(buf, type=_Top)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"unexpected JSON layout: {exc}") from None
    except msgspec.DecodeError as exc:
        raise _json_error(path, exc, len(buf)) from None
    except UnicodeDecodeError as exc:
        raise TraceError(path, "invalid UTF-8 in the trace header", offset=exc.start) from None
    except RecursionError:
        raise TraceError(path, "invalid JSON: nesting too deep") from None
    if top.traceEvents is None and len(top.nodes):
        schema = decode_header_value(top.schema, "schema", FieldLog())
        raise TraceError(path, f"an Execution Trace (schema {str(schema)[:40]}), not a Kineto trace")
    if top.traceEvents is None:
        raise TraceError(path, "no 'traceEvents' key: not a Kineto trace")
    return top


def _first_byte(buf) -> Optional[int]:
    for i in range(min(len(buf), 4096)):
        b = buf[i]
        if b not in b" \t\r\n\xef\xbb\xbf":
            return b
    return None


def _json_error(path: str, exc: msgspec.DecodeError, size: int) -> TraceError:
    msg = str(exc)
    match = _BYTE_OFFSET.search(msg)
    offset = int(match.group(1)) if match else None
    if "truncated" in msg:
        return TraceError(path, "JSON ends early (file truncated or still being written)", offset=size,
                          incomplete=True)
    reason = _BYTE_OFFSET.sub("", msg).strip().rstrip(" -")
    return TraceError(path, f"invalid JSON: {reason}", offset=offset)


def _devices(top: Any, log: FieldLog) -> List[Dict[str, Any]]:
    """deviceProperties (or 2021's computeProperties), normalised to one key set, numbers in their ranges."""
    return sane_devices(top.deviceProperties if top.deviceProperties is not None else top.computeProperties, log)


def _meta(path: str, top: Any, reader: _Reader, tables: Dict[str, Table], devices: List[Dict[str, Any]],
          file_bytes: int, json_bytes: int, total: int) -> TraceMeta:
    counts = reader.counts
    ops = tables["ops"]
    versions = {k: getattr(top, k) for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version",
                                             "hip_runtime_version", "roctracer_version")
                if getattr(top, k) is not None}
    return TraceMeta(
        path=path, file_bytes=file_bytes, json_bytes=json_bytes,
        era=_era(top, counts), vendor=_vendor(devices, versions),
        schema_version=top.schemaVersion,
        base_time_ns=sane_base_time(top.baseTimeNanoseconds, reader.log),
        display_time_unit=top.displayTimeUnit if isinstance(top.displayTimeUnit, str) else None,
        trace_name=top.traceName if isinstance(top.traceName, str) else None,
        distributed=sane_distributed(top.distributedInfo, reader.log),
        record_shapes=bool(top.record_shapes) or bool(len(ops) and (ops["shape"] >= 0).any()),
        has_record_function_ids=bool(len(ops) and (ops["rf_id"] >= 0).any()),
        has_external_ids=bool(len(ops) and (ops["ext_id"] >= 0).any()),
        versions=versions,
        category_counts={(k or "(none)"): v for k, v in counts.most_common()},
        python_calls=dict(reader.python_calls),
        event_count=total, malformed_events=reader.malformed,
        malformed_args=sum(reader.log.dropped.values()),
        coerced_fields=dict(reader.log.coerced.most_common()), dropped_fields=dict(reader.log.dropped.most_common()),
        start_us=reader.t_min if np.isfinite(reader.t_min) else None,
        end_us=reader.t_max if np.isfinite(reader.t_max) else None,
        extra_args=reader.extra_args,
    )


def _era(top: Any, counts: Counter) -> str:
    if any(c in LEGACY_CATEGORIES for c in counts):
        return "2021 (legacy categories)"
    if top.baseTimeNanoseconds is not None:
        return "2024+ (relative timestamps)"
    return "2022-2024 (absolute timestamps)"


def _vendor(devices: List[Dict[str, Any]], versions: Dict[str, Any]) -> str:
    if "hip_runtime_version" in versions or "roctracer_version" in versions:
        return "amd"
    names = " ".join(str(d.get("name", "")) for d in devices)
    if "AMD" in names or "Radeon" in names or "Instinct" in names:
        return "amd"
    if names.strip() or "cuda_runtime_version" in versions or "cupti_version" in versions:
        return "nvidia"
    return "unknown"
