"""Kineto (Chrome trace JSON) reader for every PyTorch era, producing compact columnar tables.

How it stays fast and lean on gigabyte traces:
1. The file is read once into one buffer (gzip inflated in place, see `source.py`).
2. One msgspec pass splits `traceEvents` into `msgspec.Raw` slices: a validating scan that builds no objects per
   field, only one small slice object per event.
3. Slices are decoded in chunks into typed structs that name only the fields the tables need (plus the extra args a
   caller asks for); msgspec skips every other key in C. Each chunk is turned into numpy columns and dropped, so
   at most one chunk of Python objects is alive at a time.
A chunk that does not fit the typed schema (a string where an id should be, say) is decoded again event by event,
and an event that still does not fit field by field (repair.py): a bad value spoils only its own field, numbers
written as strings are read as numbers; `meta.coerced_fields` / `meta.dropped_fields` count both. Numbers outside
sane ranges (here and in header.py) are made absent once, at read time. Entries that are no JSON object are counted
in `meta.malformed_events` and skipped, never fatal.
"""
from __future__ import annotations

import operator
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import msgspec
import numpy as np

from ..errors import TraceError
from .source import TraceBytes, file_size, os_error_reason, read_all
from .header import decode_header_value, sane_base_time, sane_devices, sane_distributed
from .repair import FieldLog, StructRepairer
from .table import Interner, Table

# Raw category -> canonical category. Legacy (2021) names map onto the 2022+ vocabulary.
CATEGORIES: Dict[str, str] = {
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset", "memset": "gpu_memset",
    "cuda_runtime": "cuda_runtime", "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "cuda_sync": "cuda_sync",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "python_function": "python_function",
    "cpu_instant_event": "cpu_instant_event",
    "overhead": "overhead",
    "trace": "trace",
    "cuda_profiler_range": "cuda_profiler_range",
    "ac2g": "flow", "async": "flow", "async_gpu": "flow", "async_cpu_to_gpu": "flow", "fwdbwd": "flow",
}
LEGACY_CATEGORIES = {"Operator", "Kernel", "Runtime", "Memcpy", "Memset"}

# Canonical category -> (table, kind within the table).
TABLE_OF: Dict[str, Tuple[str, str]] = {
    "cpu_op": ("ops", "cpu_op"),
    "kernel": ("kernels", "kernel"),
    "gpu_memcpy": ("memops", "memcpy"),
    "gpu_memset": ("memops", "memset"),
    "cuda_runtime": ("launches", "runtime"),
    "cuda_driver": ("launches", "driver"),
    "cuda_sync": ("launches", "sync"),
    "user_annotation": ("annotations", "cpu"),
    "gpu_user_annotation": ("annotations", "gpu"),
}
TABLES = ("ops", "kernels", "memops", "launches", "annotations", "memory", "modules")
# Allocation events (profile_memory=True): instant events named "[memory]", cat "cpu_instant_event" (2022+) or none
# (2021), whatever their category says.
MEMORY_EVENT = "[memory]"
# nn.Module calls (with_stack=True): python_function events named "nn.Module: Linear_0"; other Python frames are
# not kept.
MODULE_PREFIX = "nn.Module: "

_CHUNK_EVENTS = 4096
_NO_ID = -1


def _raw_field(arg_name: str):
    return msgspec.field(default=msgspec.Raw(), name=arg_name)


def _opt_field(arg_name: str):
    return msgspec.field(default=None, name=arg_name)


