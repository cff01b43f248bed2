"""The All-ranks kernel table from a run's rank index instead of every span's analysis.

Two sealed `.npz` objects beside the run's rank index (`rank_index.py`), same envelope, same checks on read (a
damaged, foreign or other-engine object is a miss: deleted and rebuilt), whole-object writes:

- `ranks/<run hash>.kernels.npz`, the inputs: per span (by summary key) its per-kernel rows
  (`analysis/ranks/kernel_parts.py`: counts, times, the sums the rates come from, the representative call), rated
  against one datasheet (`datasheet` in its header: another one rebuilds it). A new or changed span reads its own
  summary only; the rows of spans no longer in the run are dropped.
- `ranks/<run hash>.kernel-table.npz`, the answers: the All-ranks tables (by name and by op) of the most recently
  asked sets of spans, each under a digest of their summary keys, ranks, the engine and the datasheet. A request
  whose spans match reads the table as it is (a small object: one row per kernel); otherwise it is merged from the
  inputs and written back. Beside them, the same selection's device cards and roofline points
  (`analysis/ranks/device_parts.py`: one row per GPU and kernel name).
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analysis.ranks import device_parts
from ..analysis.ranks import kernel_parts as kp
from ..analysis.ranks.report import KERNEL_KEYS, RanksError
from ..engine_version import ENGINE_VERSION
from ..trace.table import Table
from . import envelope as cache_mod
from .rank_index import FOLDER, _reading, index_name, summary_header

INPUTS_FORMAT = "tb-gpuinsight rank kernels 2"
ANSWERS_FORMAT = "tb-gpuinsight rank kernel tables 2"
ROOFLINE_KEYS = ("device", "kind", "name")  # the roofline's points: `Efficiency.by_name`
MAX_ANSWERS = 4
# (summary key, worker, span name, identity the summary must carry) of each span, in the order they combine
Chosen = Tuple[str, str, str, Dict[str, Any]]
Reader = Callable[[str, str, str], Optional[Any]]  # a span's rated analysis (Efficiency), None when unreadable


def inputs_name(run: str) -> str:
    return index_name(run)[:-len(".npz")] + ".kernels.npz"


def answers_name(run: str) -> str:
    return index_name(run)[:-len(".npz")] + ".kernel-table.npz"


def digest(chosen: Sequence[Chosen], ranks: Sequence[int], datasheet: Any) -> str:
    """What an All-ranks table depends on: the exact summaries, each one's rank, the engine and the datasheet."""
    text = json.dumps([ENGINE_VERSION, [c[0] for c in chosen], [int(r) for r in ranks], repr(datasheet)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def sheet_digest(datasheet: Any) -> str:
    return hashlib.sha256(repr(datasheet).encode("utf-8", "surrogateescape")).hexdigest()


def tables_for(store, run: str, chosen: Sequence[Chosen], ranks: Sequence[int], present: Sequence[str],
               datasheet: Any, fallback: Optional[Reader] = None, reader: Optional[Reader] = None,
               write: bool = True) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """The All-ranks tables {"name": ..., "op": ..., "device": ...} and device cards (`device_parts.cards`,
    under "cards") of `chosen` spans of `run` (`ranks[i]` the rank of the i-th)
    through the index in `store` (updated and written back when it changed, unless `write` is False: a request
    reads the index and writes nothing, the index is the writer's), and what it cost: {"summaries_read",
    "from_index"}. `present`: every summary key of the run now; `fallback` reads a span the store does not hold
    (in-memory summaries); `reader` reads a span instead of the store (default: its summary in `store`)."""
    key = digest(chosen, ranks, datasheet)
    answers = load_answers(store, run, write)
    if key in answers:
        return answers[key], {"summaries_read": 0, "from_index": 1}
    keys, parts = load_inputs(store, run, datasheet, write) or ([], None)
    reader = reader or _store_reader(store, {c[0]: c[3] for c in chosen}, datasheet)
    keys, parts, read = _updated(keys, parts, chosen, present, reader, fallback)
    where = {k: i for i, k in enumerate(keys)}
    missing = [c for c in chosen if c[0] not in where]
    if missing:
        raise RanksError(f"run {run!r}: {len(missing)} span summary(ies) could not be read")
    spans, span_rank = [where[c[0]] for c in chosen], np.asarray(ranks, dtype=np.int64)
    tables: Dict[str, Any] = {group: kp.merge(parts, spans, span_rank, keys_) for group, keys_ in KERNEL_KEYS.items()}
    tables["device"] = kp.merge(parts, spans, span_rank, ROOFLINE_KEYS)
    tables["cards"] = device_parts.cards(parts, spans, span_rank)
    if not write:
        return tables, {"summaries_read": read, "from_index": 0}
    if read:
        save_inputs(store, run, keys, parts, datasheet)
    answers[key] = tables
    while len(answers) > MAX_ANSWERS:
        answers.pop(next(iter(answers)))
    save_answers(store, run, answers)
    return tables, {"summaries_read": read, "from_index": 0}


def _updated(keys: List[str], parts: Optional[kp.Parts], chosen: Sequence[Chosen], present: Sequence[str],
             reader: Reader, fallback: Optional[Reader]) -> Tuple[List[str], kp.Parts, int]:
    """The inputs without the spans no longer `present`, with the `chosen` spans they lack (read now)."""
    alive = set(present)
    kept = [i for i, k in enumerate(keys) if k in alive]
    if parts is not None and len(kept) < len(keys):
        parts, keys = kp.kept(parts, kept), [keys[i] for i in kept]
    have = set(keys)
    new, read = [], 0
    for key, worker, span, _ in chosen:
        if key in have:
            continue
        read += 1
        eff = reader(key, worker, span)
        if eff is None and fallback is not None:
            eff = fallback(key, worker, span)
        if eff is not None:
            new.append((key, kp.span_parts(eff.activities, eff.device_props)))
            have.add(key)
    if new or parts is None:
        parts = kp.joined(([parts] if parts is not None else []) + [p for _, p in new],
                          {c: list(v) for c, v in parts.strings.items()} if parts is not None else None)
        keys = keys + [k for k, _ in new]
    return keys, parts, read


def _store_reader(store, identities: Dict[str, Dict[str, Any]], datasheet: Any) -> Reader:
    """A span's rated analysis from its summary in `store` (None when missing, damaged or another trace's)."""
    def read(key: str, worker: str, span: str) -> Optional[Any]:
        try:
            data = store.get(key) if store else None
            return None if data is None else summary_activities(data, identities.get(key) or None, datasheet)
        except cache_mod.CorruptSummary:
            return None
    return read


def summary_activities(payload: bytes, identity: Optional[Dict[str, Any]], datasheet: Any):
    """The rated analysis (`Efficiency`: activities and device properties) of one summary payload, reading only its
    activity columns and header (not the views' sections). Raises CorruptSummary as `envelope.load_summary` does."""
    from ..analysis.kernels.efficiency import AUTO, Efficiency

    with _reading("summary"):
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
            header = summary_header(archive, identity)
            columns = {col: archive[f"c_{col}"] for col in cache_mod.STORED_COLUMNS}
        acts = Table("activities", columns, header["strings"])
        return Efficiency(None, acts, {}, AUTO, {}, header["device_props"], {}).rerate(AUTO, datasheet)


# ------------------------------------------------------------------------------------------------ encoding

def _save(store, name: str, header: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> bool:
    if not store:
        return False
    arrays = dict(arrays, header=np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8))
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return store._write(name, cache_mod.seal(out.getvalue()))


def _load(store, name: str, run: str, form: str, decode: Callable[[Dict[str, Any], Any], Any],
          write: bool = True) -> Any:
    """`decode(header, archive)` of one object, None when absent, or damaged, foreign, another engine's (then
    deleted, unless `write` is False)."""
    data = store._read(name) if store else None
    if data is None:
        return None
    try:
        with _reading("rank kernel index"):
            with np.load(io.BytesIO(cache_mod.unseal(data)), allow_pickle=False) as archive:
                header = json.loads(archive["header"].tobytes().decode("utf-8"))
                if header.get("format") != form or header.get("engine") != ENGINE_VERSION or header.get("run") != run:
                    raise cache_mod.CorruptSummary("rank kernel index of another run, format or engine")
                return decode(header, archive)
    except cache_mod.CorruptSummary:
        if write:
            store._delete(name)
        return None


def save_inputs(store, run: str, keys: List[str], parts: kp.Parts, datasheet: Any) -> bool:
    """Write the per-span kernel rows of `run` (spans in `keys` order) whole."""
    arrays = {f"c_{c}": v for c, v in parts.columns.items()}
    for c, lists in parts.cats.items():
        arrays[f"k_{c}"] = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int32)
        arrays[f"o_{c}"] = np.cumsum([0] + [len(v) for v in lists]).astype(np.int64)
    arrays.update({f"r_{k}": v for k, v in parts.reasons.items()})
    arrays.update({f"u_{k}": v for k, v in parts.unknown.items()})
    for c, lists in parts.per_span.items():
        arrays[f"s_{c}"] = np.concatenate(lists) if lists else np.zeros(0)
        arrays[f"t_{c}"] = np.cumsum([0] + [len(v) for v in lists]).astype(np.int64)
    header = {"format": INPUTS_FORMAT, "engine": ENGINE_VERSION, "run": run, "datasheet": sheet_digest(datasheet),
              "keys": keys, "strings": parts.strings}
    return _save(store, inputs_name(run), header, arrays)


def load_inputs(store, run: str, datasheet: Any, write: bool = True) -> Optional[Tuple[List[str], kp.Parts]]:
    """(summary keys, their per-kernel rows) of `run`; None when absent, damaged (then deleted, unless `write` is
    False) or rated on another datasheet."""
    def decode(header: Dict[str, Any], archive) -> Optional[Tuple[List[str], kp.Parts]]:
        if header.get("datasheet") != sheet_digest(datasheet):
            return None
        columns = {k[2:]: archive[k] for k in archive.files if k.startswith("c_")}
        cats = {}
        for c in kp.PART_KEYS:
            flat, offsets = archive[f"k_{c}"], archive[f"o_{c}"].tolist()
            cats[c] = [flat[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]
        reasons = {k[2:]: archive[k] for k in archive.files if k.startswith("r_")}
        unknown = {k[2:]: archive[k] for k in archive.files if k.startswith("u_")}
        per_span = {}
        for c in (k[2:] for k in archive.files if k.startswith("s_")):
            flat, offsets = archive[f"s_{c}"], archive[f"t_{c}"].tolist()
            per_span[c] = [flat[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]
        parts = kp.Parts(columns, header["strings"], cats, reasons, unknown, per_span)
        if parts.spans != len(header["keys"]):
            raise cache_mod.CorruptSummary("rank kernel index: spans and keys disagree")
        return list(header["keys"]), parts
    return _load(store, inputs_name(run), run, INPUTS_FORMAT, decode, write)


def save_answers(store, run: str, answers: Dict[str, Dict[str, Any]]) -> bool:
    """Write the kept All-ranks tables and device cards of `run` whole (the oldest first)."""
    arrays, meta = {}, []
    for i, (key, answer) in enumerate(answers.items()):
        tables = {g: t for g, t in answer.items() if g != "cards"}
        meta.append({"digest": key, "strings": {g: t.strings for g, t in tables.items()},
                     "columns": {g: list(t.columns) for g, t in tables.items()}, "cards": answer.get("cards")})
        arrays.update({f"a{i}_{g}__{c}": v for g, t in tables.items() for c, v in t.columns.items()})
    return _save(store, answers_name(run), {"format": ANSWERS_FORMAT, "engine": ENGINE_VERSION, "run": run,
                                            "answers": meta}, arrays)


def load_answers(store, run: str, write: bool = True) -> Dict[str, Dict[str, Any]]:
    """The kept All-ranks tables and device cards of `run` by digest ({} when none, or damaged: then deleted,
    unless `write` is False)."""
    def decode(header: Dict[str, Any], archive) -> Dict[str, Dict[str, Any]]:
        return {a["digest"]: {**{g: Table("groups", {c: archive[f"a{i}_{g}__{c}"] for c in cols}, a["strings"][g])
                                 for g, cols in a["columns"].items()}, "cards": a["cards"]}
                for i, a in enumerate(header["answers"])}
    return _load(store, answers_name(run), run, ANSWERS_FORMAT, decode, write) or {}


__all__ = ["tables_for", "digest", "load_inputs", "save_inputs", "load_answers", "save_answers", "inputs_name",
           "answers_name", "FOLDER"]
