"""Reader for tensor.trace files (the neutrino TensorTrace format, also written by `tb_gpuinsight.TensorTrace`).

One line per tensor seen at a call, fields separated by two spaces:

    [call]  <timestamp ns>  torch.Size([4, 32, 4096, 64])  <bytes>  <data pointer>  <arg name>  <function>  <file>:<line>

`[ret]` lines (returned tensors) have the same fields. The data pointer is documented as base 16 but the reference
writer prints decimal: digits only are decimal, `0x...` or digits with a-f are hex. The location is everything after
the seventh separator (paths may hold spaces); its line number is what follows the last colon. Malformed lines are
skipped and reported with their line numbers; the reader never raises on content, only on I/O.
"""
from __future__ import annotations

import functools
import io
import math
import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import TraceError
from .source import CAP_SETTINGS, max_trace_bytes, open_regular, os_error_reason
from .table import Interner, Table

SEP = "  "
KINDS = ("call", "ret")
MAX_ERRORS = 200  # errors kept in full; the count goes on
_SHAPE = re.compile(r"^(?:torch\.Size\()?\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]\)?$")
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]+$")
_MAX_PTR = (1 << 64) - 1
_MAX_INT = (1 << 63) - 1  # what an int64 column holds: larger numbers make the line malformed
_BLOCK = 1 << 16  # the first block, checked before anything else is read
MAX_LINE = 1 << 20  # a real line is under 1 KiB; longer ones are malformed, read in pieces of this size
_OVERLONG = "\0overlong"  # what `_lines` yields for a line longer than MAX_LINE (never a real line: no NULs)


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


_STRING_COLUMNS = ("kind", "shape", "name", "function", "file")
_INT_COLUMNS = ("ts", "ndim", "numel", "bytes", "line", "lineno")


class _Columns:
    def __init__(self) -> None:
        self.ints = {c: [] for c in _INT_COLUMNS}
        self.ptr: List[int] = []
        self.codes = {c: [] for c in _STRING_COLUMNS}
        self.interners = {c: Interner() for c in self.codes}
        for kind in KINDS:
            self.interners["kind"].code(kind)

    def add(self, rec: Tuple) -> None:
        kind, ts, shape, dims, nbytes, ptr, name, function, file, line, lineno = rec
        for col, value in zip(_STRING_COLUMNS, (kind, shape, name, function, file)):
            self.codes[col].append(self.interners[col].code(value))
        for col, value in zip(_INT_COLUMNS, (ts, len(dims), _numel(dims), nbytes, line, lineno)):
            self.ints[col].append(value)
        self.ptr.append(ptr)

    def table(self) -> Table:
        cols = {c: np.asarray(v, dtype=np.int64) for c, v in self.ints.items()}
        cols["ptr"] = np.asarray(self.ptr, dtype=np.uint64)
        cols.update({c: np.asarray(v, dtype=np.int32) for c, v in self.codes.items()})
        order = ("kind", "ts", "shape", "ndim", "numel", "bytes", "ptr", "name", "function", "file", "line", "lineno")
        return Table("tensors", {c: cols[c] for c in order}, {c: i.items for c, i in self.interners.items()})


def read_tensor_trace(path: "os.PathLike[str] | str") -> TensorTraceFile:
    """Read a tensor.trace file. Raises `TraceError` only when the file cannot be opened or read, or when its first
    block shows it is not a tensor.trace (binary data, no `[call]` / `[ret]` line), before the rest is read."""
    text_path = os.fspath(path)
    try:
        with open_regular(text_path) as raw:
            limit = max_trace_bytes()
            if os.fstat(raw.fileno()).st_size > limit:
                raise TraceError(text_path, f"is larger than {limit / 1e9:.3g} GB; raise the cap to read it ({CAP_SETTINGS})")
            f = io.BufferedReader(raw, _BLOCK)
            reason = _implausible(f.peek(_BLOCK)[:_BLOCK])
            if reason:
                raise TraceError(text_path, reason)
            return parse_lines(_lines(f, text_path), text_path)
    except OSError as exc:
        raise TraceError(text_path, os_error_reason(exc)) from None
    except MemoryError:
        raise TraceError(text_path, "out of memory while reading it") from None