# The event args every table may use: (attribute, arg name in the trace, type). Raw values stay undecoded bytes
# until a table interns them (shapes and grids repeat, so each distinct value is decoded once, later).
_ARG_FIELDS: Tuple[Tuple[str, str, Any], ...] = (
    ("ext", "External id", Optional[int]),
    ("ext_legacy", "external id", Optional[int]),
    ("correlation", "correlation", Optional[int]),
    ("rf_id", "Record function id", Optional[int]),
    ("seq", "Sequence number", Optional[int]),
    ("fwd_tid", "Fwd thread id", Optional[int]),
    ("device", "device", Optional[int]),
    ("stream", "stream", Union[int, str, None]),  # ROCm runtime events write "0x0"
    ("dims", "Input Dims", msgspec.Raw),
    ("dims_legacy", "Input dims", msgspec.Raw),
    ("types", "Input type", msgspec.Raw),
    ("concrete", "Concrete Inputs", msgspec.Raw),
    ("grid", "grid", msgspec.Raw),
    ("block", "block", msgspec.Raw),
    ("registers", "registers per thread", Optional[int]),
    ("shared_mem", "shared memory", Optional[int]),
    ("blocks_per_sm", "blocks per SM", Optional[float]),
    ("warps_per_sm", "warps per SM", Optional[float]),
    ("occupancy", "est. achieved occupancy %", Optional[float]),
    ("occupancy_legacy", "theoretical occupancy %", Optional[float]),
    ("nbytes", "bytes", Optional[int]),
    ("bandwidth", "memory bandwidth (GB/s)", Optional[float]),
    ("kernel_flop", "kernel_flop", Optional[float]),
    ("kernel_num_gb", "kernel_num_gb", Optional[float]),
    ("module", "Module Hierarchy", Optional[str]),
    ("addr", "Addr", Optional[int]),
    ("alloc_bytes", "Bytes", Optional[int]),
    ("total_allocated", "Total Allocated", Optional[int]),
    ("total_reserved", "Total Reserved", Optional[int]),
    ("device_type", "Device Type", Optional[int]),
    ("device_id", "Device Id", Optional[int]),
    # cuda_sync events (2024+): the stream and cudaEventRecord an event sync / stream wait waits on.
    ("wait_stream", "wait_on_stream", Optional[int]),
    ("wait_corr", "wait_on_cuda_event_record_corr_id", Optional[int]),
)
# Collective args (record_param_comms ops, c10d/NCCL kernels of newer builds), kept raw: their JSON types vary by
# release (sizes as numbers or strings, ranks as a list or its text). `KinetoTrace.comm(code)` decodes one set.
COMM_ARGS: Tuple[str, ...] = (
    "Collective name", "In msg nelems", "Out msg nelems", "In split size", "Out split size", "Group size", "dtype",
    "Process Group Name", "Process Group Description", "Process Group Ranks", "Process Group ID", "Rank", "Seq",
    "Comms Id", "Global rank start", "Global rank stride",
)
_ARG_FIELDS += tuple((f"comm{i}", name, msgspec.Raw) for i, name in enumerate(COMM_ARGS))
_COMM_ATTRS = tuple(f"comm{i}" for i in range(len(COMM_ARGS)))
_comm_values = operator.attrgetter(*_COMM_ATTRS)
_ARG_NAMES = {name: attr for attr, name, _ in _ARG_FIELDS}


