"""Column builders of the Kineto reader: one per table, fed chunk by chunk with decoded events; numbers outside
their sane ranges are made absent (and counted) here, once, at read time."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import msgspec
import numpy as np

from .events import MODULE_PREFIX, _NO_ID, _comm_values
from .repair import FieldLog
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
