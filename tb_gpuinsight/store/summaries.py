"""A directory of per-trace summaries on any fsspec file system (see the package docstring for its format)."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
from typing import Any, Dict, Iterator, Optional, Set, Tuple

from ..engine_version import ENGINE_VERSION
from ..trace.source import is_url, url_filesystem
from . import envelope as cache_mod

SUFFIX = ".npz"
FAILURES = "failures"


def trace_identity(name: str, size: int, version: str, options: str = "") -> Dict[str, Any]:
    """What a summary is the analysis of: one version of one trace, read by this engine with these options.
    `name` is the trace's path relative to its logdir (so a store is valid wherever the logdir is mounted or
    copied), `version` its content digest (local files, `trace/digest.py`) or its ETag (object stores)."""
    return {"path": name, "size": int(size), "version": str(version), "engine": ENGINE_VERSION, "options": options}


def summary_key(ident: Dict[str, Any]) -> str:
    """The summary's name in a store: a hash of its trace identity."""
    text = "|".join(str(ident[k]) for k in ("path", "size", "version", "engine", "options"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:40] + SUFFIX


class SummaryStore:
    """Summaries (sealed, checksummed `.npz` payloads) and failure records under one URL or local directory.

    Reading validates (checksum, then the caller checks the identity); a damaged summary raises CorruptSummary
    after it is deleted. Every failure to list, read or write is a miss (None / False), never an exception, so that
    an unreachable store degrades the plugin to in-memory summaries instead of breaking it."""

    def __init__(self, url: Optional[str]) -> None:
        self.url = url or ""
        self.remote = bool(url) and is_url(url)
        # Local stores keep their plain directory: augmented traces are written next to the summaries.
        self.directory: Optional[str] = None if self.remote or not url else _local_path(url)
        self._fs = None
        self._root = ""
        if self.remote:
            self._fs, self._root = url_filesystem(url)
            self._root = self._root.rstrip("/")

    def __bool__(self) -> bool:
        return bool(self.url)

    # ------------------------------------------------------------------------------------------- summaries

    def keys(self) -> Set[str]:
        """Names of the summaries in the store (one listing, no reads)."""
        return {n for n in self._list("") if n.endswith(SUFFIX)}

    def has(self, key: str) -> bool:
        """Whether a summary exists (a stat, not a read)."""
        if not self:
            return False
        if self.remote:
            return self._safe(lambda: self._fs.exists(self._path(key)), False)
        return os.path.isfile(self._path(key))

    def get(self, key: str) -> Optional[bytes]:
        """The validated payload; None when absent or unreadable. Raises CorruptSummary (after deleting the
        object) when it fails its checksum."""
        data = self._read(key)
        if data is None:
            return None
        try:
            return cache_mod.unseal(data)
        except cache_mod.CorruptSummary:
            self.delete(key)
            raise

    def put(self, key: str, payload: bytes) -> bool:
        """Store a summary (sealed with its checksum) atomically, replacing any failure record of the same
        trace version; False when the store cannot be written."""
        ok = self._write(key, cache_mod.seal(payload))
        if ok and self.failure(key) is not None:
            self.clear_failure(key)
        return ok

    def delete(self, key: str) -> None:
        """Remove a summary (a damaged one); a failure is ignored."""
        self._delete(key)

    def summaries(self) -> Iterator[Tuple[str, bytes]]:
        """(key, validated payload) of every readable summary; damaged ones are skipped (and deleted)."""
        for key in sorted(self.keys()):
            try:
                data = self.get(key)
            except cache_mod.CorruptSummary:
                continue
            if data is not None:
                yield key, data

    # -------------------------------------------------------------------------------------------- failures

    def failure_keys(self) -> Set[str]:
        """Keys of the trace versions whose analysis failed for good (one listing)."""
        return {n[: -len(".json")] + SUFFIX for n in self._list(FAILURES) if n.endswith(".json")}

    def failure(self, key: str) -> Optional[Dict[str, Any]]:
        """The failure record of a trace version: {"identity", "reason", "attempts", "time", "engine"}."""
        data = self._read(_failure_name(key))
        try:
            record = json.loads(data.decode("utf-8")) if data is not None else None
        except ValueError:
            return None
        return record if isinstance(record, dict) and isinstance(record.get("reason"), str) else None

    def put_failure(self, key: str, identity: Dict[str, Any], reason: str, attempts: int = 1) -> bool:
        """Record that a trace version cannot be summarised, with a one-line reason."""
        record = {"identity": identity, "reason": " ".join(str(reason).split())[:500], "attempts": attempts,
                  "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "engine": ENGINE_VERSION}
        return self._write(_failure_name(key), json.dumps(record).encode("utf-8"))

    def clear_failure(self, key: str) -> None:
        """Forget a failure record (the next run analyses the trace again)."""
        self._delete(_failure_name(key))

    # ---------------------------------------------------------------------------------------------- plumbing

    def _path(self, name: str) -> str:
        if self.remote:
            return f"{self._root}/{name}"
        return os.path.join(self.directory or "", *name.split("/"))

    def _list(self, folder: str) -> Set[str]:
        if not self:
            return set()
        if self.remote:
            names = self._safe(lambda: self._fs.ls(self._path(folder) if folder else self._root, detail=False), [])
            return {n.rstrip("/").rsplit("/", 1)[-1] for n in names}
        try:
            return set(os.listdir(self._path(folder) if folder else self.directory))
        except OSError:
            return set()

    def _read(self, name: str) -> Optional[bytes]:
        if not self:
            return None
        if self.remote:
            return self._safe(lambda: self._fs.cat_file(self._path(name)), None)
        try:
            with open(self._path(name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def _write(self, name: str, data: bytes) -> bool:
        """Whole-object write: on an object store one PUT of the complete object, which S3 and GCS make visible
        all at once (never a partial object); on a local disk a temporary file, fsync, then rename."""
        if not self:
            return False
        if self.remote:
            return self._safe(lambda: self._fs.pipe_file(self._path(name), data) or True, False)
        return _atomic_write(self._path(name), data)

    def _delete(self, name: str) -> None:
        if not self:
            return
        if self.remote:
            self._safe(lambda: self._fs.rm_file(self._path(name)), None)
            return
        try:
            os.unlink(self._path(name))
        except OSError:
            pass

    @staticmethod
    def _safe(call, default):
        try:
            return call()
        except Exception:  # any remote failure (network, credentials, missing object) is a miss
            return default


def _failure_name(key: str) -> str:
    stem = key[: -len(SUFFIX)] if key.endswith(SUFFIX) else key
    return f"{FAILURES}/{stem}.json"


def open_store(url: Optional[str]) -> SummaryStore:
    """A store at a URL (s3://, gs://, ...) or local directory; "" or None gives a disabled store."""
    return SummaryStore(url)


def _local_path(url: str) -> str:
    return os.path.abspath(os.path.expanduser(url[len("file://"):] if url.startswith("file://") else url))


def _atomic_write(path: str, data: bytes) -> bool:
    directory = os.path.dirname(path)
    tmp = ""
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the rename must never publish a file whose content is not on disk
        os.replace(tmp, path)
        _fsync_dir(directory)
        return True
    except OSError:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


def _fsync_dir(directory: str) -> None:
    """Make a rename durable (best effort: not every file system lets a directory be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