def _make_schema(extra_args: Tuple[str, ...]):
    """Typed event struct for one load: the standard args plus the caller's extra args (as raw JSON)."""
    fields = []
    for attr, name, typ in _ARG_FIELDS:
        default = msgspec.Raw() if typ is msgspec.Raw else None
        fields.append((attr, typ, msgspec.field(default=default, name=name)))
    for i, name in enumerate(extra_args):
        if name not in _ARG_NAMES:
            fields.append((f"x{i}", msgspec.Raw, msgspec.field(default=msgspec.Raw(), name=name)))
    args_type = msgspec.defstruct("Args", fields)
    event_type = msgspec.defstruct("Event", [
        ("ph", str, ""),
        ("cat", str, ""),
        ("name", str, ""),
        ("pid", Union[int, str, None], None),
        ("tid", Union[int, str, None], None),
        ("ts", Optional[float], None),
        ("dur", float, 0.0),
        ("args", Optional[args_type], None),
    ])
    return args_type, event_type


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
    shapes: List[Tuple[bytes, bytes, bytes]]
    comms: List[Tuple[bytes, ...]] = field(default_factory=list)
    memory: Table = field(default_factory=lambda: _Columns().finish("memory", _ORDER["memory"]))
    modules: Table = field(default_factory=lambda: _Columns().finish("modules", _ORDER["modules"]))
    enrichment: Any = None  # analysis/enrich.py's report once shapes were filled from companions
    _shape_cache: Dict[int, Tuple[Any, Any, Any]] = field(default_factory=dict, repr=False)

    def tables(self) -> Dict[str, Table]:
        """All event tables by name."""
        return {name: getattr(self, name) for name in TABLES}

    def shape(self, code: int) -> Tuple[Any, Any, Any]:
        """(Input Dims, Input type, Concrete Inputs) of a shape code, as Python lists (None where absent)."""
        hit = self._shape_cache.get(code)
        if hit is None:
            hit = self._shape_cache[code] = tuple(_decode_json(b) for b in self.shapes[code])
        return hit

    def comm(self, code: int) -> Dict[str, Any]:
        """The collective args of a `comm` code (ops, kernels, annotations) by arg name; only those present."""
        return {name: _decode_json(raw) for name, raw in zip(COMM_ARGS, self.comms[code]) if raw}


def _decode_json(raw: bytes) -> Any:
    """A stored raw arg (shapes, types, concrete inputs); None when absent or not valid JSON text."""
    try:
        return msgspec.json.decode(raw) if raw else None
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _float_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (OverflowError, TypeError, ValueError):
        return float("nan")


# ---------------------------------------------------------------------------------------------------------------
# Column builders: one per table, fed chunk by chunk.

# Sane ranges of numeric columns: a value outside is no measurement (a corrupt file, a unit mix-up) and would only
# overflow the sums downstream; it is made absent at read time, once, and counted with its reason. Generous on
# purpose: 1e17 us is 3,000 years after the epoch; 1e12 us (11.6 days) is longer than any profiled span.
_FLOAT_LIMITS: Dict[str, Tuple[float, float]] = {
    "ts": (-1e17, 1e17), "dur": (-1e12, 1e12),
    "kernel_flop": (0.0, 1e21), "kernel_num_gb": (0.0, 1e9),  # a zettaFLOP, an exabyte: beyond any one kernel
    "bytes": (0.0, 2.0 ** 50), "bandwidth": (0.0, 1e9),
    "blocks_per_sm": (0.0, 1e6), "warps_per_sm": (0.0, 1e6), "occupancy": (0.0, 100.0),
    "total_allocated": (-2.0 ** 50, 2.0 ** 50), "total_reserved": (-2.0 ** 50, 2.0 ** 50),
}
# A value out of range becomes what its absence in the file means: no time (the event is in no table), NaN for
# measurements, and 0 for durations (the reader's default for an event without one).
_TS_LIMIT = _FLOAT_LIMITS["ts"][1]
_ABSENT = {"dur": 0.0}
_INT_LIMITS: Dict[str, Tuple[int, int]] = {"bytes": (-(2 ** 50), 2 ** 50), "registers": (0, 1 << 16),
                                           "shared_mem": (0, 1 << 40)}


