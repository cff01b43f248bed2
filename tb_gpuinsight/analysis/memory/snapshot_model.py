"""A memory snapshot in columns: per device its allocator history as numpy arrays, the segments and blocks at the
dump, and one table of distinct call stacks (each event keeps a stack id, not its frames).

Built while the file loads: the allocator history streams out of the unpickler into column chunks
(`snapshot_stream`), and one stack id per distinct list of frame objects is looked up, so a stack's frames are
converted once however many entries share them. The rest of the dict (segments, the last entries) is converted after
loading and dropped as it goes, so that only the columns stay in memory.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .snapshot_read import NOT_AN_ENTRY, SnapshotError, read_snapshot
from .snapshot_stream import STREAM_BYTES, StreamFallback

# Trace entry actions, in the allocator's words (torch.cuda.memory._snapshot's TraceEntry).
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot")
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, OOM, SNAPSHOT = \
    range(len(ACTIONS))
OTHER_ACTION = len(ACTIONS)
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")
INACTIVE = 2

Frame = Tuple[str, int, str]  # (filename, line, function)
NO_STACK = 0  # stack id of an event recorded without frames

# Frames that are not the user's code: torch and other installed packages, the standard library, C++ sources.
_INTERNAL = re.compile(r"[\\/](site|dist)-packages[\\/]|[\\/]torch[\\/]|[\\/]lib[\\/]python\d|^<|^\?\?$"
                       r"|\.(c|cc|cpp|cxx|h|hpp|cu|cuh)$", re.IGNORECASE)
_NATIVE = re.compile(r"\.(c|cc|cpp|cxx|h|hpp|cu|cuh)$|^\?\?$", re.IGNORECASE)


@dataclass
class History:
    """One device's recorded allocator history, one row per trace entry in recorded order."""
    device: int
    action: np.ndarray  # int8, index into ACTIONS (OTHER_ACTION for an action this reader does not know)
    addr: np.ndarray  # int64; for an OOM the bytes CUDA still reported free
    size: np.ndarray  # int64
    time_us: np.ndarray  # float64, NaN where the entry has no time
    stack: np.ndarray  # int32 into Snapshot.stacks

    def __len__(self) -> int:
        return len(self.action)


@dataclass
class Blocks:
    """Every block of every segment at the dump, one row each."""
    segment: np.ndarray  # int32 into Snapshot.seg_* arrays
    addr: np.ndarray
    size: np.ndarray
    requested: np.ndarray
    state: np.ndarray  # int8 into BLOCK_STATES
    stack: np.ndarray


@dataclass
class Snapshot:
    """A memory snapshot in columns (see the module doc)."""
    path: str
    histories: Dict[int, History]
    seg_device: np.ndarray
    seg_addr: np.ndarray
    seg_size: np.ndarray
    blocks: Blocks
    stacks: List[Tuple[Frame, ...]]
    settings: Dict[str, Any] = field(default_factory=dict)

    @property
    def devices(self) -> List[int]:
        """Devices with a history or a segment, in order."""
        return sorted(set(self.histories) | set(int(d) for d in np.unique(self.seg_device)))

    def user_frame(self, stack_id: int) -> Optional[Frame]:
        """The first frame of a stack that is the user's code; else its first Python frame; None without one."""
        stack = self.stacks[stack_id]
        for frame in stack:
            if not _INTERNAL.search(frame[0]):
                return frame
        return next((f for f in stack if not _NATIVE.search(f[0])), None)


