"""Names of a package imported on first use (PEP 562): `import tb_gpuinsight` and light commands then load no
analysis, numpy or torch until a name that needs them is used."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Dict


def lazy_getattr(package: str, homes: Dict[str, str], namespace: Dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `homes` (name -> submodule) on first use
    and keeps it in the module's `namespace`, where later lookups find it directly."""
    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{home}", package), name)
        namespace[name] = value
        return value
    return __getattr__
