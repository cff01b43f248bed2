"""Column builders of the Kineto reader: one per table, fed chunk by chunk with decoded events; numbers outside
their sane ranges are made absent (and counted) here, once, at read time."""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import msgspec
import numpy as np

from .events import COMM_ARGS, MODULE_PREFIX, NO_RAW, _NO_ID, _comm_values
from .repair import FieldLog
from .strides import ZERO_STRIDE
from .table import Interner, Table


def _float_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (OverflowError, TypeError, ValueError):
        return float("nan")



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


# Columns are built from whole lists in C (numpy conversions, map over getters) rather than one value at a time in
# Python; False selects the one-by-one reference path, which gives identical tables (a test compares them).
FAST = True


_NAN_FOR_NONE = {None: float("nan")}


def as_float64(values: List) -> np.ndarray:
    """Numbers (None as NaN) as float64, in C loops. numpy converts None slowly, so a list whose first value is
    absent (most likely an arg that is mostly absent) is checked first: all absent costs no conversion, some
    absent are mapped to NaN. Raises what np.array raises (an integer beyond any float)."""
    n = len(values)
    if n and values[0] is None:
        if values.count(None) == n:
            return np.full(n, np.nan)
        values = list(map(_NAN_FOR_NONE.get, values, values))
    return np.array(values, dtype=np.float64).reshape(n)


_NO_ID_FOR_NONE = {None: _NO_ID}
_INT_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in (np.int32, np.int64)}


def _exact_ints(values: List[Optional[int]], dtype) -> Optional[np.ndarray]:
    """Integers (None as -1) converted in C straight to int64 (no float round trip, so every int64 is exact), or
    None when a value does not fit `dtype` or is no integer (then the one-by-one path decides, and counts)."""
    n = len(values)
    if n and values[0] is None and values.count(None) == n:  # an arg this chunk never has: no conversion
        return np.full(n, _NO_ID, dtype=dtype)
    if None in values:
        values = list(map(_NO_ID_FOR_NONE.get, values, values))
    try:
        arr = np.array(values, dtype=np.int64).reshape(n)
    except (OverflowError, TypeError, ValueError):
        return None
    lo, hi = _INT_RANGE[np.dtype(dtype)]
    if np.dtype(dtype) != np.int64 and n and (arr.min() < lo or arr.max() > hi):  # int32 columns
        return None
    return arr.astype(dtype, copy=False)


