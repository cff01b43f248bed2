"""torch, imported once, on first need, under one lock. torch is optional and costs about a second to import, so it
is asked lazily, only what the shipped op-schema table cannot answer (estimate/schemas.py); in a server several
request threads may need it at the same moment, and a first `import torch` running in two threads at once fails in
both ("partially initialized module"). Every lazy use of torch in the package goes through `torch_module()`, and
`installed_torch_version()` reads its version without importing it."""
from __future__ import annotations

import functools
import os
import re
import threading
from importlib import util
from typing import Any, Optional

_LOCK = threading.Lock()
_LOADED: dict = {}


def torch_module() -> Optional[Any]:
    """The torch module, or None when torch cannot be imported here."""
    if "torch" not in _LOADED:
        with _LOCK:
            if "torch" not in _LOADED:
                _LOADED["torch"] = _import()
    return _LOADED["torch"]


def _import() -> Optional[Any]:
    try:
        import torch
    except Exception:  # not installed, or an install that cannot load: the same for every later call
        return None
    return torch


_VERSION_LINE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)


@functools.lru_cache(maxsize=1)
def installed_torch_version() -> str:
    """torch's installed version without importing it ("none" when absent): its version.py, else the package
    metadata (whose import, with the email package behind it, costs more than a memoised analysis's startup)."""
    try:
        spec = util.find_spec("torch")
        if spec is None:
            return "none"
        with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py"), encoding="utf-8") as f:
            return _VERSION_LINE.search(f.read()).group(1)
    except (AttributeError, IndexError, OSError, TypeError, ValueError, ImportError):
        from importlib import metadata

        try:
            return metadata.version("torch")
        except metadata.PackageNotFoundError:
            return "none"
