"""Persistent per-trace summaries: what a tab needs from a trace, without re-reading the trace.

A summary is the analysis's activity table before rating (FLOPs, bytes, dtype, op links per kernel/memcpy/memset),
plus the trace's device properties, the shape signatures of launching ops and the trace metadata. Rating against
the datasheet is redone on load (cheap), so a changed devices file applies without re-reading traces.

Files live outside the logdir (default: the user's cache directory), named by a hash of the trace's identity
(absolute path, size, mtime, engine version, reader options); they are numpy `.npz` archives read with
`allow_pickle=False` (no code runs on load), prefixed by a SHA-256 of their content, written atomically (temporary
file, fsync, rename). Each summary also records the identity it was computed for: a summary that fails its checksum,
does not load or belongs to another trace is an error the service repairs by deleting it and analysing again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tempfile
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from .analysis.efficiency import AUTO, Efficiency
from .engine_version import ENGINE_VERSION
from .sections import Section
from .trace.table import Table


# Columns an analysis computes before rating; the rest is recomputed by `rate` on load.
_MAGIC = b"TBGI-SUMMARY-1\n"  # then 32 bytes of SHA-256 of the payload, then the payload (an .npz archive)

_STORED = ("kind", "name", "device", "stream", "ts", "dur", "op", "op_name", "link", "occupancy", "registers",
           "grid", "block", "event", "memop_bytes", "flops", "bytes", "flops_reason", "bytes_reason", "dtype",
           "op_shape", "graph", "role", "source", "gap", "comm_bytes", "comm_factor")


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME/tb_gpuinsight, else ~/.cache/tb_gpuinsight."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_gpuinsight")


class CorruptSummary(ValueError):
    """A stored summary that fails its checksum, does not load, or belongs to another trace or engine."""


def identity(path: str, size: int, mtime_ns: int, options: str = "") -> Dict[str, Any]:
    """What a summary is the analysis of: one version of one trace file, read by this engine with these options."""
    return {"path": os.path.abspath(path), "size": int(size), "mtime_ns": int(mtime_ns), "engine": ENGINE_VERSION,
            "options": options}


def cache_key(path: str, size: int, mtime_ns: int, options: str = "") -> str:
    """Name of the summary file for one version of one trace file."""
    ident = identity(path, size, mtime_ns, options)
    text = "|".join(str(ident[k]) for k in ("path", "size", "mtime_ns", "engine", "options"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:40] + ".npz"


@dataclasses.dataclass
class Summary:
    """A stored summary: the unrated analysis, the trace metadata and the views' sections."""
    eff: Efficiency
    meta: Dict[str, Any]
    sections: Dict[str, Section]


def to_bytes(eff: Efficiency, meta: Dict[str, Any], sections: Optional[Mapping[str, Section]] = None,
             trace_identity: Optional[Dict[str, Any]] = None) -> bytes:
    """Serialise the unrated part of an analysis and the views' sections (for the trace `trace_identity` names)."""
    acts = eff.activities
    arrays = {f"c_{col}": acts[col] for col in _STORED}
    stored_sections = {}
    for name, section in (sections or {}).items():
        stored_sections[name] = {"info": _jsonable(section.info), "error": section.error,
                                 "arrays": sorted(section.arrays)}
        arrays.update({f"s_{name}__{key}": arr for key, arr in section.arrays.items()})
    header = {
        "strings": {col: acts.strings[col] for col in _STORED if col in acts.strings},
        "device_props": _jsonable(eff.device_props),
        "shapes": {str(k): _jsonable(list(v)) for k, v in eff.shapes.items()},
        "meta": _jsonable(meta),
        "sections": stored_sections,
        "engine": ENGINE_VERSION,
        "identity": trace_identity,
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue()


def from_bytes(data: bytes) -> Tuple[Efficiency, Dict[str, Any]]:
    """An unrated Efficiency (call `.rerate()`) and the stored trace metadata."""
    summary = load_summary(data)
    return summary.eff, summary.meta


def load_summary(data: bytes, trace_identity: Optional[Dict[str, Any]] = None) -> Summary:
    """Every part of a stored summary (the Efficiency is unrated: call `.rerate()`). Raises CorruptSummary when it
    does not load, or when `trace_identity` is given and the summary was computed for another trace."""
    try:
        summary, stored = _load_summary(data)
    except CorruptSummary:
        raise
    except Exception as exc:  # zip, npz, JSON or missing-field damage: all mean "unreadable"
        raise CorruptSummary(f"unreadable summary ({type(exc).__name__})") from None
    if trace_identity is not None and stored != trace_identity:
        raise CorruptSummary("the summary belongs to another trace or version")
    return summary


def _load_summary(data: bytes) -> Tuple[Summary, Any]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        header = json.loads(archive["header"].tobytes().decode("utf-8"))
        if header.get("engine") != ENGINE_VERSION:
            raise CorruptSummary("summary written by another engine version")
        columns = {col: archive[f"c_{col}"] for col in _STORED}
        sections = {name: Section(name, stored["info"], {k: archive[f"s_{name}__{k}"] for k in stored["arrays"]},
                                  stored["error"])
                    for name, stored in header.get("sections", {}).items()}
    acts = Table("activities", columns, header["strings"])
    shapes = {int(k): tuple(v) for k, v in header["shapes"].items()}
    eff = Efficiency(None, acts, {}, AUTO, {}, header["device_props"], shapes)
    return Summary(eff, header["meta"], sections), header.get("identity")


def meta_dict(meta) -> Dict[str, Any]:
    """A TraceMeta (dataclass) as a JSON-ready dict."""
    return _jsonable(dataclasses.asdict(meta))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class SummaryCache:
    """A directory of summaries. Every failure to read or write is a miss, never an error for the caller."""

    def __init__(self, directory: Optional[str]) -> None:
        self.directory = directory

    def get(self, key: str) -> Optional[bytes]:
        """The stored payload; None when absent or unreadable. Raises CorruptSummary (after deleting the file)
        when it fails its checksum."""
        if not self.directory:
            return None
        try:
            with open(os.path.join(self.directory, key), "rb") as f:
                data = f.read()
        except OSError:
            return None
        head = len(_MAGIC) + 32
        if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC): head]:
            self.delete(key)
            raise CorruptSummary("the summary fails its checksum")
        return data[head:]

    def delete(self, key: str) -> None:
        """Remove a summary (a damaged one); a failure is ignored."""
        if self.directory:
            try:
                os.unlink(os.path.join(self.directory, key))
            except OSError:
                pass

    def has(self, key: str) -> bool:
        """Whether a summary exists (a stat, not a read: the scanner asks this for every new span)."""
        return bool(self.directory) and os.path.isfile(os.path.join(self.directory, key))

    def put(self, key: str, data: bytes) -> bool:
        """Write atomically; False when the directory cannot be written."""
        if not self.directory:
            return False
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(data).digest())
                f.write(data)
                f.flush()
                os.fsync(f.fileno())  # the rename must never publish a file whose content is not on disk
            os.replace(tmp, os.path.join(self.directory, key))
            _fsync_dir(self.directory)
            return True
        except OSError:
            try:
                os.unlink(tmp)  # type: ignore[possibly-undefined]
            except (OSError, UnboundLocalError):
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
