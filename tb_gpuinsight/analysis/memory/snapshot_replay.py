"""Replay of one device's allocator history: allocated and reserved bytes after every recorded event, and every
allocation's lifetime as event indices.

Allocated bytes follow `alloc` (+) and `free_completed` (-): a block is memory in use until the allocator may hand
it out again. Blocks alive at the dump that the history never allocated (allocated before recording started, or
dropped from a history of bounded length) are alive from the start: found by walking the history backwards from
the dump's live blocks. Reserved bytes follow `segment_alloc` / `segment_map` (+) and `segment_free` /
`segment_unmap` (-) backwards from the segments at the dump.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Tuple

import numpy as np

from .snapshot_model import (ALLOC, FREE_COMPLETED, INACTIVE, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                             SEGMENT_UNMAP, History, Snapshot)

BEFORE = -1  # start index of an allocation alive before the first recorded event


@dataclass
class Replay:
    """Curves and lifetimes of one device. Curves have len(history) + 1 points: point 0 is the state before the
    first event, point i + 1 the state after event i."""
    device: int
    history: History
    allocated: np.ndarray  # int64
    reserved: np.ndarray  # int64
    # one row per allocation: [start, end) in event indices (start BEFORE: alive before the history; end
    # len(history): never freed in it)
    start: np.ndarray
    end: np.ndarray
    addr: np.ndarray
    size: np.ndarray
    stack: np.ndarray
    allocated_at_dump: int
    reserved_at_dump: int

    def alive(self, event: int) -> np.ndarray:
        """Mask of the allocations alive just after `event` (BEFORE: before the first event)."""
        return (self.start <= event) & (self.end > event)

    def segments_at(self, snap: Snapshot, event: int) -> List[Tuple[int, int]]:
        """(address, size) of the device's segments just after `event`: the dump's, with the segment events after
        it undone."""
        mine = snap.seg_device == self.device
        segs: Dict[int, int] = dict(zip(snap.seg_addr[mine].tolist(), snap.seg_size[mine].tolist()))
        h = self.history
        later = np.nonzero(_segment_delta(h) != 0)[0]
        for i in reversed(later[later > event].tolist()):
            if h.action[i] in (SEGMENT_ALLOC, SEGMENT_MAP):
                segs.pop(int(h.addr[i]), None)
            else:
                segs[int(h.addr[i])] = int(h.size[i])
        return sorted(segs.items())


def replay(snap: Snapshot, device: int) -> Replay:
    """Replay `device`'s history (an empty one when it has none: its curves are the dump's state)."""
    h = snap.histories.get(device) or History(device, *(np.zeros(0, dtype=t) for t in
                                                         (np.int8, np.int64, np.int64, np.float64, np.int32)))
    b = snap.blocks
    live = (b.state != INACTIVE) & (snap.seg_device[b.segment] == device) if len(b.state) else np.zeros(0, bool)
    # requested bytes, as the history's entries count them (a block's size is rounded up by the allocator)
    at_dump = dict(zip(b.addr[live].tolist(), zip(b.requested[live].tolist(), b.stack[live].tolist())))
    initial = _alive_before(at_dump, h)
    # one row per allocation, in numpy from the start (n_initial + n_alloc rows): Python lists of every row would
    # take ~100 B each; the history is walked in chunks for the same reason
    rows = len(initial) + int(np.count_nonzero(h.action == ALLOC))
    start, end = np.full(rows, BEFORE, dtype=np.int64), np.full(rows, len(h), dtype=np.int64)
    a_addr, a_size, a_stack = (np.zeros(rows, dtype=np.int64) for _ in range(3))
    a_addr[:len(initial)] = list(initial)
    a_size[:len(initial)] = [s for s, _ in initial.values()]
    a_stack[:len(initial)] = [st for _, st in initial.values()]
    open_at: Dict[int, int] = {a: k for k, a in enumerate(initial)}
    delta = np.zeros(len(h), dtype=np.int64)
    n = len(initial)
    for i, act, adr, sz, st in _events(h):
        k = open_at.pop(adr, None)
        if k is not None:  # a free, or an alloc twice without a completed free (a cut history): k ends here
            end[k] = i
            delta[i] -= a_size[k]
        if act == ALLOC:
            open_at[adr] = n
            start[n], a_addr[n], a_size[n], a_stack[n] = i, adr, sz, st
            delta[i] += sz
            n += 1
    allocated = _curve(sum(s for s, _ in initial.values()), delta)
    seg_delta = _segment_delta(h)
    reserved_at_dump = int(snap.seg_size[snap.seg_device == device].sum())
    reserved = _curve(reserved_at_dump - int(seg_delta.sum()), seg_delta)
    return Replay(device, h, allocated, reserved, start, end, a_addr, a_size, a_stack,
                  allocated_at_dump=int(allocated[-1]), reserved_at_dump=reserved_at_dump)


_CHUNK = 1 << 18


def _events(h: History, backwards: bool = False) -> Iterator[Tuple[int, int, int, int, int]]:
    """(index, action, addr, size, stack) of the history's alloc and free_completed events, a chunk of Python
    values at a time."""
    chunks = range(0, len(h), _CHUNK)
    for base in (reversed(chunks) if backwards else chunks):
        part = slice(base, base + _CHUNK)
        act = h.action[part]
        pick = np.nonzero((act == ALLOC) | (act == FREE_COMPLETED))[0]
        rows = zip((pick + base).tolist(), act[pick].tolist(), h.addr[part][pick].tolist(),
                   h.size[part][pick].tolist(), h.stack[part][pick].tolist())
        yield from (reversed(list(rows)) if backwards else rows)


def _alive_before(at_dump: Dict[int, Tuple[int, int]], h: History) -> Dict[int, Tuple[int, int]]:
    """The allocations alive before the first event: the dump's live blocks walked back through the history (a
    completed free means the block was alive before it, an alloc that it was not)."""
    live = dict(at_dump)
    for _, act, adr, sz, st in _events(h, backwards=True):
        if act == FREE_COMPLETED:
            live[adr] = (sz, st)
        else:
            live.pop(adr, None)
    return live


def _segment_delta(h: History) -> np.ndarray:
    grow = np.isin(h.action, (SEGMENT_ALLOC, SEGMENT_MAP))
    shrink = np.isin(h.action, (SEGMENT_FREE, SEGMENT_UNMAP))
    return np.where(grow, h.size, 0) - np.where(shrink, h.size, 0)


def _curve(first: int, delta: np.ndarray) -> np.ndarray:
    out = np.empty(len(delta) + 1, dtype=np.int64)
    out[0] = first
    np.cumsum(delta, out=out[1:])
    out[1:] += first
    return out
