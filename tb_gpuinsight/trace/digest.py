"""A fast digest of a file's content, for cache keys: a trace replaced by another of the same name, size and mtime
(a run deleted and written again, a copy that keeps times) gets a new key and is analysed again.

It hashes the size and three blocks of one MiB: the first, the middle and the last. The last holds a gzip file's
CRC-32 and length of the whole uncompressed content, so any change to a compressed trace changes the digest; for an
uncompressed one, the blocks hold the header, the device properties and the last events, where a re-recorded trace
differs. A digest is computed once per (path, size, mtime, ctime, inode): a file written in place changes its
ctime, which no program can set back.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Optional, Tuple

_BLOCK = 1 << 20
_MEMO_LIMIT = 200_000
_memo: Dict[Tuple[str, int, int, int, int], str] = {}
_lock = threading.Lock()


def content_digest(path: str, st: Optional[os.stat_result] = None) -> str:
    """The content digest of a regular file (hex text), "" when it cannot be read."""
    try:
        st = st or os.stat(path)
    except OSError:
        return ""
    key = (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    with _lock:
        found = _memo.get(key)
    if found is not None:
        return found
    import hashlib  # here: importing it costs a command's startup (OpenSSL), and only discovery digests

    digest = hashlib.blake2b(str(st.st_size).encode("ascii"), digest_size=16)
    try:
        with open(path, "rb") as f:
            for offset in sorted({0, max(0, (st.st_size - _BLOCK) // 2), max(0, st.st_size - _BLOCK)}):
                f.seek(offset)
                digest.update(f.read(_BLOCK))
    except OSError:
        return ""
    text = digest.hexdigest()
    with _lock:
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[key] = text
    return text
