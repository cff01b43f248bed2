"""Time spent per stage of reading and analysing traces in this process (inflate, decode, columns, correlate,
estimate, rate, output), for `benchmarks/analyze.py`'s split. Always on: a few clock reads per chunk of events.

Stages nest and each counts only its own time: a stage opened inside another is taken out of the outer one.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import DefaultDict, Dict, Iterator

_totals: DefaultDict[str, float] = defaultdict(float)
_local = threading.local()


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Charge the time spent in the block to `name` (and not to the stage around it)."""
    open_stages = _local.__dict__.setdefault("open", [])
    start = time.perf_counter()
    open_stages.append(name)
    try:
        yield
    finally:
        open_stages.pop()
        spent = time.perf_counter() - start
        _totals[name] += spent
        if open_stages:
            _totals[open_stages[-1]] -= spent


def totals() -> Dict[str, float]:
    """Seconds per stage so far in this process."""
    return dict(_totals)


def reset() -> None:
    """Start counting afresh."""
    _totals.clear()
