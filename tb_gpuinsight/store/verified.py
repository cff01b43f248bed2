"""Cached files that are checked before they are served: the size and SHA-256 of a file are recorded beside it
(`<file>.check.json`, written atomically) once the file itself is complete, and a reader serves the file only
while it still matches them. A file without a record (its writer died between the two writes), truncated, or
changed in any byte is not served: the caller discards it and writes it again. This holds across restarts: the
record is on disk, and a file is hashed again by each new process (then only when its size, mtime, ctime or
inode changes: a file written in place with its size and mtime set back still changes its ctime), never trusted
because its name exists.

The summaries carry their checksum inside (`cache.seal`); this is for the plugin's other cached files, such as the
augmented trace downloads.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Dict, Optional, Tuple

from .summaries import _atomic_write

RECORD_SUFFIX = ".check.json"
_BLOCK = 1 << 20
_checked: Dict[str, Tuple[int, int, int, int, str]] = {}  # path -> (size, mtime, ctime, inode, sha256) found intact
_lock = threading.Lock()
# A file changed less than this before it was hashed may change again within the same clock tick, keeping its ctime:
# such a file is hashed again on its next read rather than remembered ("racily clean", as git treats its index).
_RACY_NS = 2_000_000_000


def record(path: str) -> bool:
    """Record the size and checksum of a complete file beside it (atomically); False when it cannot be."""
    try:
        size, digest = _digest(path)
    except OSError:
        return False
    return _atomic_write(path + RECORD_SUFFIX, json.dumps({"size": size, "sha256": digest}).encode("ascii"))


def intact(path: str) -> bool:
    """True when the file exists and matches its recorded size and checksum."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    expected = _read_record(path)
    if expected is None or expected[0] != st.st_size:
        return False
    stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, expected[1])
    with _lock:
        if _checked.get(path) == stamp:
            return True
    started = time.time_ns()
    try:
        ok = _digest(path) == expected
    except OSError:
        return False
    if ok and st.st_ctime_ns < started - _RACY_NS:
        with _lock:
            _checked[path] = stamp
    return ok


def discard(path: str) -> None:
    """Remove a cached file and its record (missing ones are fine)."""
    with _lock:
        _checked.pop(path, None)
    for name in (path + RECORD_SUFFIX, path):  # the record first: a file without one is never served
        try:
            os.unlink(name)
        except OSError:
            pass


def _read_record(path: str) -> Optional[Tuple[int, str]]:
    try:
        with open(path + RECORD_SUFFIX, "rb") as f:
            data = json.loads(f.read(4096).decode("ascii"))
        size, digest = data["size"], data["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(size, int) or not isinstance(digest, str):
        return None
    return size, digest


def _digest(path: str) -> Tuple[int, str]:
    sha, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            if not block:
                return size, sha.hexdigest()
            sha.update(block)
            size += len(block)
