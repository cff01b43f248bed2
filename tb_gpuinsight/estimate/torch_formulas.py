"""torch's own FLOP formulas (``torch.utils.flop_counter.flop_registry``), looked up lazily: torch is imported only
when a formula that needs it runs, never to word a reason."""
from __future__ import annotations

import functools
from typing import Any, Callable

from .args import UnknownEstimate
from .lazy_torch import torch_module

TORCH_MISSING = "torch is not installed (FLOP formulas come from torch.utils.flop_counter)"


@functools.lru_cache(maxsize=1)
def registry() -> dict | None:
    """torch's flop_registry, or None when torch is not installed."""
    torch = torch_module()
    return None if torch is None else torch.utils.flop_counter.flop_registry


def torch_available() -> bool:
    """Whether torch's FLOP formulas can be used here (without torch every FLOP count is unknown)."""
    return registry() is not None


def _packet(op: str) -> Any:
    try:
        return getattr(torch_module().ops.aten, op)
    except Exception:
        return None


@functools.lru_cache(maxsize=128)
def formula(op: str) -> Callable[..., int]:
    """The registered formula for ``torch.ops.aten.<op>``; raises UnknownEstimate if none."""
    table = registry()
    if table is None:
        raise UnknownEstimate(TORCH_MISSING)
    found = table.get(_packet(op))
    if found is None:
        raise UnknownEstimate(f"torch {_torch_version()} has no FLOP formula for aten::{op}")
    return found


def _torch_version() -> str:
    torch = torch_module()
    return "?" if torch is None else torch.__version__

