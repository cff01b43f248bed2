"""Pause Python's cyclic garbage collector around a bulk decode.

Decoding a large document creates millions of lists and dicts at once; every 700 new containers the collector
walks the young ones and, as they survive, ever more of the old ones, so a 150,000-node Execution Trace spent
most of its load time in the collector (with other large objects alive, several times longer than the decode).
The decoded values hold no reference cycles, so nothing is lost by collecting after the decode instead.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_depth = 0  # pauses in progress, over all threads: the collector runs again when the last one ends


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off (nested and concurrent pauses are counted)."""
    global _depth
    with _lock:
        if _depth == 0 and not gc.isenabled():  # switched off by the caller: leave it so
            yield_only = True
        else:
            yield_only = False
            _depth += 1
            gc.disable()
    try:
        yield
    finally:
        if not yield_only:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    gc.enable()
