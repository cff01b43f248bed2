"""A small LRU shared by the routes that keep per-span answers built on first request."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable


class Lru:
    """A small thread-safe LRU; values are built outside the lock (two racing builds are harmless)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: "OrderedDict[Any, Any]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value