class _Columns:
    """Accumulates numpy column chunks for one table; values that do not fit are made absent and logged."""

    def __init__(self, table: str = "", log: Optional[FieldLog] = None) -> None:
        self.table = table
        self.log = log if log is not None else FieldLog()
        self.chunks: Dict[str, List[np.ndarray]] = {}
        self.interners: Dict[str, Interner] = {}

    def add(self, col: str, arr: np.ndarray) -> None:
        self.chunks.setdefault(col, []).append(arr)

    def add_ints(self, col: str, values: Iterable[Optional[int]], n: int, dtype=np.int64) -> None:
        values = list(values)
        info = np.iinfo(dtype)
        lo, hi = _INT_LIMITS.get(col, (int(info.min), int(info.max)))
        try:
            arr = np.fromiter((_NO_ID if v is None else v for v in values), dtype=dtype, count=n)
            out = (arr < lo) | (arr > hi)
            out &= arr != _NO_ID
            if out.any():
                self.log.drop(f"{self.table} {col}", f"outside {lo:,}..{hi:,}", int(out.sum()))
                arr[out] = _NO_ID
        except OverflowError:  # beyond the column's type: absent, and counted
            fits = [v if v is None or lo <= v <= hi else None for v in values]
            self.log.drop(f"{self.table} {col}", f"outside {lo:,}..{hi:,}",
                          sum(1 for v, f in zip(values, fits) if f is None and v is not None))
            arr = np.fromiter((_NO_ID if v is None else v for v in fits), dtype=dtype, count=n)
        self.add(col, arr)

    def add_floats(self, col: str, values: Iterable[Optional[float]], n: int) -> None:
        values = list(values)
        try:
            arr = np.fromiter((np.nan if v is None else v for v in values), dtype=np.float64, count=n)
        except OverflowError:  # an integer beyond any float
            arr = np.fromiter((np.nan if v is None else _float_or_nan(v) for v in values), dtype=np.float64, count=n)
        lo, hi = _FLOAT_LIMITS.get(col, (-np.inf, np.inf))
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) & ~np.isnan(arr)
            bad |= (arr < lo) | (arr > hi)
        if bad.any():  # infinite or absurd times, FLOPs or sizes are not measurements: absent, and counted
            taken = f", taken as {_ABSENT[col]:g}" if col in _ABSENT else ""
            self.log.drop(f"{self.table} {col}", f"not finite or outside {lo:g}..{hi:g}{taken}", int(bad.sum()))
            arr[bad] = _ABSENT.get(col, np.nan)
        self.add(col, arr)

    def add_strings(self, col: str, values: Iterable, n: int) -> None:
        interner = self.interners.setdefault(col, Interner())
        self.add(col, np.fromiter(interner.encode(values), dtype=np.int32, count=n))

    def finish(self, name: str, order: Sequence[str]) -> Table:
        columns, strings = {}, {}
        for col in order:
            # Pop each column's chunks as it is joined so that parts and whole never all coexist.
            parts = self.chunks.pop(col, None)
            columns[col] = (np.concatenate(parts[::-1]) if parts else
                            np.empty(0, dtype=_EMPTY_DTYPE.get(col, np.float64)))
            del parts
        for col, interner in self.interners.items():
            interner.codes.clear()
            columns[col], strings[col] = _as_text_categories(columns[col], interner.items)
        for col in order:
            if col not in strings and col in _STRING_COLUMNS:
                strings[col] = []
                columns[col] = columns[col].astype(np.int32)
        return Table(name, columns, strings)


_STRING_COLUMNS = {"name", "kind", "pid", "tid", "grid", "block", "module"}
_EMPTY_DTYPE = {**{c: np.int32 for c in _STRING_COLUMNS}, "event": np.int64, "device_type": np.int32,
                "device_id": np.int32, "addr": np.int64, "bytes": np.int64, "shape": np.int32, "comm": np.int32}


def _as_text_categories(codes: np.ndarray, items: List) -> Tuple[np.ndarray, List]:
    """Interned values become text categories; bytes (raw JSON) and ints are rendered, duplicates merged."""
    if all(isinstance(x, str) for x in items):
        return codes, items
    texts = [x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else
             ("" if x is None else str(x)) for x in items]
    merged = Interner()
    remap = np.fromiter(merged.encode(texts), dtype=np.int32, count=len(texts))
    return (remap[codes] if len(codes) else codes), merged.items


def _ext_ids(args: List) -> List[Optional[int]]:
    return [a.ext if a.ext is not None else a.ext_legacy for a in args]


def _common(cols: _Columns, evs: List, args: List, n: int) -> None:
    cols.add_strings("name", (e.name for e in evs), n)
    cols.add_floats("ts", (e.ts for e in evs), n)
    cols.add_floats("dur", (e.dur for e in evs), n)
    cols.add_ints("ext_id", _ext_ids(args), n)