class Kinds(NamedTuple):
    """The rows' kinds within their table: each row's destination code and the kind name of every code."""
    codes: np.ndarray
    names: List[str]

    def names_of_rows(self) -> List[str]:
        return list(map(self.names.__getitem__, self.codes.tolist()))


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
        values = values if isinstance(values, list) else list(values)
        lo, hi = _INT_LIMITS.get(col) or _INT_RANGE[np.dtype(dtype)]
        arr = _exact_ints(values, dtype) if FAST else None
        if arr is None:
            arr = self._ints_one_by_one(col, values, n, dtype, lo, hi)
        else:
            out = (arr < lo) | (arr > hi)
            out &= arr != _NO_ID
            if out.any():
                self.log.drop(f"{self.table} {col}", f"outside {lo:,}..{hi:,}", int(out.sum()))
                arr[out] = _NO_ID
        self.add(col, arr)

    def _ints_one_by_one(self, col: str, values: List, n: int, dtype, lo: int, hi: int) -> np.ndarray:
        """The reference path (and the one for values beyond the column's type)."""
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
        return arr

    def add_floats(self, col: str, values: Iterable[Optional[float]], n: int) -> None:
        values = values if isinstance(values, list) else list(values)
        try:
            if not FAST:
                raise OverflowError
            arr = as_float64(values)
        except (OverflowError, TypeError, ValueError):  # an integer beyond any float
            arr = np.fromiter((np.nan if v is None else _float_or_nan(v) for v in values), dtype=np.float64, count=n)
        lo, hi = _FLOAT_LIMITS.get(col, (-np.inf, np.inf))
        with np.errstate(invalid="ignore"):  # NaN (absent) is never out of range; +-inf always is
            bad = np.isinf(arr) if col not in _FLOAT_LIMITS else (arr < lo) | (arr > hi)
        if bad.any():  # infinite or absurd times, FLOPs or sizes are not measurements: absent, and counted
            taken = f", taken as {_ABSENT[col]:g}" if col in _ABSENT else ""
            self.log.drop(f"{self.table} {col}", f"not finite or outside {lo:g}..{hi:g}{taken}", int(bad.sum()))
            arr[bad] = _ABSENT.get(col, np.nan)
        self.add(col, arr)

    def add_kinds(self, kinds: "Kinds", n: int) -> None:
        """The "kind" column from each row's destination code: one lookup per distinct code, not per row; codes
        are given in the order kinds are first met, as add_strings gives them."""
        if not FAST:
            self.add_strings("kind", kinds.names_of_rows(), n)
            return
        codes = self.interners.setdefault("kind", Interner()).codes
        uniq, first = np.unique(kinds.codes, return_index=True)
        lookup = np.full(int(uniq[-1]) + 1 if len(uniq) else 0, _NO_ID, dtype=np.int32)
        for dest in uniq[np.argsort(first, kind="stable")].tolist():
            lookup[dest] = codes[kinds.names[dest]]
        self.add("kind", lookup[kinds.codes])

    def add_strings(self, col: str, values: Iterable, n: int) -> None:
        interner = self.interners.setdefault(col, Interner())
        if not FAST:
            self.add(col, np.fromiter(interner.encode(values), dtype=np.int32, count=n))
            return
        # A new value gets the next code on lookup (table._Codes): first-seen order, as the one-by-one path gives.
        self.add(col, np.fromiter(map(interner.codes.__getitem__, values), dtype=np.int32, count=n))

    def finish(self, name: str, order: Sequence[str]) -> Table:
        columns, strings = {}, {}
        for col in order:
            # Pop each column's chunks as it is joined so that parts and whole never all coexist.
            parts = self.chunks.pop(col, None)
            columns[col] = (np.concatenate(parts) if parts else
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


_STRING_COLUMNS = {"name", "kind", "pid", "tid", "grid", "block", "module", "kernel_file", "stack"}
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


_GETTERS: Dict[str, Callable] = {}


def _of(items: List, attr: str) -> List:
    """One attribute of every event or args struct, gathered in C."""
    return list(map(_getter(attr), items))


def _any(items: List, attr: str) -> bool:
    """Whether any event or args struct has a true `attr`; stops at the first, and builds no list."""
    return any(map(_getter(attr), items))


def _getter(attr: str) -> Callable:
    get = _GETTERS.get(attr)
    if get is None:
        get = _GETTERS[attr] = operator.attrgetter(attr)
    return get


def _either(args: List, attr: str, fallback: str) -> List:
    """`attr` of each args struct, `fallback`'s value where it is absent (None)."""
    values = _of(args, attr)
    if None not in values:
        return values
    return [v if v is not None else getattr(a, fallback) for v, a in zip(values, args)]


def _ext_ids(args: List) -> List[Optional[int]]:
    return _either(args, "ext", "ext_legacy")


def _common(cols: _Columns, evs: List, args: List, n: int) -> None:
    # "ts" comes from the reader: it read every event's time to route it (_Reader._destinations).
    cols.add_strings("name", _of(evs, "name"), n)
    cols.add_floats("dur", _of(evs, "dur"), n)
    cols.add_ints("ext_id", _ext_ids(args), n)


def _build_ops(cols: _Columns, evs: List, args: List, n: int, shapes: Interner, _kinds: Kinds,
               comms: Interner) -> None:
    _common(cols, evs, args, n)
    cols.add_strings("pid", _of(evs, "pid"), n)
    cols.add_strings("tid", _of(evs, "tid"), n)
    cols.add_ints("rf_id", _of(args, "rf_id"), n)
    cols.add_ints("seq", _of(args, "seq"), n)
    cols.add_ints("fwd_tid", _of(args, "fwd_tid"), n)
    cols.add_floats("kernel_flop", _of(args, "kernel_flop"), n)
    cols.add_floats("kernel_num_gb", _of(args, "kernel_num_gb"), n)
    cols.add_strings("kernel_file", _of(args, "kernel_file"), n)
    cols.add_strings("stack", _of(args, "stack"), n)
    cols.add("shape", _shape_codes(args, shapes, n))
    cols.add_strings("module", _of(args, "module"), n)
    _add_comm(cols, args, n, comms)


_NO_COMM = (NO_RAW,) * len(COMM_ARGS)


def _add_comm(cols: _Columns, args: List, n: int, comms: Interner) -> None:
    """Each event's collective-args code (-1: none); the 16 args of all events are gathered and tested in C."""
    sets = list(map(_comm_values, args))
    codes = np.full(n, _NO_ID, dtype=np.int32)
    if sets.count(_NO_COMM) == n:  # the usual chunk: no event has any of them (absent args are one object)
        cols.add("comm", codes)
        return
    for i in np.flatnonzero(np.fromiter(map(any, sets), dtype=bool, count=n)).tolist():
        codes[i] = comms.code(tuple(bytes(r) for r in sets[i]))  # most events carry none of these args
    cols.add("comm", codes)


def _shape_codes(args: List, shapes: Interner, n: int) -> np.ndarray:
    """Each event's shape signature code; traces recorded without shapes skip the per-event work."""
    if not (_any(args, "dims") or _any(args, "dims_legacy") or _any(args, "types")):
        return np.full(n, _NO_ID, dtype=np.int32)
    return np.fromiter((_shape_code(a, shapes) for a in args), dtype=np.int32, count=n)


def _shape_code(a, shapes: Interner) -> int:
    dims = a.dims or a.dims_legacy
    if not dims and not a.types:
        return _NO_ID
    key = (bytes(dims), bytes(a.types), bytes(a.concrete))
    return shapes.code(key + (bytes(a.strides),) if ZERO_STRIDE.search(a.strides) else key)


def _devices(evs: List, args: List) -> List[Optional[int]]:
    """The `device` arg, else the event's pid when it is a number (2021 traces)."""
    devices = _of(args, "device")
    if None not in devices:
        return devices
    return [d if d is not None else (e.pid if isinstance(e.pid, int) else None) for d, e in zip(devices, evs)]


def _streams(args: List) -> List[Optional[int]]:
    return _ints_or_text(_of(args, "stream"))


def _ints_or_text(values: List) -> List[Optional[int]]:
    """Int args some writers print as text ("0x0"): parsed only when a text value is there."""
    if str not in set(map(type, values)):
        return values
    return list(map(_stream_id, values))


def _stream_id(value: Union[int, str, None]) -> Optional[int]:
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value, 0)
    except ValueError:
        return None


