"""Streaming a snapshot's allocator history out of the unpickler while it loads, so that the per-entry dicts never
all exist at once.

The C unpickler builds each `device_traces` list by APPENDS in batches, and `pickle.dump` memoizes every dict and
list it writes, so both the list and its unpickler's memo hold every entry read so far. Every `STREAM_BYTES` of input,
`Drain` (called from the reader's input stream, between opcodes' reads) takes the entries completed so far out of
each trace list, hands them to a sink (which turns them into columns) and removes them, and their `frames` lists,
from the memo. Everything else in the memo stays, shared frame dicts and strings included, so later references to
them resolve as before. If the file later refers back to a removed entry, the unpickler fails with "Memo value not
found" (it never resolves to anything else) and the caller reads the file again without streaming (`StreamFallback`).

The memo is replaced through the documented `Unpickler.memo` attribute, copied from a helper unpickler's memo (the
dict form of the setter loses the entries on CPython 3.11). The helper loads only the bytes written here, and its
objects come from `persistent_load` out of a list held here, never from the file. Nothing here changes what the
file's own unpickler admits.
"""
from __future__ import annotations

import io
import pickle
import struct
from typing import Any, Dict, List, Protocol

STREAM_BYTES = 16 << 20  # input read between two drains: bounds the entries alive as Python objects
# A drain copies the whole memo: after one that keeps K entries, the next waits for at least K * this many bytes,
# so a file whose memo holds much that is never streamed (its trace lists not memoized, huge segments) is drained
# a few times, not every 16 MB.
_BYTES_PER_KEPT = 64


class StreamFallback(Exception):
    """Streaming cannot be trusted for this file: read it again whole."""


class EntrySink(Protocol):
    def take(self, trace: List[Any], entries: List[Any]) -> None:
        """Receive the next completed entries of the trace list `trace`, in file order."""


class _MemoSource(pickle.Unpickler):
    """Loads the bytes `_memo_pickle` writes: each object comes from the list given, by index."""

    def __init__(self, data: bytes, objects: List[Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.objects = objects

    def persistent_load(self, pid: Any) -> Any:  # noqa: D102 - only this module's own bytes reach it
        return self.objects[pid]


def _memo_pickle(indices: List[int]) -> bytes:
    """A pickle putting persistent object i under memo index indices[i], leaving nothing on the stack."""
    # BININT i, BINPERSID (the object), LONG_BINPUT index, POP
    return b"\x80\x04" + b"".join(b"J" + struct.pack("<i", i) + b"Qr" + struct.pack("<I", k) + b"0"
                                  for i, k in enumerate(indices)) + b"N."


def _is_entry(value: Any) -> bool:
    return value.__class__ is dict and "action" in value and isinstance(value["action"], str)


class Drain:
    """Takes completed trace entries out of `unpickler` every `every` bytes of input (see the module doc)."""

    def __init__(self, unpickler: pickle.Unpickler, sink: EntrySink, every: int = STREAM_BYTES) -> None:
        self.unpickler, self.sink, self.every = unpickler, sink, every
        self.next_at = every
        self.traces: Dict[int, List[Any]] = {}  # id -> trace list (held, so the id stays its own)

    def __call__(self, done: int) -> None:
        if done >= self.next_at:
            try:
                self.next_at = done + max(self.every, self.drain() * _BYTES_PER_KEPT)
            except (MemoryError, StreamFallback):
                raise
            except Exception:  # anything unforeseen here: the whole read again, never a half-streamed result
                raise StreamFallback() from None

    def drain(self) -> int:
        """Hand the completed entries over and take them out of the memo; returns the memo entries kept."""
        memo = self.unpickler.memo.copy()
        dropped: set = set()
        for value in memo.values():
            if value.__class__ is list and value and (id(value) in self.traces or _is_entry(value[0])):
                self.traces.setdefault(id(value), value)
                entries = value[:]
                del value[:]
                self.sink.take(value, entries)
                dropped.update(map(id, entries))
                dropped.update([id(f) for f in [e.get("frames") for e in entries if e.__class__ is dict]
                                if f.__class__ is list])
                del entries
        if not dropped:
            return len(memo)
        kept = [(k, v) for k, v in memo.items() if id(v) not in dropped]
        del memo
        source = _MemoSource(_memo_pickle([k for k, _ in kept]), [v for _, v in kept])
        source.load()
        n_kept = len(kept)
        del kept
        # the memo is an array as long as the file's highest index: setting an empty one first frees the old
        # before the new is copied in (two such arrays at once, not three; clear() would allocate a third)
        empty = _MemoSource(b"\x80\x04N.", [])
        empty.load()
        self.unpickler.memo = empty.memo
        self.unpickler.memo = source.memo
        return n_kept


def is_memo_miss(exc: BaseException) -> bool:
    """The unpickler's error for a reference to a memo entry that is not there (removed here, or a damaged file)."""
    return isinstance(exc, (pickle.UnpicklingError, KeyError)) and "memo" in str(exc).lower()