def _build_ops(cols: _Columns, evs: List, args: List, n: int, shapes: Interner, _kinds: List[str],
               comms: Interner) -> None:
    _common(cols, evs, args, n)
    cols.add_strings("pid", (e.pid for e in evs), n)
    cols.add_strings("tid", (e.tid for e in evs), n)
    cols.add_ints("rf_id", (a.rf_id for a in args), n)
    cols.add_ints("seq", (a.seq for a in args), n)
    cols.add_ints("fwd_tid", (a.fwd_tid for a in args), n)
    cols.add_floats("kernel_flop", (a.kernel_flop for a in args), n)
    cols.add_floats("kernel_num_gb", (a.kernel_num_gb for a in args), n)
    cols.add("shape", np.fromiter((_shape_code(a, shapes) for a in args), dtype=np.int32, count=n))
    cols.add_strings("module", (a.module for a in args), n)
    _add_comm(cols, args, n, comms)


def _add_comm(cols: _Columns, args: List, n: int, comms: Interner) -> None:
    cols.add("comm", np.fromiter((_comm_code(a, comms) for a in args), dtype=np.int32, count=n))


def _comm_code(a, comms: Interner) -> int:
    raws = _comm_values(a)  # one C call; most events carry none of these args, so test before converting
    if not any(raws):
        return _NO_ID
    return comms.code(tuple(bytes(r) for r in raws))


def _shape_code(a, shapes: Interner) -> int:
    dims = a.dims or a.dims_legacy
    if not dims and not a.types:
        return _NO_ID
    return shapes.code((bytes(dims), bytes(a.types), bytes(a.concrete)))


def _device_of(e, a) -> Optional[int]:
    if a.device is not None:
        return a.device
    return e.pid if isinstance(e.pid, int) else None


def _stream_id(value: Union[int, str, None]) -> Optional[int]:
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value, 0)
    except ValueError:
        return None


def _build_kernels(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: List[str],
                   comms: Interner) -> None:
    _common(cols, evs, args, n)
    cols.add_ints("device", (_device_of(e, a) for e, a in zip(evs, args)), n, np.int32)
    cols.add_ints("stream", (_stream_id(a.stream) for a in args), n)
    cols.add_ints("correlation", (a.correlation for a in args), n)
    cols.add_ints("registers", (a.registers for a in args), n, np.int32)
    cols.add_ints("shared_mem", (a.shared_mem for a in args), n)
    cols.add_floats("blocks_per_sm", (a.blocks_per_sm for a in args), n)
    cols.add_floats("warps_per_sm", (a.warps_per_sm for a in args), n)
    cols.add_floats("occupancy", (a.occupancy if a.occupancy is not None else a.occupancy_legacy for a in args), n)
    cols.add_strings("grid", (bytes(a.grid) for a in args), n)
    cols.add_strings("block", (bytes(a.block) for a in args), n)
    _add_comm(cols, args, n, comms)


def _build_memops(cols: _Columns, evs: List, args: List, n: int, _shapes, kinds: List[str], _comms) -> None:
    cols.add_strings("kind", kinds, n)
    _common(cols, evs, args, n)
    cols.add_ints("device", (_device_of(e, a) for e, a in zip(evs, args)), n, np.int32)
    cols.add_ints("stream", (_stream_id(a.stream) for a in args), n)
    cols.add_ints("correlation", (a.correlation for a in args), n)
    cols.add_floats("bytes", (a.nbytes for a in args), n)
    cols.add_floats("bandwidth", (a.bandwidth for a in args), n)


