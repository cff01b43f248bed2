"""A persistent memo of per-op estimates, keyed by (op name, Input Dims, Input type, Concrete Inputs).

Training runs repeat the same shapes in every span and every run, so estimates are kept in a SQLite file in the
user's cache directory: a trace whose op signatures were all seen before is estimated without running a formula, and
without importing torch where an op's schema is not in the shipped table (estimate/schemas.py). Keys include the
engine version and torch's installed version (read from its files, not by importing it). Any failure to open, read or
write the memo is a miss, never an error; a file that is not a database or whose pages are damaged is replaced by an
empty memo."""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import Dict, Iterable, Optional, Tuple

from ..engine_version import ENGINE_VERSION, FORMULAS_DIGEST
from ..settings import memo_path
from .flops import OpEstimate
from .lazy_torch import installed_torch_version

Signature = Tuple[str, object, object, object]

_DISABLE = "TB_GPUINSIGHT_NO_MEMO"
# The digest of the estimate package's sources: any change to a formula keys a fresh set of estimates.
FORMULAS_VERSION = FORMULAS_DIGEST


class EstimateMemo:
    """get_many / put_many over a SQLite table; thread-safe; silent on every failure."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = None if os.environ.get(_DISABLE) else path
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self._pid = os.getpid()
        self._prefix = f"{ENGINE_VERSION}|{FORMULAS_VERSION}|{installed_torch_version()}|"

    def _connection(self) -> Optional[sqlite3.Connection]:
        if self._pid != os.getpid():  # a forked worker: a connection must not cross a fork, open its own
            self._conn, self._pid = None, os.getpid()
        if self._conn is None and self.path:
            try:
                self._conn = self._open()
            except sqlite3.Error as exc:
                if not _damaged(exc):
                    self.path = None
                    return None
                self._conn = self._rebuilt()
            except OSError:
                self.path = None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """A connection to the memo, its table created and read once (a file that is not a database fails here)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=5, check_same_thread=False)
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS estimate (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            if conn.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok":  # damaged pages, cheap to find once
                raise sqlite3.DatabaseError("database disk image is malformed")
        except BaseException:
            conn.close()
            raise
        return conn

    def _rebuilt(self) -> Optional[sqlite3.Connection]:
        """An empty memo in place of a damaged one (garbage, truncated, malformed pages): it is only a memo, so
        what it held is recomputed. None (memo off) when even a new one cannot be made."""
        for suffix in ("", "-journal", "-wal", "-shm"):  # a stale journal must not be replayed into the new file
            try:
                os.unlink(self.path + suffix)
            except OSError:
                pass
        try:
            return self._open()
        except (sqlite3.Error, OSError):
            self.path = None
            return None

    def _repair(self, exc: sqlite3.Error) -> None:
        """A read or write found the file damaged: rebuild it now (called with the lock held)."""
        if self._conn is not None and _damaged(exc):
            self._conn.close()
            self._conn = self._rebuilt()

    def key(self, sig: Signature) -> str:
        return self._prefix + json.dumps(sig, separators=(",", ":"), default=str)

    def get_many(self, sigs: Iterable[Signature]) -> Dict[Signature, OpEstimate]:
        sigs = list(sigs)
        with self._lock:
            conn = self._connection()
            if conn is None or not sigs:
                return {}
            keys = {self.key(s): s for s in sigs}
            found: Dict[Signature, OpEstimate] = {}
            try:
                items = list(keys)
                for start in range(0, len(items), 500):
                    part = items[start:start + 500]
                    rows = conn.execute(f"SELECT key, value FROM estimate WHERE key IN ({','.join('?' * len(part))})",
                                        part).fetchall()
                    for key, value in rows:
                        found[keys[key]] = OpEstimate(*json.loads(value))
            except sqlite3.Error as exc:
                self._repair(exc)
                return {}
            except (ValueError, TypeError):
                return {}
            return found

    def put_many(self, items: Dict[Signature, OpEstimate]) -> None:
        with self._lock:
            conn = self._connection()
            if conn is None or not items:
                return
            rows = [(self.key(s), json.dumps([e.flops, e.flops_reason, e.bytes, e.bytes_reason, e.dtype]))
                    for s, e in items.items()]
            try:
                with conn:
                    conn.executemany("INSERT OR REPLACE INTO estimate (key, value) VALUES (?, ?)", rows)
            except sqlite3.Error as exc:
                self._repair(exc)


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether an error says the file is damaged (not a database, corrupt pages), not busy or unwritable."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(exc).lower()  # Python before 3.11, or raised here
    return "not a database" in text or "malformed" in text


_shared: Dict[Optional[str], EstimateMemo] = {}


def default_memo() -> EstimateMemo:
    """The memo in the default cache directory (one per process)."""
    path = memo_path()
    if path not in _shared:
        _shared[path] = EstimateMemo(path)
    return _shared[path]
