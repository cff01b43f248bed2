"""JSON helpers shared by routes, commands and the Python API."""
from __future__ import annotations

import math
from typing import Any


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float (NaN, inf) replaced by None, so it encodes as strict JSON (`null`)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj
