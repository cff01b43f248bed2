"""A stderr progress bar for long reads, shown only when stderr is a terminal."""
from __future__ import annotations

import sys
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