def _build_launches(cols: _Columns, evs: List, args: List, n: int, _shapes, kinds: List[str], _comms) -> None:
    cols.add_strings("kind", kinds, n)
    _common(cols, evs, args, n)
    cols.add_strings("pid", (e.pid for e in evs), n)
    cols.add_strings("tid", (e.tid for e in evs), n)
    cols.add_ints("correlation", (a.correlation for a in args), n)
    # Sync events name their device and stream, and what they wait on; runtime calls of ROCm carry a stream.
    cols.add_ints("device", (a.device for a in args), n, np.int32)
    cols.add_ints("stream", (_stream_id(a.stream) for a in args), n)
    cols.add_ints("wait_stream", (a.wait_stream for a in args), n)
    cols.add_ints("wait_corr", (a.wait_corr for a in args), n)


def _build_annotations(cols: _Columns, evs: List, args: List, n: int, shapes: Interner, kinds: List[str],
                       comms: Interner) -> None:
    cols.add_strings("kind", kinds, n)
    _common(cols, evs, args, n)
    cols.add_strings("pid", (e.pid for e in evs), n)
    cols.add_strings("tid", (e.tid for e in evs), n)
    # nccl:/gloo: annotations carry the collective's tensor (Input Dims / Input type): its size.
    cols.add("shape", np.fromiter((_shape_code(a, shapes) for a in args), dtype=np.int32, count=n))
    _add_comm(cols, args, n, comms)


def _build_memory(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: List[str], _comms) -> None:
    """[memory] events: Bytes > 0 allocates, < 0 frees; the totals are absent before torch 1.10 (NaN)."""
    cols.add_floats("ts", (e.ts for e in evs), n)
    cols.add("dur", np.zeros(n))
    cols.add_strings("pid", (e.pid for e in evs), n)
    cols.add_strings("tid", (e.tid for e in evs), n)
    cols.add_ints("device_type", (a.device_type for a in args), n, np.int32)
    cols.add_ints("device_id", (a.device_id for a in args), n, np.int32)
    cols.add_ints("addr", (a.addr for a in args), n)
    cols.add_ints("bytes", (a.alloc_bytes for a in args), n)
    cols.add_floats("total_allocated", (a.total_allocated for a in args), n)
    cols.add_floats("total_reserved", (a.total_reserved for a in args), n)


def _build_modules(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: List[str], _comms) -> None:
    cols.add_strings("name", (e.name[len(MODULE_PREFIX):] for e in evs), n)
    cols.add_floats("ts", (e.ts for e in evs), n)
    cols.add_floats("dur", (e.dur for e in evs), n)
    cols.add_strings("pid", (e.pid for e in evs), n)
    cols.add_strings("tid", (e.tid for e in evs), n)


# Every table also has "event": the row's index in traceEvents (to write augmented traces, link back).
_ORDER = {
    "ops": ("name", "ts", "dur", "ext_id", "pid", "tid", "rf_id", "seq", "fwd_tid", "kernel_flop", "kernel_num_gb",
            "shape", "module", "comm", "event"),
    "kernels": ("name", "ts", "dur", "ext_id", "device", "stream", "correlation", "registers", "shared_mem",
                "blocks_per_sm", "warps_per_sm", "occupancy", "grid", "block", "comm", "event"),
    "memops": ("kind", "name", "ts", "dur", "ext_id", "device", "stream", "correlation", "bytes", "bandwidth", "event"),
    "launches": ("kind", "name", "ts", "dur", "ext_id", "pid", "tid", "correlation", "device", "stream",
                 "wait_stream", "wait_corr", "event"),
    "annotations": ("kind", "name", "ts", "dur", "ext_id", "pid", "tid", "shape", "comm", "event"),
    "memory": ("ts", "dur", "pid", "tid", "device_type", "device_id", "addr", "bytes", "total_allocated",
               "total_reserved", "event"),
    "modules": ("name", "ts", "dur", "pid", "tid", "event"),
}


# ---------------------------------------------------------------------------------------------------------------

