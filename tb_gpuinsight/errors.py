"""Typed errors: every failure a user can cause carries a one-line reason, never a traceback."""
from __future__ import annotations

import os
from typing import Optional


class GpuInsightError(Exception):
    """Base class of every error the project raises on purpose."""


class ConfigError(GpuInsightError):
    """A user-supplied setting or file (devices file, flag) is wrong."""


class TraceError(GpuInsightError):
    """A trace file cannot be read: names the file, what is wrong and, where known, the byte offset."""

    def __init__(self, path: "os.PathLike[str] | str", reason: str, offset: Optional[int] = None,
                 incomplete: bool = False) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        self.offset = offset
        # True when the file looks cut short: it may still be being written, so callers may retry later.
        self.incomplete = incomplete
        where = f" (at byte {offset})" if offset is not None else ""
        super().__init__(f"{self.path}: {reason}{where}")

    def __reduce__(self):  # rebuilt from its fields when it comes back from a worker process
        return type(self), (self.path, self.reason, self.offset, self.incomplete)
