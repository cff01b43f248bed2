"""The rank index of a run: one object beside the summaries (`STORE/ranks/<run hash>.npz`) that holds what the
Distributed tab needs from every rank, so that a request reads one object instead of one summary per rank.

Two parts, in one sealed `.npz` (the summaries' envelope: magic, SHA-256, payload; read with
`allow_pickle=False`):

- the inputs, columnar: per span (by summary key) its "distributed" section (step x split of a CPU trace, the
  collective records) and the step split of its "overview" section: `a_<section>__<array>` holds that array of
  all spans concatenated, `o_<section>__<array>` the offset of each, `spans` (JSON) each span's worker, name,
  section facts, and where its arrays are. A changed or new rank reads its own summary only; the other rows are
  kept as they are. They are decoded only when a report must be computed.
- the answers (`r_<i>`, their digests in `header`): the multi-rank report (`analysis/rank_table.py`: per rank x
  step the split and the wait in collectives, per rank the straggler evidence, the collectives and instances) of
  the most recently asked sets of spans, each under a digest of their summary keys, the engine and the
  datasheet. A request whose spans and datasheet match reads the report as it is; otherwise it is recomputed
  from the inputs (no summary read unless a rank is new) and written back.

A damaged, foreign or other-engine index is a miss: it is deleted and rebuilt. Writes are whole-object (atomic
locally, one PUT on an object store), like the summaries'; two writers of one run write equivalent indexes.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from . import envelope as cache_mod
from ..engine_version import ENGINE_VERSION
from ..sections import Section

FOLDER = "ranks"
FORMAT = "tb-gpuinsight rank index 2"
SECTIONS = ("distributed", "overview")
_OVERVIEW_INFO = ("gpu_activities",)  # the only overview facts the rank split reads
MAX_REPORTS = 4  # answers kept per run (cycles or device files asked for recently)


@dataclass
class RankInputs:
    """One span's rows of the index: where it came from and its two sections (overview trimmed to the split)."""
    key: str
    worker: str
    span: str
    sections: Dict[str, Section]


class RankIndex:
    """A run's rank index in memory: inputs by summary key (decoded on first use: an answer found by its digest
    needs none of them) and the stored answers by digest."""

    def __init__(self, run: str, inputs: Optional[Dict[str, "RankInputs"]] = None,
                 reports: Optional[Dict[str, bytes]] = None, decode: Optional[Callable[[], Dict]] = None) -> None:
        self.run = run
        self._inputs = inputs
        self._decode = decode
        self.reports: Dict[str, bytes] = reports or {}  # digest -> the report as JSON (UTF-8)

    @property
    def inputs(self) -> Dict[str, RankInputs]:
        if self._inputs is None:
            self._inputs = self._decode() if self._decode else {}
        return self._inputs

    @inputs.setter
    def inputs(self, value: Dict[str, RankInputs]) -> None:
        self._inputs = value

    def update(self, chosen: Iterable[Tuple[str, str, str]], present: Iterable[str],
               read: Callable[[str, str, str], Optional[Dict[str, Section]]]) -> int:
        """Drop the inputs of spans no longer `present` (summary keys of the run), read the sections of the
        `chosen` (key, worker, span) missing with `read(key, worker, span)`; returns how many were read. A span
        `read` cannot give is left out. Answers stay: their digests name the exact summaries they came from."""
        present = set(present)
        self.inputs = {k: v for k, v in self.inputs.items() if k in present}
        count = 0
        for key, worker, span in chosen:
            if key not in self.inputs:
                sections = read(key, worker, span)
                count += 1
                if sections is not None:
                    self.inputs[key] = trimmed(key, worker, span, sections)
        return count

    def remember(self, digest: str, report: bytes) -> None:
        """Keep an answer (the oldest goes past MAX_REPORTS)."""
        self.reports.pop(digest, None)
        self.reports[digest] = report
        while len(self.reports) > MAX_REPORTS:
            self.reports.pop(next(iter(self.reports)))


def trimmed(key: str, worker: str, span: str, sections: Dict[str, Section]) -> RankInputs:
    """The index rows of one span from its stored sections (a missing one is kept as its error)."""
    dist = sections.get("distributed") or Section("distributed", error="not in this summary")
    ov = sections.get("overview") or Section("overview", error="not in this summary")
    ov = Section("overview", {k: ov.info[k] for k in _OVERVIEW_INFO if k in ov.info}, dict(ov.arrays), ov.error)
    return RankInputs(key, worker, span, {"distributed": dist, "overview": ov})


def index_name(run: str) -> str:
    """The index's name in a store: a hash of the run's name (runs are paths, maybe with any character)."""
    return f"{FOLDER}/{hashlib.sha256(run.encode('utf-8', 'surrogateescape')).hexdigest()[:40]}.npz"


# ------------------------------------------------------------------------------------------------ encoding

def to_bytes(index: RankIndex) -> bytes:
    """The index as an `.npz` payload: a JSON header per span and every array concatenated over the spans."""
    rows, arrays = [], {}
    columns: Dict[str, List[np.ndarray]] = {}
    for i, item in enumerate(index.inputs.values()):
        row = {"key": item.key, "worker": item.worker, "span": item.span, "sections": {}}
        for name in SECTIONS:
            sec = item.sections[name]
            row["sections"][name] = {"info": sec.info, "error": sec.error, "arrays": {}}
            for a, value in sec.arrays.items():
                col = columns.setdefault(f"{name}__{a}", [])
                row["sections"][name]["arrays"][a] = [len(col), list(value.shape), value.dtype.str]
                col.append(np.ascontiguousarray(value).reshape(-1))
        rows.append(row)
    for name, parts in columns.items():
        arrays[f"a_{name}"] = _concatenated(parts)
        arrays[f"o_{name}"] = np.cumsum([0] + [len(p) for p in parts]).astype(np.int64)
    header = {"format": FORMAT, "engine": ENGINE_VERSION, "run": index.run, "reports": list(index.reports)}
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    arrays["spans"] = np.frombuffer(json.dumps(rows).encode("utf-8"), dtype=np.uint8)
    for i, report in enumerate(index.reports.values()):
        arrays[f"r_{i}"] = np.frombuffer(report, dtype=np.uint8)
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue()


