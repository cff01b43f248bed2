"""Waiting at collectives as time on each rank's clock, not as a sum of instances.

A rank waits at a matched collective from its own arrival until the last rank arrives (or its own end). Several
collectives can be in flight on one rank at once: DDP launches one all-reduce per gradient bucket as each bucket
fills, and gloo runs them on its worker threads (NCCL on its streams) side by side. Their waits overlap in time, so
a rank's wait in a step is the length of the union of its wait intervals inside the step's window: it never exceeds
the step. The time others lost to a late rank is likewise, per waiting rank, the union of the intervals in which it
waited for that rank, inside its own steps: it never exceeds the time they could wait (their steps).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

Intervals = Tuple[np.ndarray, np.ndarray]  # sorted, disjoint (starts, ends)
# One rank's step windows: (step number, start, end) in trace microseconds.
Windows = Sequence[Tuple[int, float, float]]


def merged(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> Intervals:
    """Union of intervals clipped to [lo, hi), as sorted disjoint (starts, ends)."""
    s, e = np.clip(ts, lo, hi), np.clip(end, lo, hi)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]
    return s[new], reach[last]


def length(iv: Intervals) -> float:
    """Total length of disjoint intervals."""
    return float((iv[1] - iv[0]).sum())


def overlap(a: Intervals, b: Intervals) -> float:
    """Length of the intersection of two unions of disjoint intervals."""
    if not len(a[0]) or not len(b[0]):
        return 0.0
    s = np.concatenate([a[0], b[0]])
    e = np.concatenate([a[1], b[1]])
    return length(a) + length(b) - length(merged(s, e, -np.inf, np.inf))


class WaitLedger:
    """The wait intervals of every rank at the matched collectives, each with the rank it waited for."""

    def __init__(self) -> None:
        self._waits: Dict[int, List[Tuple[float, float, int]]] = {}

    def add(self, rank: int, start: float, end: float, waited_for: int) -> None:
        """Rank `rank` waited over [start, end) for rank `waited_for` (the last to arrive)."""
        if end > start:
            self._waits.setdefault(rank, []).append((start, end, waited_for))

    def _arrays(self, rank: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = self._waits.get(rank, [])
        arr = np.array(rows, dtype=np.float64).reshape(-1, 3)
        return arr[:, 0], arr[:, 1], arr[:, 2].astype(np.int64)

    def per_step(self, windows: Dict[int, Windows]) -> Dict[Tuple[int, int], float]:
        """Per (rank, step number): the time the rank spent waiting inside that step's window."""
        out: Dict[Tuple[int, int], float] = {}
        for rank, steps in windows.items():
            start, end, _ = self._arrays(rank)
            union = merged(start, end, -np.inf, np.inf)
            for number, lo, hi in steps:
                out[(rank, number)] = float((np.clip(union[1], lo, hi) - np.clip(union[0], lo, hi)).sum())
        return out

    def caused(self, windows: Dict[int, Windows]) -> Dict[int, float]:
        """Per late rank: the time the other ranks waited for it inside their steps (per waiting rank, the union
        of its waits for that rank, so at most the length of its steps)."""
        out: Dict[int, float] = {}
        for rank, steps in windows.items():
            start, end, late = self._arrays(rank)
            inside = _windows(steps)
            for culprit in np.unique(late).tolist():
                mine = late == culprit
                waited = overlap(merged(start[mine], end[mine], -np.inf, np.inf), inside)
                out[int(culprit)] = out.get(int(culprit), 0.0) + waited
        return out

    def total(self, windows: Dict[int, Windows]) -> float:
        """All ranks' waiting inside their steps (each rank's union)."""
        return sum(self.per_step(windows).values())


def _windows(steps: Windows) -> Intervals:
    if not len(steps):
        return np.empty(0), np.empty(0)
    arr = np.array([(lo, hi) for _, lo, hi in steps], dtype=np.float64)
    return merged(arr[:, 0], arr[:, 1], -np.inf, np.inf)


__all__ = ["WaitLedger", "merged", "length", "overlap"]