def _other_destination(e, canon: Optional[str]) -> Optional[Tuple[str, str]]:
    """(table, kind) of a timed event that is not a complete event of a TABLE_OF category (memory instants,
    module events), None for events no table keeps."""
    if e.ts is None:
        return None
    if e.ph in ("i", "I"):
        return ("memory", "") if e.name == MEMORY_EVENT else None
    if e.ph == "X" and canon == "python_function" and e.name.startswith(MODULE_PREFIX):
        return ("modules", "")
    return None


class _Reader:
    """State of one load: schema, column builders, counters."""

    def __init__(self, path: str, extra_args: Tuple[str, ...]) -> None:
        self.path = path
        self.extra_args = extra_args
        self.args_type, self.event_type = _make_schema(extra_args)
        self.decoder = msgspec.json.Decoder(List[self.event_type])
        self.empty_args = self.args_type()
        self.log = FieldLog()
        self.repairer = StructRepairer(self.event_type, self.log, "event",
                                       nested={"args": StructRepairer(self.args_type, self.log, "arg")})
        self.columns = {t: _Columns(t, self.log) for t in TABLES}
        self.extras: Dict[str, Dict[str, List[np.ndarray]]] = {t: {} for t in TABLES}
        self.shapes = Interner()
        self.comms = Interner()
        self.counts: Counter = Counter()
        self.malformed = 0
        self.t_min = np.inf
        self.t_max = -np.inf

    def feed(self, raws: Sequence[msgspec.Raw], first_index: int) -> None:
        """Decode events `first_index ...` of traceEvents into the tables."""
        evs = self._decode(raws)
        self.counts.update(e.cat for e in evs if e is not None)
        buckets: Dict[str, Tuple[List, List[str], List[int]]] = {t: ([], [], []) for t in TABLES}
        for i, e in enumerate(evs, first_index):
            if e is None:
                continue
            if e.ts is not None and not -_TS_LIMIT <= e.ts <= _TS_LIMIT:
                self.log.drop("event 'ts'", f"outside {-_TS_LIMIT:g}..{_TS_LIMIT:g} us: the event is left untimed")
                e.ts = None
            canon = CATEGORIES.get(e.cat) or CATEGORIES.get(e.cat.lower())
            dest = TABLE_OF.get(canon) if canon else None  # the common case, inline: no call per event
            if dest is None or e.ph != "X" or e.ts is None:
                dest = _other_destination(e, canon)
            if dest is not None:
                bucket = buckets[dest[0]]
                bucket[0].append(e)
                bucket[1].append(dest[1])
                bucket[2].append(i)
        for table, (chunk, kinds, index) in buckets.items():
            if chunk:
                self._add(table, chunk, kinds)
                self.columns[table].add("event", np.array(index, dtype=np.int64))

    def _decode(self, raws: Sequence[msgspec.Raw]) -> List:
        buf = b"[" + b",".join(raws) + b"]"
        try:
            return self.decoder.decode(buf)
        except (msgspec.ValidationError, UnicodeDecodeError):
            return self._decode_one_by_one(raws)

    def _decode_one_by_one(self, raws: Sequence[msgspec.Raw]) -> List:
        """Each event alone, so that a value of the wrong type spoils only its own field (see repair.py); an
        event that is not a JSON object is skipped (and counted)."""
        out = []
        for raw in raws:
            event = self.repairer.decode(raw)
            if event is None:
                self.malformed += 1
            out.append(event)  # None keeps positions aligned with traceEvents
        return out

    def _add(self, table: str, evs: List, kinds: List[str]) -> None:
        n = len(evs)
        empty = self.empty_args
        args = [e.args or empty for e in evs]
        cols = self.columns[table]
        _BUILDERS[table](cols, evs, args, n, self.shapes, kinds, self.comms)
        if self.extra_args:
            self._add_extras(table, args, n)
        if table in ("memory", "modules"):  # the trace's time range stays that of its activities
            return
        ts = cols.chunks["ts"][-1]
        end = ts + cols.chunks["dur"][-1]
        self.t_min = min(self.t_min, float(np.nanmin(ts)))
        self.t_max = max(self.t_max, float(np.nanmax(end)))

    def _add_extras(self, table: str, args: List, n: int) -> None:
        memo: Dict[bytes, Any] = {}
        for i, name in enumerate(self.extra_args):
            attr = _ARG_NAMES.get(name, f"x{i}")
            col = np.empty(n, dtype=object)
            col[:] = [_extra_value(getattr(a, attr), memo) for a in args]
            self.extras[table].setdefault(name, []).append(col)

    def finish(self) -> Dict[str, Table]:
        tables = {}
        for name in TABLES:
            columns = self.columns.pop(name)
            table = columns.finish(name, _ORDER[name])
            extras = self.extras.pop(name)
            for arg in list(extras):
                parts = extras.pop(arg)
                table.columns[arg] = np.concatenate(parts[::-1]) if parts else np.empty(0, dtype=object)
            if self.extra_args and not len(table):
                for arg in self.extra_args:
                    table.columns.setdefault(arg, np.empty(0, dtype=object))
            tables[name] = table
        return tables


