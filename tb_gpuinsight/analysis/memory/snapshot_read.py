"""Safe reading of PyTorch CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`, the file pytorch.org/memory_viz
opens): a pickled dict of plain data, `segments` (each with its `blocks`) and `device_traces` (per device, the
allocator's history: alloc / free_requested / free_completed / segment_alloc / segment_free / oom / snapshot).

A pickle can run code while it loads: it names a callable (GLOBAL / STACK_GLOBAL / EXT opcodes, all resolved by
`find_class`) and calls it (REDUCE, BUILD, NEWOBJ, INST, OBJ). A snapshot holds no Python object at all, only dicts,
lists, tuples, strings, numbers, booleans and None, so `_PlainUnpickler.find_class` refuses every name and nothing
the file names is ever imported or called; persistent ids are refused by the unpickler itself.

Memory: given a sink (`snapshot_model.load_snapshot` gives one), the allocator history streams out of the unpickler
while it loads (`snapshot_stream`): every 16 MB of input the entries completed so far become columns and their dicts
are freed, so they never all exist at once. Without a sink the whole file is unpickled at once.
The file's uncompressed size is capped by the same setting as a trace's (`max_trace_bytes`); the reader stops
reading at the cap, so a gzip bomb cannot fill memory.
"""
from __future__ import annotations

import gzip
import io
import os
import pickle
import zlib
from typing import Any, Callable, Dict, Optional

from ...errors import TraceError
from ...trace.source import CAP_SETTINGS, max_trace_bytes, open_regular, os_error_reason
from .snapshot_stream import STREAM_BYTES, Drain, EntrySink, StreamFallback, is_memo_miss

GZIP_MAGIC = b"\x1f\x8b"
PICKLE_MAGIC = b"\x80"  # PROTO opcode: protocol 2 and later (torch writes 4 or 5)
SUFFIXES = (".pickle", ".pickle.gz", ".pkl", ".pkl.gz")


class SnapshotError(TraceError):
    """A file that is not a readable memory snapshot; the reason is one line."""


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain containers, strings and numbers only: any named Python object is refused unloaded."""

    def find_class(self, module: str, name: str):  # noqa: D102 - the only way a pickle reaches code
        raise pickle.UnpicklingError(f"refused: the file names the Python object {module}.{name}"[:160])


class _Capped(io.RawIOBase):
    """A readable stream that fails once more than `limit` bytes were read from it (a size cap, a gzip bomb)."""

    def __init__(self, inner, limit: int) -> None:
        super().__init__()
        self.inner, self.limit, self.done = inner, limit, 0
        self.on_read: Optional[Callable[[int], None]] = None  # told the bytes read so far, after each read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        self.done += n or 0
        if self.done > self.limit:
            raise _TooLarge()
        if self.on_read is not None:
            self.on_read(self.done)
        return n


class _TooLarge(Exception):
    pass


def looks_like_snapshot(path: "os.PathLike[str] | str") -> bool:
    """True when the name says memory snapshot (`.pickle`, `.pickle.gz`, `.pkl[.gz]`)."""
    return os.fspath(path).lower().endswith(SUFFIXES)


def read_snapshot(path: "os.PathLike[str] | str", limit: int = 0, sink: Optional[EntrySink] = None,
                  stream_bytes: int = STREAM_BYTES) -> Dict[str, Any]:
    """The snapshot dict of `path` (plain or gzip'd), checked to be a snapshot. Raises SnapshotError with a one-line
    reason for anything else: not a pickle, a pickle naming code, cut short, damaged, over the size cap.

    With a `sink`, trace entries are handed to it while loading and taken out of their lists (see the module doc);
    the lists in the dict returned hold only the entries after the last hand-over. Raises StreamFallback where the
    file refers back to an entry handed over: read it again without a sink."""
    limit = limit or max_trace_bytes()
    try:
        raw = open_regular(path)
    except OSError as exc:
        raise SnapshotError(path, os_error_reason(exc)) from None
    with raw:
        head = raw.read(2)
        raw.seek(0)
        zipped = head == GZIP_MAGIC
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if zipped else raw
        counted = _Capped(stream, limit)
        capped = io.BufferedReader(counted, min(1 << 20, stream_bytes))
        try:
            first = capped.peek(1)[:1]
            if first != PICKLE_MAGIC:
                what = "empty" if not first else "not a pickle (protocol 2 or later) and not gzip"
                raise SnapshotError(path, f"{what}: a memory snapshot is the file that "
                                          "torch.cuda.memory._dump_snapshot writes")
            unpickler = _PlainUnpickler(capped)
            if sink is not None:
                counted.on_read = Drain(unpickler, sink, stream_bytes)
            data = unpickler.load()
        except (SnapshotError, StreamFallback):
            raise
        except _TooLarge:
            raise SnapshotError(path, f"{'inflates past' if zipped else 'is larger than'} {limit / 1e9:.3g} GB; "
                                      f"raise the cap to read it ({CAP_SETTINGS})") from None
        except pickle.UnpicklingError as exc:
            if sink is not None and is_memo_miss(exc):
                raise StreamFallback() from None
            if "truncated" not in str(exc):
                raise SnapshotError(path, _reason(exc)) from None
            raise SnapshotError(path, _CUT, incomplete=True) from None
        except EOFError:
            raise SnapshotError(path, _CUT, incomplete=True) from None
        except (OSError, zlib.error) as exc:  # damaged gzip (bad CRC, bad data) or a read error
            raise SnapshotError(path, f"damaged {'gzip ' if zipped else ''}data: {exc}"[:200]) from None
        except MemoryError:
            raise SnapshotError(path, f"out of memory while reading the snapshot ({CAP_SETTINGS})") from None
        except Exception as exc:  # any other malformed opcode stream: one line, never a traceback
            raise SnapshotError(path, f"damaged pickle: {type(exc).__name__}: {exc}"[:200]) from None
    if isinstance(data, list) and data and all(isinstance(x, dict) and "blocks" in x for x in data):
        data = {"segments": data, "device_traces": []}  # torch.cuda.memory_snapshot(): the segments alone
    check_shape(path, data)
    return data


NOT_AN_ENTRY = "a 'device_traces' entry is not a dict with an 'action': not a memory snapshot"
_CUT = "cut short: the pickle ends before its STOP (a truncated or unfinished file)"


def _reason(exc: pickle.UnpicklingError) -> str:
    text = str(exc)
    if text.startswith("refused"):
        return f"{text}; a memory snapshot holds only plain data, so this pickle is not loaded (it could run code)"
    if "persistent" in text:
        return "refused: the pickle uses persistent ids; a memory snapshot holds only plain data"
    return f"damaged pickle: {text}"[:200]


def check_shape(path, data: Any) -> None:
    """Raise SnapshotError unless `data` has a snapshot's shape: a dict with a `segments` and/or `device_traces`
    list, every trace entry a dict with an `action`."""
    if not isinstance(data, dict) or not ("segments" in data or "device_traces" in data):
        kind = type(data).__name__
        raise SnapshotError(path, f"a pickled {kind} without 'segments' or 'device_traces': not a memory snapshot")
    segments, traces = data.get("segments", []), data.get("device_traces", [])
    if not isinstance(segments, list) or not all(isinstance(s, dict) for s in segments):
        raise SnapshotError(path, "'segments' is not a list of dicts: not a memory snapshot")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError(path, "'device_traces' is not a list of lists: not a memory snapshot")
    for trace in traces:
        if not all(isinstance(e, dict) and isinstance(e.get("action"), str) for e in trace):
            raise SnapshotError(path, NOT_AN_ENTRY)
