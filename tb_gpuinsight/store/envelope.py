"""Persistent per-trace summaries: what a tab needs from a trace, without re-reading the trace.

A summary is the analysis's activity table before rating (FLOPs, bytes, dtype, op links per kernel/memcpy/memset),
plus the trace's device properties, the shape signatures of launching ops and the trace metadata. Rating against
the datasheet is redone on load (cheap), so a changed devices file applies without re-reading traces.

This module is the summary's envelope: a numpy `.npz` archive read with `allow_pickle=False` (no code runs on
load), sealed with a SHA-256 of its content (`seal` / `unseal`). Where summaries live, how they are named and how
they are written atomically is the summary store's business (`tb_gpuinsight.store`). Each summary also records the
identity it was computed for: a summary that fails its checksum, does not load or belongs to another trace is an
error the service repairs by deleting it and analysing again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..analysis.kernels.efficiency import AUTO, Efficiency
from ..engine_version import ENGINE_VERSION
from ..sections import Section
from ..trace.table import Table


# Columns an analysis computes before rating; the rest is recomputed by `rate` on load.
_MAGIC = b"TBGI-SUMMARY-1\n"  # then 32 bytes of SHA-256 of the payload, then the payload (an .npz archive)

_STORED = ("kind", "name", "device", "stream", "ts", "dur", "op", "op_name", "link", "occupancy", "registers",
           "grid", "block", "event", "memop_bytes", "flops", "bytes", "flops_reason", "bytes_reason", "dtype",
           "op_shape", "graph", "role", "source", "gap", "comm_bytes", "comm_factor")


STORED_COLUMNS = _STORED  # the activity columns every summary holds


class CorruptSummary(ValueError):
    """A stored summary that fails its checksum, does not load, or belongs to another trace or engine."""


@dataclasses.dataclass
class Summary:
    """A stored summary: the unrated analysis, the trace metadata and the views' sections."""
    eff: Efficiency
    meta: Dict[str, Any]
    sections: Dict[str, Section]
    identity: Optional[Dict[str, Any]] = None  # the trace it was computed for (see `store.trace_identity`)


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
    return Summary(eff, header["meta"], sections, header.get("identity")), header.get("identity")


def meta_dict(meta) -> Dict[str, Any]:
    """A TraceMeta (dataclass) as a JSON-ready dict (the python_function counts by time bucket stay out: the
    overview section carries them per step)."""
    out = dataclasses.asdict(meta)
    out.pop("python_calls", None)
    return _jsonable(out)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def seal(payload: bytes) -> bytes:
    """A payload framed for storage: magic, SHA-256 of the payload, payload."""
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def unseal(data: bytes) -> bytes:
    """The payload of `seal`'s framing; raises CorruptSummary when the magic or the checksum does not match."""
    head = len(_MAGIC) + 32
    if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC): head]:
        raise CorruptSummary("the summary fails its checksum")
    return data[head:]