_BUILDERS: Dict[str, Callable] = {
    "ops": _build_ops,
    "kernels": _build_kernels,
    "memops": _build_memops,
    "launches": _build_launches,
    "annotations": _build_annotations,
    "memory": _build_memory,
    "modules": _build_modules,
}


def _extra_value(value: Any, memo: Dict[bytes, Any]) -> Any:
    """Raw JSON args are decoded once per distinct value; typed ones pass through."""
    if not isinstance(value, msgspec.Raw):
        return value
    raw = bytes(value)
    if not raw:
        return None
    hit = memo.get(raw, memo)
    if hit is memo:
        try:
            hit = memo[raw] = msgspec.json.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            hit = memo[raw] = None
    return hit


# ---------------------------------------------------------------------------------------------------------------

Progress = Callable[[str, int, int], None]
_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)")


def load_kineto(path: "os.PathLike[str] | str", extra_args: Iterable[str] = (),
                progress: Optional[Progress] = None, max_bytes: Optional[int] = None) -> KinetoTrace:
    """Read a Kineto trace (`.json` or `.json.gz`) into tables.

    `extra_args` names event args to keep besides the standard ones (for example "Input Strides",
    "Module Hierarchy", "Collective name"); each becomes an object column in every table, None where absent.
    `progress(stage, done, total)` is called while reading ("read", bytes) and decoding ("decode", events).
    `max_bytes` caps the uncompressed size (default: `source.max_trace_bytes()`).
    Raises `TraceError` with a one-line reason for anything that is not a readable Kineto trace.
    """
    path = os.fspath(path)
    extra = tuple(dict.fromkeys(str(a) for a in extra_args))
    file_bytes = _file_size(path)
    buf = read_all(path, (lambda d, t: progress("read", d, t)) if progress else None, max_bytes)
    top = _decode_top(path, buf)
    events = top.traceEvents
    if not events:
        raise TraceError(path, "the trace has no events")
    top.traceEvents = None
    reader = _Reader(path, extra)
    for key in _HEADER_KEYS:
        setattr(top, key, decode_header_value(getattr(top, key), key, reader.log))
    total = len(events)
    # Last chunk first, truncating the slice list as we go: its memory shrinks while the tables grow.
    # The buffer's pages behind a decoded chunk go back to the OS, so memory stays near one copy of the JSON.
    for start in reversed(range(0, total, _CHUNK_EVENTS)):
        first = buf.offset_of(events[start])
        reader.feed(events[start:], start)
        del events[start:]
        buf.release_from(first)
        if progress:
            progress("decode", total - start, total)
    json_bytes = len(buf)
    del buf, events
    tables = reader.finish()
    devices = _devices(top, reader.log)
    meta = _meta(path, top, reader, tables, devices, file_bytes, json_bytes, total)
    return KinetoTrace(meta=meta, devices=devices, shapes=reader.shapes.items, comms=reader.comms.items, **tables)


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