def _concatenated(parts: List[np.ndarray]) -> np.ndarray:
    """One flat array of parts that may differ in dtype (kept exactly: float64 holds every stored value)."""
    kinds = {p.dtype for p in parts}
    return np.concatenate(parts) if len(kinds) == 1 else np.concatenate([p.astype(np.float64) for p in parts])


def from_bytes(data: bytes, run: str) -> RankIndex:
    """The index back from `to_bytes` (its inputs decoded when first used); raises CorruptSummary when it is not
    one of this engine for `run`."""
    with _reading("rank index"):
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            header = json.loads(archive["header"].tobytes().decode("utf-8"))
            if header.get("format") != FORMAT or header.get("engine") != ENGINE_VERSION or header.get("run") != run:
                raise cache_mod.CorruptSummary("rank index of another run, format or engine")
            reports = {d: archive[f"r_{i}"].tobytes() for i, d in enumerate(header["reports"])}
    return RankIndex(run, reports=reports, decode=lambda: _inputs(data))


def _inputs(data: bytes) -> Dict[str, RankInputs]:
    """The per-span rows of an index payload (already checked by `from_bytes`)."""
    with _reading("rank index"):
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            rows = json.loads(archive["spans"].tobytes().decode("utf-8"))
            flat = {k[2:]: archive[k] for k in archive.files if k.startswith("a_")}
            offsets = {k[2:]: archive[k] for k in archive.files if k.startswith("o_")}
        out = {}
        for row in rows:
            sections = {}
            for name, sec in row["sections"].items():
                arrays = {}
                for a, (pos, shape, dtype) in sec["arrays"].items():
                    col = f"{name}__{a}"
                    lo, hi = offsets[col][pos], offsets[col][pos + 1]
                    arrays[a] = flat[col][lo:hi].astype(np.dtype(dtype), copy=False).reshape(shape)
                sections[name] = Section(name, sec["info"], arrays, sec["error"])
            out[row["key"]] = RankInputs(row["key"], row["worker"], row["span"], sections)
        return out


@contextlib.contextmanager
def _reading(what: str):
    """Any damage found while decoding (zip, npz, JSON, a missing field) is CorruptSummary."""
    try:
        yield
    except cache_mod.CorruptSummary:
        raise
    except Exception as exc:
        raise cache_mod.CorruptSummary(f"unreadable {what} ({type(exc).__name__})") from None


# ------------------------------------------------------------------------------------------------ store I/O

def load(store, run: str, write: bool = True) -> Optional[RankIndex]:
    """The run's index from a store (one read), or None when there is none, or it is damaged (then deleted, unless
    `write` is False: a request reads only, the writer's next build replaces it)."""
    if not store:
        return None
    name = index_name(run)
    data = store._read(name)
    if data is None:
        return None
    try:
        return from_bytes(cache_mod.unseal(data), run)
    except cache_mod.CorruptSummary:
        if write:
            store._delete(name)
        return None


def save(store, index: RankIndex) -> bool:
    """Write the index whole (atomically); False when the store cannot be written (it is then kept in memory)."""
    return bool(store) and store._write(index_name(index.run), cache_mod.seal(to_bytes(index)))


def read_sections(store, identities: Dict[str, Dict[str, Any]]):
    """A `RankIndex.update` reader over a store's summaries: the span's sections, None when its summary is
    missing, damaged or not the trace's (`identities`: key -> the identity its summary must carry)."""
    def read(key: str, worker: str, span: str) -> Optional[Dict[str, Section]]:
        try:
            data = store.get(key)
            return None if data is None else summary_sections(data, identities.get(key) or None)
        except cache_mod.CorruptSummary:
            return None
    return read


def summary_header(archive: Any, identity: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The header of an opened summary archive, checked: written by this engine and, when `identity` is given,
    for that trace. Raises CorruptSummary otherwise."""
    header = json.loads(archive["header"].tobytes().decode("utf-8"))
    if header.get("engine") != ENGINE_VERSION:
        raise cache_mod.CorruptSummary("summary written by another engine version")
    if identity is not None and header.get("identity") != identity:
        raise cache_mod.CorruptSummary("the summary belongs to another trace or version")
    return header


def summary_sections(payload: bytes, identity: Optional[Dict[str, Any]] = None) -> Dict[str, Section]:
    """The index's sections of one summary payload, reading only their arrays (not the activity columns nor the
    other views' sections). Raises CorruptSummary as `cache.load_summary` does."""
    with _reading("summary"):
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
            stored = summary_header(archive, identity).get("sections", {})
            return {name: Section(name, stored[name]["info"],
                                  {k: archive[f"s_{name}__{k}"] for k in stored[name]["arrays"]},
                                  stored[name]["error"]) for name in SECTIONS if name in stored}


__all__ = ["RankIndex", "RankInputs", "index_name", "load", "save", "to_bytes", "from_bytes", "read_sections", "summary_header", "summary_sections",
           "trimmed"]
