"""Reader for tensor.trace files (the neutrino TensorTrace format, also written by `tb_gpuinsight.TensorTrace`).

One line per tensor seen at a call, fields separated by two spaces:

    [call]  <timestamp ns>  torch.Size([4, 32, 4096, 64])  <bytes>  <data pointer>  <arg name>  <function>  <file>:<line>

`[ret]` lines (returned tensors) have the same fields. The data pointer is documented as base 16 but the reference
writer prints decimal: digits only are decimal, `0x...` or digits with a-f are hex. The location is everything after
the seventh separator (paths may hold spaces); its line number is what follows the last colon. Malformed lines are
skipped and reported with their line numbers; the reader never raises on content, only on I/O.
"""
from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

import numpy as np

from ..errors import TraceError
from .source import max_trace_bytes, open_regular, os_error_reason
from .table import Interner, Table

SEP = "  "
KINDS = ("call", "ret")
MAX_ERRORS = 200  # errors kept in full; the count goes on
_SHAPE = re.compile(r"^(?:torch\.Size\()?\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]\)?$")
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]+$")
_MAX_PTR = (1 << 64) - 1
_MAX_INT = (1 << 63) - 1  # what an int64 column holds: larger numbers make the line malformed


@dataclass
class TensorTraceFile:
    """A tensor.trace as a table, one row per line read.

    Columns: `kind` ("call" / "ret"), `ts` (int64 ns), `shape` (text "[4, 32]"), `ndim`, `numel`, `bytes`,
    `ptr` (uint64), `name`, `function`, `file` (string columns are codes, see `Table`), `line` (-1 if none),
    `lineno` (line number in the file). `errors`: (line number, reason) of malformed lines, the first MAX_ERRORS;
    `error_count`: all of them.
    """
    path: str
    table: Table
    errors: List[Tuple[int, str]] = field(default_factory=list)
    error_count: int = 0
    lines: int = 0

    def __len__(self) -> int:
        return len(self.table)

    def to_pandas(self):
        """The records as a DataFrame; `ptr` as hex text, `shape` / `name` / `function` / `file` as text."""
        df = self.table.to_pandas()
        df["ptr"] = [hex(int(p)) for p in self.table["ptr"]]
        return df


class _Columns:
    def __init__(self) -> None:
        self.ints = {c: [] for c in ("ts", "ndim", "numel", "bytes", "line", "lineno")}
        self.ptr: List[int] = []
        self.codes = {c: [] for c in ("kind", "shape", "name", "function", "file")}
        self.interners = {c: Interner() for c in self.codes}
        for kind in KINDS:
            self.interners["kind"].code(kind)

    def add(self, rec: Tuple) -> None:
        kind, ts, shape, dims, nbytes, ptr, name, function, file, line, lineno = rec
        for col, value in (("kind", kind), ("shape", shape), ("name", name), ("function", function), ("file", file)):
            self.codes[col].append(self.interners[col].code(value))
        numel = int(np.prod(dims, dtype=np.float64)) if dims else 1
        for col, value in (("ts", ts), ("ndim", len(dims)), ("numel", numel), ("bytes", nbytes), ("line", line),
                           ("lineno", lineno)):
            self.ints[col].append(value)
        self.ptr.append(ptr)

    def table(self) -> Table:
        cols = {c: np.asarray(v, dtype=np.int64) for c, v in self.ints.items()}
        cols["ptr"] = np.asarray(self.ptr, dtype=np.uint64)
        cols.update({c: np.asarray(v, dtype=np.int32) for c, v in self.codes.items()})
        order = ("kind", "ts", "shape", "ndim", "numel", "bytes", "ptr", "name", "function", "file", "line", "lineno")
        return Table("tensors", {c: cols[c] for c in order}, {c: i.items for c, i in self.interners.items()})


