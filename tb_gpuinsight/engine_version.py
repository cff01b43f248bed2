"""The analysis engine's version: summaries and memoised estimates written by another engine are ignored rather
than trusted. It is the manual ``SCHEMA`` (bump it when a stored layout changes) plus a digest of the code that
computes what is stored (the reader, the estimates, the analyses), so a changed formula or rule can never serve a
stale figure, with or without a bump."""
from __future__ import annotations

import hashlib
from pathlib import Path

SCHEMA = "8"
_ROOT = Path(__file__).resolve().parent


def source_digest(*parts: str) -> str:
    """A short digest of the Python sources under these package folders (or files), in a stable order."""
    digest = hashlib.sha1()
    for part in parts:
        base = _ROOT / part
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for path in files:
            try:
                digest.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes())
            except OSError:
                digest.update(str(path).encode())
    return digest.hexdigest()[:12]


FORMULAS_DIGEST = source_digest("estimate")
ENGINE_VERSION = f"{SCHEMA}-{source_digest('estimate', 'trace', 'analysis', 'sections.py')}"
