"""torch, imported once, on first need, under one lock. torch is optional and costs about a second to import, so the
estimates import it lazily; in a server several request threads may need it at the same moment, and a first
`import torch` running in two threads at once fails in both ("partially initialized module"), which would leave
every FLOP of that process unknown. Every lazy use of torch in the package goes through `torch_module()`."""
from __future__ import annotations

import threading
from typing import Any, Optional

_LOCK = threading.Lock()
_LOADED: dict = {}


def torch_module() -> Optional[Any]:
    """The torch module (with `torch.utils.flop_counter` loaded), or None when torch cannot be imported here."""
    if "torch" not in _LOADED:
        with _LOCK:
            if "torch" not in _LOADED:
                _LOADED["torch"] = _import()
    return _LOADED["torch"]


def _import() -> Optional[Any]:
    try:
        import torch
        import torch.utils.flop_counter  # noqa: F401  (the FLOP formulas: loaded here, under the same lock)
    except Exception:  # not installed, or an install that cannot load: the same for every later call
        return None
    return torch
