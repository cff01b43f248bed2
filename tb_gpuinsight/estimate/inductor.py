"""Inductor's own per-kernel figures: ``kernel_flop`` and ``kernel_num_gb`` (recorded on each Triton kernel's
launch when the model was compiled with ``torch._inductor.config.benchmark_kernel=True``)."""
from __future__ import annotations

import math
from typing import Any


def flops_from_inductor(args: Any) -> float | None:
    """FLOPs from an Inductor kernel's ``kernel_flop`` arg (a number or numeric string)."""
    if not isinstance(args, dict):
        return None
    value = args.get("kernel_flop")
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def bytes_from_inductor(args: Any) -> float | None:
    """Bytes from an Inductor kernel's ``kernel_num_gb`` arg (GB of 1e9 bytes), else None."""
    if not isinstance(args, dict):
        return None
    value = args.get("kernel_num_gb")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number * 1e9 if math.isfinite(number) and number >= 0 else None