def _implausible(head: bytes) -> str:
    """Why a file whose first block is `head` is not a tensor.trace ("" when it may be one)."""
    if b"\0" in head:
        return "binary data (NUL bytes), not a tensor.trace"
    if not head.strip():
        return "empty file" if not head else f"its first {len(head) // 1024 or 1} KiB are blank: not a tensor.trace"
    if not any(line.lstrip().startswith((b"[call]", b"[ret]")) for line in head.splitlines()):
        return "not a tensor.trace: no [call] or [ret] line in its first block"
    return ""


def _lines(f: BinaryIO, path: str) -> Iterator[str]:
    """The file's lines, decoded (invalid UTF-8 replaced), each at most MAX_LINE bytes: a longer line is read in
    pieces and yielded as one malformed line, so memory stays bounded whatever the file holds."""
    for line in iter(lambda: f.readline(MAX_LINE), b""):
        if len(line) == MAX_LINE and not line.endswith(b"\n"):
            _skip_rest(f, path, line)
            yield _OVERLONG
            continue
        yield line.decode("utf-8", "replace")


def _skip_rest(f: BinaryIO, path: str, piece: bytes) -> None:
    """Read past the rest of an overlong line; a line that is all padding (blanks, NULs) ends the reading."""
    while True:
        if len(piece) == MAX_LINE and not piece.strip(b" \t\r\n\0"):
            raise TraceError(path, f"holds over {MAX_LINE // 1024} KiB of padding (blanks or NUL bytes) in one line")
        if piece.endswith(b"\n"):
            return
        piece = f.readline(MAX_LINE)
        if not piece:
            return


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
    if line == _OVERLONG:
        return f"line longer than {MAX_LINE // 1024} KiB"
    parts = line.split(SEP, 7)
    if len(parts) < 8:
        return f"expected 8 fields separated by two spaces, found {len(parts)}"
    kind, ts, shape, nbytes, ptr, name, function, location = map(str.strip, parts)
    head = _kind_and_shape(kind, shape)  # repeated on most lines: parsed once per distinct value
    if isinstance(head, str):
        return head
    numbers = _int(ts), _int(nbytes), parse_pointer(ptr)
    for value, label, text in zip(numbers, ("timestamp", "byte count", "data pointer"), (ts, nbytes, ptr)):
        if value is None or value < 0:
            return f"bad {label} {text[:40]!r}"
    if not name or not function:
        return "empty argument or function name"
    file, line_no = split_location(location)
    return (head[0], numbers[0], head[1], head[2], numbers[1], numbers[2], name, function, file, line_no, lineno)


@functools.lru_cache(maxsize=4096)
def _kind_and_shape(kind: str, shape: str):
    """(kind, shape text, dims) of a line, or the reason they are malformed."""
    if kind not in ("[call]", "[ret]"):
        return f"unknown record kind {kind[:20]!r} (expected [call] or [ret])"
    dims = parse_shape(shape)
    if dims is None:
        return f"bad shape {shape[:40]!r}"
    if math.prod(map(float, dims)) > _MAX_INT:
        return f"shape too large {shape[:40]!r}"
    return kind[1:-1], "[" + ", ".join(map(str, dims)) + "]", dims


@functools.lru_cache(maxsize=4096)
def _numel(dims: Tuple[int, ...]) -> int:
    return math.prod(dims)  # at most an int64: `_kind_and_shape` refused larger shapes


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
    value = int(text) if text.isdigit() else int(text, 16)  # digits only: decimal; else `0x..` or a-f: hex
    return value if value <= _MAX_PTR else None


@functools.lru_cache(maxsize=4096)
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
