"""The analysis engine's version: summaries and memoised estimates written by another engine are ignored rather
than trusted. It is the manual ``SCHEMA`` (bump it when a stored layout changes) plus a digest of the code and the
rule data that compute what is stored (the reader, the estimates, the analyses; the datasheet, the op schemas and
the kernel classes are JSON files beside the code), so a changed formula or rule can never serve a stale figure,
with or without a bump.

The digest is a checksum (CRC-32 and Adler-32, 64 bits), not a cryptographic hash: it tells changed sources from
those a memo or summary was written by, and every run computes it, where importing hashlib (OpenSSL) would add
3.5 MB to each run's memory."""
from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path
from typing import Tuple

SCHEMA = "8"
_ROOT = Path(__file__).resolve().parent


def source_digest(*parts: str) -> str:
    """A short digest of the Python sources and JSON rule files under these package folders (or of these files), in a
    stable order."""
    crc, adler = 0, 1
    for part in parts:
        for entry in _sources(part):
            crc, adler = zlib.crc32(entry, crc), zlib.adler32(entry, adler)
    return f"{crc:08x}{adler:08x}"[:12]


@lru_cache(maxsize=None)
def _sources(part: str) -> Tuple[bytes, ...]:
    """What the digest reads of a folder's (or file's) sources; each is read once however many digests use it."""
    base = _ROOT / part
    files = sorted([*base.rglob("*.py"), *base.rglob("*.json")]) if base.is_dir() else [base]
    entries = []
    for path in files:
        try:
            entries.append(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes())
        except OSError:
            entries.append(str(path).encode())
    return tuple(entries)


FORMULAS_DIGEST = source_digest("estimate")
ENGINE_VERSION = f"{SCHEMA}-{source_digest('estimate', 'trace', 'analysis', 'sections.py')}"
_sources.cache_clear()  # the sources' text is not kept