def _build_kernels(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: Kinds,
                   comms: Interner) -> None:
    _common(cols, evs, args, n)
    cols.add_ints("device", _devices(evs, args), n, np.int32)
    cols.add_ints("stream", _streams(args), n)
    cols.add_ints("correlation", _of(args, "correlation"), n)
    cols.add_ints("registers", _of(args, "registers"), n, np.int32)
    cols.add_ints("shared_mem", _of(args, "shared_mem"), n)
    cols.add_floats("blocks_per_sm", _of(args, "blocks_per_sm"), n)
    cols.add_floats("warps_per_sm", _of(args, "warps_per_sm"), n)
    cols.add_floats("occupancy", _either(args, "occupancy", "occupancy_legacy"), n)
    cols.add_strings("grid", list(map(bytes, _of(args, "grid"))), n)
    cols.add_strings("block", list(map(bytes, _of(args, "block"))), n)
    cols.add_ints("graph_node", _ints_or_text(_of(args, "graph_node")), n)
    _add_comm(cols, args, n, comms)


def _build_memops(cols: _Columns, evs: List, args: List, n: int, _shapes, kinds: Kinds, _comms) -> None:
    cols.add_kinds(kinds, n)
    _common(cols, evs, args, n)
    cols.add_ints("device", _devices(evs, args), n, np.int32)
    cols.add_ints("stream", _streams(args), n)
    cols.add_ints("correlation", _of(args, "correlation"), n)
    cols.add_floats("bytes", _of(args, "nbytes"), n)
    cols.add_floats("bandwidth", _of(args, "bandwidth"), n)


