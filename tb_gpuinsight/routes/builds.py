"""Builds a view makes on demand from a span's files (the Execution graph, the Tensor shapes op groups): run by an
analysis worker through `service.background`, never in a request's thread, and kept in a small LRU of their
futures. A request waits for one a while (as long as its tab waits for an answer), then answers 503.
"""
from __future__ import annotations

import concurrent.futures
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional

from ..span_state import NotReady, SpanFailed

MAX_DEATHS = 2  # builds of one key whose process died before it is answered as failed


class Builds:
    """LRU of build futures (of ("ok", value) or ("error", reason)); one build per key at a time. A build whose
    process died (or whose pool stopped) is started again by the next request, once: the second death is the
    build's own (out of memory, most likely) and answers as a failure."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: "OrderedDict[Any, concurrent.futures.Future]" = OrderedDict()
        self._deaths: Dict[Any, int] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, submit: Callable[[], concurrent.futures.Future]) -> concurrent.futures.Future:
        """The build of `key`, started with `submit` (which only queues it) when there is none."""
        with self._lock:
            future = self._items.get(key)
            if future is not None and _interrupted(future):
                self._deaths[key] = self._deaths.get(key, 0) + 1
                future = _failed("the process building it died, likely out of memory") \
                    if self._deaths[key] >= MAX_DEATHS else None
                if future is not None:
                    self._items[key] = future
            if future is not None:
                self._items.move_to_end(key)
                return future
            future = self._items[key] = submit()
            while len(self._items) > self.size:
                self._deaths.pop(self._items.popitem(last=False)[0], None)
            return future


def outcome(future: concurrent.futures.Future, what: str, wait_s: Optional[float]) -> Any:
    """A build's value, waiting up to `wait_s` (None: until it ends). Raises NotReady while it runs (or after its
    process died, until it is started again), SpanFailed with the build's reason when it failed."""
    try:
        kind, payload = future.result(wait_s)
    except concurrent.futures.TimeoutError:
        raise NotReady(f"building {what}") from None
    except (concurrent.futures.process.BrokenProcessPool, concurrent.futures.CancelledError):
        raise NotReady(f"{what} was interrupted: building it again") from None
    if kind != "ok":
        raise SpanFailed(f"cannot build {what}: {payload}")
    return payload


def _interrupted(future: concurrent.futures.Future) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def _failed(reason: str) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(("error", reason))
    return future
