"""Stderr progress bars for long reads and batch runs, shown only when stderr is a terminal. No third-party package:
the CLI and batch workers on bare machines need none."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional

from .terminal import unescaped, visible

_WIDTH = 30


def _si(value: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(value) < 1000 or unit == "T":
            return f"{value:.0f}{unit}" if unit == "" else f"{value:.1f}{unit}"
        value /= 1000.0
    return f"{value:.1f}T"


class _Line:
    """One self-updating stderr line: `label [####....] done/total unit in N s, M s left`."""

    def __init__(self, label: str, unit: str, si: bool = False) -> None:
        self.label, self.unit, self.si = label, unit, si
        self.start = time.monotonic()

    def draw(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.start
        filled = int(_WIDTH * done / total) if total else _WIDTH
        eta = f", {elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
        count = f"{_si(done)}/{_si(total)}" if self.si else f"{done}/{total}"
        out = unescaped(sys.stderr)  # its own carriage returns; the label made visible
        out.write(f"\r{visible(self.label)} [{'#' * filled}{'.' * (_WIDTH - filled)}] {count} {self.unit} "
                  f"in {elapsed:.0f} s{eta}  ")
        if done >= total:
            out.write("\n")
        out.flush()


def terminal_progress(label: str) -> Optional[Callable[[str, int, int], None]]:
    """A `progress(stage, done, total)` callback drawing a line per stage (bytes read, events parsed), or None when
    not on a terminal."""
    if not sys.stderr.isatty():
        return None
    lines = {}

    def update(stage: str, done: int, total: int) -> None:
        line = lines.get(stage)
        if line is None:
            line = lines[stage] = _Line(f"{label} {stage}", "B" if stage == "read" else "events", si=True)
        line.draw(done, total)

    return update


def count_progress(label: str, unit: str) -> Optional[Callable[[int, int], None]]:
    """A `progress(done, total)` callback drawing one self-updating line (`label done/total unit, ETA`), or None
    when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None
    return _Line(label, unit).draw
