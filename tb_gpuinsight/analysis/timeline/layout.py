"""Sub-rows of one lane, so that no two boxes of the timeline overlap.

Events of one stream or one CPU thread at one nesting depth normally follow each other, but real traces overlap
them: kernels of one stream whose clocks were corrected, ops that end after a sibling began (async work, a lost
end), and CPU ops deeper than the deepest lane drawn. Each such lane is split into sub-rows by greedy interval
partitioning (an event goes to the first sub-row free at its start, by start time): the fewest rows that keep
every box whole, and a lane without overlap stays one row.
"""
from __future__ import annotations

import numpy as np

# Overlaps shorter than this are clock rounding between back-to-back events (Kineto writes ns as float us), not
# two boxes on top of each other.
TOLERANCE_US = 1e-3


def sub_rows(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The sub-row of each event (0 for all when none overlaps)."""
    rows = np.zeros(len(start), dtype=np.int32)
    if len(start) < 2:
        return rows
    order = np.lexsort((-(end - start), start))
    s, e = start[order], end[order]
    if not (s[1:] < np.maximum.accumulate(e)[:-1] - TOLERANCE_US).any():
        return rows
    free_at: list = []  # per sub-row, when its last event ends
    for i, (a, b) in enumerate(zip(s.tolist(), e.tolist())):
        row = next((r for r, t in enumerate(free_at) if t <= a + TOLERANCE_US), len(free_at))
        if row == len(free_at):
            free_at.append(b)
        else:
            free_at[row] = b
        rows[order[i]] = row
    return rows