class _Stacks:
    """Interns call stacks: the same frames give the same id (frame dicts are shared inside a snapshot pickle, so
    the identities of its frames are the quick key, their values the lasting one)."""

    def __init__(self) -> None:
        self.table: List[Tuple[Frame, ...]] = [()]
        self._by_value: Dict[Tuple[Frame, ...], int] = {(): NO_STACK}
        self._by_ids: Dict[Tuple[int, ...], int] = {}
        self._held: List[Any] = []  # the frame objects whose ids key _by_ids: held, so no id is reused meanwhile

    def ids_of(self, lists: List[Any]) -> List[int]:
        """`id_of` of each list, the quick key looked up inline (the bulk of a snapshot's entries)."""
        get, out = self._by_ids.get, []
        for frames in lists:
            hit = get(tuple(map(id, frames))) if frames.__class__ is list and frames else None
            out.append(hit if hit is not None else self.id_of(frames))
        return out

    def forget_ids(self) -> None:
        """Drop the identity keys and the frames they hold."""
        self._by_ids.clear()
        self._held.clear()

    def id_of(self, frames: Any) -> int:
        if not isinstance(frames, list) or not frames:
            return NO_STACK
        key = tuple(map(id, frames))
        hit = self._by_ids.get(key)
        if hit is None:
            value = tuple(_frame(f) for f in frames)
            hit = self._by_value.setdefault(value, len(self.table))
            if hit == len(self.table):
                self.table.append(value)
            if len(self._by_ids) >= _MAX_ID_KEYS:  # frames not shared in the file: keys would hold them all
                self.forget_ids()
            self._by_ids[key] = hit
            self._held.append(frames[:])
        return hit


def _frame(f: Any) -> Frame:
    if not isinstance(f, dict):
        return ("?", 0, "?")
    line = f.get("line")
    return (str(f.get("filename", "?")), line if isinstance(line, int) else 0, str(f.get("name", "?")))


_MAX_ID_KEYS = 1 << 20


class _Streamed:
    """Receives trace entries while the file loads (`snapshot_stream.EntrySink`): per trace list, column chunks."""

    def __init__(self, stacks: _Stacks) -> None:
        self.stacks = stacks
        self.chunks: Dict[int, Tuple[List[Any], List[List[np.ndarray]]]] = {}  # id -> (the list, its chunks)
        self.malformed: set = set()

    def take(self, trace: List[Any], entries: List[Any]) -> None:
        _, chunks = self.chunks.setdefault(id(trace), (trace, []))
        if id(trace) in self.malformed or not all(e.__class__ is dict and isinstance(e.get("action"), str)
                                                  for e in entries):
            self.malformed.add(id(trace))
            return
        chunks.append(_columns(entries, self.stacks))

    def pop(self, path: str, trace: Any) -> List[List[np.ndarray]]:
        """The chunks streamed from `trace` (none if it was not streamed), checked to be all trace entries."""
        held = self.chunks.pop(id(trace), None)
        if held is None or held[0] is not trace:
            return []
        if id(trace) in self.malformed:
            raise SnapshotError(path, NOT_AN_ENTRY)
        return held[1]


def load_snapshot(path: "os.PathLike[str] | str", limit: int = 0, stream_bytes: int = STREAM_BYTES) -> Snapshot:
    """Read a snapshot file safely (`read_snapshot`) and convert it to columns, its history streamed while loading
    (every `stream_bytes` of input); read whole where the file does not allow streaming."""
    stacks = _Stacks()
    streamed: Optional[_Streamed] = _Streamed(stacks)
    try:
        return from_dict(os.fspath(path), read_snapshot(path, limit, streamed, stream_bytes), stacks, streamed)
    except StreamFallback:
        streamed = None
    return from_dict(os.fspath(path), read_snapshot(path, limit))