def read_tensor_trace(path: "os.PathLike[str] | str") -> TensorTraceFile:
    """Read a tensor.trace file. Raises `TraceError` only when the file cannot be opened or read."""
    text_path = os.fspath(path)
    try:
        with open_regular(text_path) as raw:
            limit = max_trace_bytes()
            if os.fstat(raw.fileno()).st_size > limit:
                raise TraceError(text_path, f"is larger than {limit / 1e9:.3g} GB; raise --max-trace-gb to read it")
            with io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace") as f:
                return parse_lines(f, text_path)
    except OSError as exc:
        raise TraceError(text_path, os_error_reason(exc)) from None
    except MemoryError:
        raise TraceError(text_path, "out of memory while reading it") from None


def parse_lines(lines: Iterable[str], path: str = "<lines>") -> TensorTraceFile:
    """Parse tensor.trace lines (an open file, a list of strings); blank lines are ignored."""
    cols = _Columns()
    errors: List[Tuple[int, str]] = []
    count = n = 0
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        rec = parse_line(line, n)
        if isinstance(rec, str):
            count += 1
            if len(errors) < MAX_ERRORS:
                errors.append((n, rec))
            continue
        cols.add(rec)
    return TensorTraceFile(path, cols.table(), errors, count, n)


def parse_line(line: str, lineno: int = 0):
    """The fields of one line as a tuple, or a one-line reason (str) why it is malformed."""
    parts = line.split(SEP, 7)
    if len(parts) < 8:
        return f"expected 8 fields separated by two spaces, found {len(parts)}"
    kind, ts, shape, nbytes, ptr, name, function, location = (p.strip() for p in parts)
    if kind not in ("[call]", "[ret]"):
        return f"unknown record kind {kind[:20]!r} (expected [call] or [ret])"
    dims = parse_shape(shape)
    if dims is None:
        return f"bad shape {shape[:40]!r}"
    if float(np.prod(dims, dtype=np.float64)) > _MAX_INT:
        return f"shape too large {shape[:40]!r}"
    numbers = _int(ts), _int(nbytes), parse_pointer(ptr)
    for value, label, text in zip(numbers, ("timestamp", "byte count", "data pointer"), (ts, nbytes, ptr)):
        if value is None or value < 0:
            return f"bad {label} {text[:40]!r}"
    if not name or not function:
        return "empty argument or function name"
    file, line_no = split_location(location)
    return (kind[1:-1], numbers[0], "[" + ", ".join(map(str, dims)) + "]", dims, numbers[1], numbers[2],
            name, function, file, line_no, lineno)


def parse_shape(text: str) -> Optional[Tuple[int, ...]]:
    """`torch.Size([4, 32])`, `[4, 32]` or `torch.Size([])` -> dims; None when not a shape."""
    m = _SHAPE.match(text.strip())
    if not m:
        return None
    dims = tuple(_int(d.strip()) for d in m.group(1).split(",")) if m.group(1) else ()
    return None if None in dims else dims


def parse_pointer(text: str) -> Optional[int]:
    """A data pointer, decimal or hex (`0x7f..`, or bare digits with a-f); None when neither, or over 64 bits."""
    if len(text) > 20 or not _HEX.match(text):  # 64 bits are at most 20 digits (or 0x + 16)
        return None
    is_hex = text[:2].lower() == "0x" or any(c in "abcdefABCDEF" for c in text)
    value = int(text, 16) if is_hex else int(text)
    return value if value <= _MAX_PTR else None


def split_location(location: str) -> Tuple[str, int]:
    """`path/to/file.py:12` -> (path, 12); no line number -> (location, -1)."""
    head, sep, tail = location.rpartition(":")
    number = _int(tail) if sep else None
    if number is not None and number <= 0x7FFFFFFF:
        return head, number
    return location, -1


def _int(text: str) -> Optional[int]:
    # Plain ASCII digits only: int() alone would also take "1_000" and "+5"; at most an int64.
    if not (text.isascii() and text.isdigit() and len(text) <= 19):
        return None
    value = int(text)
    return value if value <= _MAX_INT else None


__all__ = ["TensorTraceFile", "read_tensor_trace", "parse_lines", "parse_line", "parse_shape", "parse_pointer",
           "split_location"]