def _build_launches(cols: _Columns, evs: List, args: List, n: int, _shapes, kinds: Kinds, _comms) -> None:
    cols.add_kinds(kinds, n)
    _common(cols, evs, args, n)
    cols.add_strings("pid", _of(evs, "pid"), n)
    cols.add_strings("tid", _of(evs, "tid"), n)
    cols.add_ints("correlation", _of(args, "correlation"), n)
    # Sync events name their device and stream, and what they wait on; runtime calls of ROCm carry a stream.
    cols.add_ints("device", _of(args, "device"), n, np.int32)
    cols.add_ints("stream", _streams(args), n)
    cols.add_ints("wait_stream", _of(args, "wait_stream"), n)
    cols.add_ints("wait_corr", _of(args, "wait_corr"), n)


def _build_annotations(cols: _Columns, evs: List, args: List, n: int, shapes: Interner, kinds: Kinds,
                       comms: Interner) -> None:
    cols.add_kinds(kinds, n)
    _common(cols, evs, args, n)
    cols.add_strings("pid", _of(evs, "pid"), n)
    cols.add_strings("tid", _of(evs, "tid"), n)
    # nccl:/gloo: annotations carry the collective's tensor (Input Dims / Input type): its size.
    cols.add("shape", _shape_codes(args, shapes, n))
    _add_comm(cols, args, n, comms)


def _build_memory(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: Kinds, _comms) -> None:
    """[memory] events: Bytes > 0 allocates, < 0 frees; the totals are absent before torch 1.10 (NaN)."""
    cols.add("dur", np.zeros(n))
    cols.add_strings("pid", _of(evs, "pid"), n)
    cols.add_strings("tid", _of(evs, "tid"), n)
    cols.add_ints("device_type", _of(args, "device_type"), n, np.int32)
    cols.add_ints("device_id", _of(args, "device_id"), n, np.int32)
    cols.add_ints("addr", _of(args, "addr"), n)
    cols.add_ints("bytes", _of(args, "alloc_bytes"), n)
    cols.add_floats("total_allocated", _of(args, "total_allocated"), n)
    cols.add_floats("total_reserved", _of(args, "total_reserved"), n)


def _build_modules(cols: _Columns, evs: List, args: List, n: int, _shapes, _kinds: Kinds, _comms) -> None:
    cols.add_strings("name", [name[len(MODULE_PREFIX):] for name in _of(evs, "name")], n)
    cols.add_floats("dur", _of(evs, "dur"), n)
    cols.add_strings("pid", _of(evs, "pid"), n)
    cols.add_strings("tid", _of(evs, "tid"), n)


# Every table also has "event": the row's index in traceEvents (to write augmented traces, link back).
_ORDER = {
    "ops": ("name", "ts", "dur", "ext_id", "pid", "tid", "rf_id", "seq", "fwd_tid", "kernel_flop", "kernel_num_gb",
            "kernel_file", "stack", "shape", "module", "comm", "event"),
    "kernels": ("name", "ts", "dur", "ext_id", "device", "stream", "correlation", "registers", "shared_mem",
                "blocks_per_sm", "warps_per_sm", "occupancy", "grid", "block", "graph_node", "comm", "event"),
    "memops": ("kind", "name", "ts", "dur", "ext_id", "device", "stream", "correlation", "bytes", "bandwidth", "event"),
    "launches": ("kind", "name", "ts", "dur", "ext_id", "pid", "tid", "correlation", "device", "stream",
                 "wait_stream", "wait_corr", "event"),
    "annotations": ("kind", "name", "ts", "dur", "ext_id", "pid", "tid", "shape", "comm", "event"),
    "memory": ("ts", "dur", "pid", "tid", "device_type", "device_id", "addr", "bytes", "total_allocated",
               "total_reserved", "event"),
    "modules": ("name", "ts", "dur", "pid", "tid", "event"),
}



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