def from_dict(path: str, data: Dict[str, Any], stacks: Optional[_Stacks] = None,
              streamed: Optional[_Streamed] = None) -> Snapshot:
    """Columns of a snapshot dict (with the chunks streamed out of its trace lists, if any); empties the dict's trace
    lists as it goes (they are the bulk of its memory)."""
    stacks = stacks or _Stacks()
    traces = data.get("device_traces") or []
    histories = {}
    for device in range(len(traces)):
        entries, traces[device] = traces[device], None
        parts = streamed.pop(path, entries) if streamed else []
        if entries:
            parts.append(_columns(entries, stacks))
        if parts:
            histories[device] = _history(device, parts)
        del entries, parts
    if streamed and streamed.chunks:  # a list of entries streamed that is not a device's trace: read it whole
        raise StreamFallback()
    stacks.forget_ids()
    segs = [s for s in data.get("segments") or []]
    blocks = [(i, b) for i, s in enumerate(segs) for b in (s.get("blocks") or []) if isinstance(b, dict)]
    settings = data.get("allocator_settings")
    return Snapshot(
        path=path, histories=histories,
        seg_device=np.array([_int(s.get("device")) for s in segs], dtype=np.int64),
        seg_addr=np.array([_int(s.get("address")) for s in segs], dtype=np.int64),
        seg_size=np.array([_int(s.get("total_size")) for s in segs], dtype=np.int64),
        blocks=Blocks(
            segment=np.array([i for i, _ in blocks], dtype=np.int32),
            addr=np.array([_int(b.get("address")) for _, b in blocks], dtype=np.int64),
            size=np.array([_int(b.get("size")) for _, b in blocks], dtype=np.int64),
            requested=np.array([_int(b.get("requested_size", b.get("size"))) for _, b in blocks], dtype=np.int64),
            state=np.array([_state(b.get("state")) for _, b in blocks], dtype=np.int8),
            stack=np.array([stacks.id_of(_block_frames(b)) for _, b in blocks], dtype=np.int32)),
        stacks=stacks.table,
        settings=settings if isinstance(settings, dict) else {})


_ACTION_CODE = {name: i for i, name in enumerate(ACTIONS)}


def _history(device: int, parts: List[List[np.ndarray]]) -> History:
    """One device's history from its column chunks, concatenated one column at a time (each column's chunks are
    freed before the next is joined)."""
    columns = []
    for k in range(len(parts[0])):
        columns.append(parts[0][k] if len(parts) == 1 else np.concatenate([p[k] for p in parts]))
        for p in parts:
            p[k] = None
    return History(device, *columns)


def _columns(entries: List[Dict[str, Any]], stacks: _Stacks) -> List[np.ndarray]:
    """action, addr, size, time_us and stack of trace entries, as History's columns."""
    codes = _ACTION_CODE
    action = np.array([codes.get(e["action"], OTHER_ACTION) for e in entries], dtype=np.int8)
    # an OOM entry has no address: its `device_free` (the bytes CUDA still reported free) takes the column
    addr = _ints([e.get("addr", e.get("device_free")) for e in entries])
    size = _ints([e.get("size") for e in entries])
    times = [e.get("time_us") for e in entries]
    try:
        time_us = np.array(times, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        time_us = np.array([float(t) if isinstance(t, (int, float)) and abs(t) < 1e300 else np.nan for t in times],
                           dtype=np.float64)
    stack = np.array(stacks.ids_of([e.get("frames") for e in entries]), dtype=np.int32)
    return [action, addr, size, time_us, stack]


def _ints(values: List[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):  # a None or a stray type somewhere: 0 there
        return np.array([_int(v) for v in values], dtype=np.int64)


def _block_frames(block: Dict[str, Any]) -> Any:
    """A block's stack: `frames` (torch 2.1+), else the last entry of its `history` (torch 2.0)."""
    if "frames" in block:
        return block["frames"]
    history = block.get("history")
    last = history[-1] if isinstance(history, list) and history else None
    return last.get("frames") if isinstance(last, dict) else None


def _int(value: Any) -> int:
    """An int field (addresses fit int64: CUDA virtual addresses are below 2**63); anything else is 0."""
    if isinstance(value, int) and not isinstance(value, bool) and -2 ** 63 <= value < 2 ** 63:
        return value
    return 0


def _state(value: Any) -> int:
    return BLOCK_STATES.index(value) if value in BLOCK_STATES else INACTIVE
