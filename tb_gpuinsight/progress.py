"""Stderr progress bars for long reads and batch runs, shown only when stderr is a terminal."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional


def terminal_progress(label: str) -> Optional[Callable[[str, int, int], None]]:
    """A `progress(stage, done, total)` callback drawing a tqdm bar per stage, or None when not on a terminal."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bars = {}

    def update(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            unit = "B" if stage == "read" else " events"
            bar = bars[stage] = tqdm(total=total, desc=f"{label} {stage}", unit=unit, unit_scale=True,
                                     leave=False, file=sys.stderr)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def count_progress(label: str, unit: str) -> Optional[Callable[[int, int], None]]:
    """A `progress(done, total)` callback drawing one self-updating line (`label done/total unit, rate, ETA`), or
    None when stderr is not a terminal. No third-party package: batch runs on bare workers need none."""
    if not sys.stderr.isatty():
        return None
    start = time.monotonic()

    def update(done: int, total: int) -> None:
        elapsed = time.monotonic() - start
        width = 30
        filled = int(width * done / total) if total else width
        eta = f", {elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {unit} "
                         f"in {elapsed:.0f} s{eta}  ")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return update
