"""The All-ranks kernel table from per-span sums instead of every span's activities.

`span_parts` reduces one span's rated activities to one row per (launching op, kind, kernel name) holding what
`aggregate` and `across_ranks` compute a grouped row from: counts, times, min / max, the basis tier and the sums
over its calls (`grouping.SUMS`), the representative call's descriptive columns and its position, the first call
over the roof, occupancy weights, communication sums and the time per reason code. `merge` folds the rows of
several spans (in the order the service combines them) into the same table `across_ranks` gives over their
concatenated activities, for either grouping (by name, or by op): the group order follows the label order that
`efficiency.combine` gives, the basis of a group is the lowest tier any span has (a span with a higher lowest tier
has no call in it), and "first" means first in span order, then in the span's activity order. Sums are added
per span rather than per call, so a float may differ from the per-call sum in its last bits.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ...trace.table import Table, code_labels, unique_rows
from ..kernels.attribution import is_copy_event
from ..kernels.grouping import BASIS_TIERS, SUMS, basis_of, group_sums, marked_level, merged_segments, rates_from_sums, \
    unrated_reason
from ..kernels.reasons import CODES
from .collectives import COMMUNICATION, communication_sums, is_communication, mark_communication_rows

PART_KEYS = ("op_name", "kind", "name")  # the finest grouping; by name merges its rows further
ROW_KEYS = ("device",) + PART_KEYS  # a row per GPU too: the device cards and the roofline are per GPU
LABELS = ("dtype", "rate_dtype", "grid", "block", "flops_reason", "bytes_reason", "role", "roof_cause", "over_cause")
FIXED = ("bound", "reason")  # label lists every rated span shares (codes the rating writes)
_FLOATS = ("total", "min", "max", *SUMS, "occ_weight", "occ_sum", "moved", "busy", "peak_tflops", "dram_gbps",
           "flop_time", "byte_time", "rated_time", "rated_sum", "kept_flops", "kept_bytes", "unknown_time")
_COUNTS = ("count", "rep_pos", "over_pos", "over_count", "unknown_count")


@dataclass
class Parts:
    """Per-kernel rows of one or more spans: `columns` (one value per row; `span` its span's position, `device` its
    GPU), `strings` (the labels of the key and label columns, whose codes the columns hold), `cats` (per key column
    and span, the codes of that span's whole label list in its order: it fixes the combined table's row order),
    `reasons` (sparse time per reason code: `row`, `code`, `time`; `unknown` the same over calls without FLOPs) and
    `per_span` (per span: its GPU busy segments `busy_device` / `busy_start` / `busy_end`, and `props`, the code in
    `strings["props"]` of its device properties as JSON: what the device cards are made of, `device_parts.py`)."""
    columns: Dict[str, np.ndarray]
    strings: Dict[str, List[str]]
    cats: Dict[str, List[np.ndarray]] = field(default_factory=dict)
    reasons: Dict[str, np.ndarray] = field(default_factory=dict)
    unknown: Dict[str, np.ndarray] = field(default_factory=dict)
    per_span: Dict[str, List[np.ndarray]] = field(default_factory=dict)

    @property
    def spans(self) -> int:
        return len(next(iter(self.cats.values()))) if self.cats else 0


def span_parts(acts: Table, device_props: Sequence[Dict] = ()) -> Parts:
    """The per-kernel rows of one span's rated activities (one row per GPU, launching op, kind and kernel name);
    `device_props`: the span's device properties (what its devices are matched to the datasheet with)."""
    from ..kernels.grouping import _first_where, _representative_rows

    keys = ROW_KEYS
    if len(acts):
        stacked = np.stack([acts[k].astype(np.int64) for k in keys], axis=1)
        uniq, inverse = unique_rows(stacked)
    else:
        uniq, inverse = np.zeros((0, len(keys)), dtype=np.int64), np.zeros(0, dtype=np.int64)
    g, dur = len(uniq), acts["dur"]
    cols: Dict[str, np.ndarray] = {k: uniq[:, i].astype(np.int32) for i, k in enumerate(keys)}
    cols["count"] = np.bincount(inverse, minlength=g)
    cols["total"] = np.bincount(inverse, weights=dur, minlength=g)
    cols["min"], cols["max"] = np.full(g, np.inf), np.full(g, -np.inf)
    np.minimum.at(cols["min"], inverse, dur)
    np.maximum.at(cols["max"], inverse, dur)
    basis, cols["level"] = basis_of(acts, inverse, g)
    cols.update(group_sums(acts, inverse, g, basis))
    known = ~np.isnan(acts["occupancy"])
    cols["occ_weight"] = np.bincount(inverse, weights=np.where(known, dur, 0), minlength=g)
    cols["occ_sum"] = np.bincount(inverse, weights=np.where(known, acts["occupancy"] * dur, 0), minlength=g)
    cols["moved"], cols["busy"] = communication_sums(acts, inverse, g)
    rep = _representative_rows(acts, inverse, g)
    cols["rep_pos"], cols["rated"] = rep, ~np.isnan(acts["peak_tflops"][rep])
    for col in ("dtype", "rate_dtype", "grid", "block", "flops_reason", "bytes_reason", "role", "roof_cause",
                "registers", "peak_tflops", "dram_gbps"):
        cols[col] = acts[col][rep]
    cols["copy"], cols["comm"] = is_copy_event(acts)[rep], is_communication(acts)[rep]
    over = _first_where(acts["over_roof"], inverse, g, np.full(g, -1, dtype=np.int64))
    cols["over_pos"] = over
    cols["over_cause"] = np.where(over >= 0, acts["roof_cause"][np.clip(over, 0, None)], -1) if g else over
    k = len(CODES)
    time = np.bincount(inverse * k + acts["reason"].astype(np.int64), weights=dur, minlength=g * k)
    cols.update(card_sums(acts, inverse, g))
    unknown = np.isnan(acts["flops"])
    cols["unknown_count"] = np.bincount(inverse, weights=unknown, minlength=g)
    cols = {c: _typed(c, v) for c, v in cols.items()}
    cols["span"] = np.zeros(g, dtype=np.int32)
    strings = {c: list(acts.strings[c]) for c in PART_KEYS + FIXED}
    strings.update({c: list(acts.strings["roof_cause" if c == "over_cause" else c]) for c in LABELS})
    strings["props"] = [json.dumps(list(device_props), sort_keys=True)]
    cats = {c: [np.arange(len(strings[c]), dtype=np.int32)] for c in PART_KEYS}
    return Parts(cols, strings, cats, _sparse(time, k),
                 _sparse(np.bincount(inverse * k + acts["reason"].astype(np.int64), weights=np.where(unknown, dur, 0),
                                     minlength=g * k), k),
                 {**busy_segments(acts), "props": [np.zeros(1, dtype=np.int32)]})


def _sparse(time: np.ndarray, k: int) -> Dict[str, np.ndarray]:
    """Rows x reason codes (flattened) as its non-zero cells."""
    row, code = np.divmod(np.flatnonzero(time), k)
    return {"row": row.astype(np.int32), "code": code.astype(np.int8), "time": time[time != 0]}


def card_sums(acts: Table, inverse: np.ndarray, g: int) -> Dict[str, np.ndarray]:
    """Per row, what a device card (`grouping.device_summary`) adds up over its calls, besides their time."""
    dur, over = acts["dur"], acts["over_roof"]
    kept, rated = ~over, ~over & np.isfinite(acts["efficiency"])

    def add(mask: np.ndarray, values: np.ndarray = None) -> np.ndarray:
        return np.bincount(inverse, weights=np.where(mask, dur if values is None else values, 0), minlength=g)

    return {"flop_time": add(~np.isnan(acts["flops"])), "byte_time": add(~np.isnan(acts["bytes"])),
            "rated_time": add(rated), "rated_sum": add(rated, acts["efficiency"] * dur),
            "over_count": np.bincount(inverse, weights=over, minlength=g),
            "kept_flops": add(kept & ~np.isnan(acts["flops"]), acts["flops"]),
            "kept_bytes": add(kept & ~np.isnan(acts["bytes"]), acts["bytes"]),
            "unknown_time": add(np.isnan(acts["flops"]))}


def busy_segments(acts: Table) -> Dict[str, List[np.ndarray]]:
    """Per GPU, the union of its activities' [ts, ts + dur) as disjoint segments in time order (as
    `grouping.busy_time` merges them: the union over spans of these is the union over their activities)."""
    devices, starts, ends = [], [], []
    for dev in np.unique(acts["device"]).tolist() if len(acts) else []:
        mine = acts["device"] == dev
        start, end = merged_segments(acts["ts"][mine], (acts["ts"] + acts["dur"])[mine])
        devices.append(np.full(len(start), dev, dtype=np.int32))
        starts.append(start)
        ends.append(end)
    return {"busy_device": [np.concatenate(devices) if devices else np.zeros(0, dtype=np.int32)],
            "busy_start": [np.concatenate(starts) if starts else np.zeros(0)],
            "busy_end": [np.concatenate(ends) if ends else np.zeros(0)]}


def _typed(col: str, value: np.ndarray) -> np.ndarray:
    if col in _FLOATS:
        return np.asarray(value, dtype=np.float64)
    if col in ("rated", "copy", "comm"):
        return np.asarray(value, dtype=bool)
    return np.asarray(value, dtype=np.int64 if col in _COUNTS else np.int32)


def joined(parts: Sequence[Parts], strings: Dict[str, List[str]] = None) -> Parts:
    """Several spans' rows as one `Parts` (spans numbered in this order), their labels in one list per column
    (`strings`, extended in place when given). Raises ValueError when the spans' rating labels differ."""
    strings = {} if strings is None else strings
    lookup = {c: {s: i for i, s in enumerate(v)} for c, v in strings.items()}
    columns: Dict[str, List[np.ndarray]] = {}
    cats: Dict[str, List[np.ndarray]] = {c: [] for c in PART_KEYS}
    sparse: Dict[str, Dict[str, List[np.ndarray]]] = {s: {"row": [], "code": [], "time": []}
                                                      for s in ("reasons", "unknown")}
    per_span: Dict[str, List[np.ndarray]] = {}
    rows = spans = 0
    for part in parts:
        for c in FIXED:
            if strings.setdefault(c, part.strings[c]) != part.strings[c]:
                raise ValueError(f"spans rated with different {c} labels")
        codes = {c: code_labels(part.strings[c], lookup.setdefault(c, {}), strings.setdefault(c, []))
                 for c in PART_KEYS + LABELS + ("props",)}
        for c, v in part.columns.items():
            if c in codes:
                v = np.where(v >= 0, codes[c][np.clip(v, 0, None)], -1).astype(np.int32) if len(codes[c]) else v
            elif c == "span":
                v = v + spans
            columns.setdefault(c, []).append(v)
        for c in PART_KEYS:
            cats[c] += [codes[c][local] if len(local) else local for local in part.cats[c]]
        for c, lists in part.per_span.items():
            per_span.setdefault(c, []).extend([codes[c][v] for v in lists] if c == "props" else lists)
        for name, into in sparse.items():
            mine = getattr(part, name)
            into["row"].append(mine["row"] + rows)
            into["code"].append(mine["code"])
            into["time"].append(mine["time"])
        rows += len(part.columns["span"])
        spans += part.spans
    out = {c: np.concatenate(v) for c, v in columns.items()}
    reasons, unknown = ({k: np.concatenate(v) if v else np.zeros(0) for k, v in sparse[s].items()}
                        for s in ("reasons", "unknown"))
    return Parts(out, strings, cats, reasons, unknown, per_span)


def _rows_in_order(parts: Parts, spans: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """The rows of `spans` (positions in `parts`), span after span in that order, each span's rows in stored order;
    and each row's position in `spans`."""
    order_of = np.full(parts.spans, -1, dtype=np.int64)
    order_of[np.asarray(spans, dtype=np.int64)] = np.arange(len(spans))
    pos = order_of[parts.columns["span"]]
    rows = np.flatnonzero(pos >= 0)
    rows = rows[np.argsort(pos[rows], kind="stable")]
    return rows, pos[rows]


def kept(parts: Parts, spans: Sequence[int]) -> Parts:
    """Only the rows of `spans` (positions in `parts`, renumbered 0.. in this order); labels stay as they are."""
    rows, pos = _rows_in_order(parts, spans)
    columns = {c: v[rows] for c, v in parts.columns.items()}
    columns["span"] = pos.astype(np.int32)
    where = np.full(len(parts.columns["span"]), -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))

    def moved(sparse: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        row = where[sparse["row"]] if len(sparse["row"]) else np.zeros(0, dtype=np.int64)
        keep = row >= 0
        return {"row": row[keep].astype(np.int32), "code": sparse["code"][keep], "time": sparse["time"][keep]}

    return Parts(columns, parts.strings, {c: [v[s] for s in spans] for c, v in parts.cats.items()},
                 moved(parts.reasons), moved(parts.unknown), {c: [v[s] for s in spans] for c, v in
                                                              parts.per_span.items()})


def merge(parts: Parts, spans: Sequence[int], span_rank: np.ndarray, keys: Tuple[str, ...]) -> Table:
    """What `across_ranks(combined activities, span_rank, keys)` gives, from the rows of `spans` (positions in
    `parts`, in the order the activities would be combined; `span_rank[i]` the rank of `spans[i]`)."""
    from .report import rank_spread

    rows, pos = _rows_in_order(parts, spans)
    col = {c: v[rows] for c, v in parts.columns.items()}
    merged = {c: combined_codes(parts, c, spans) for c in keys if c in parts.cats}  # `device` is no label
    stacked = np.stack([np.where(col[c] >= 0, merged[c][0][np.clip(col[c], 0, None)], -1)
                        if c in merged and len(merged[c][0]) else col[c] for c in keys], axis=1).astype(np.int64)
    uniq, inverse = unique_rows(stacked)
    g = len(uniq)

    def add(values: np.ndarray) -> np.ndarray:
        return np.bincount(inverse, weights=values, minlength=g).astype(np.float64)  # float even when empty

    out: Dict[str, np.ndarray] = {c: uniq[:, i].astype(np.int32) for i, c in enumerate(keys)}
    count = add(col["count"]).astype(np.int64)
    total = add(col["total"])
    out.update(count=count, total_us=total, mean_us=total / np.where(count > 0, count, 1) if g else total,
               min_us=_at(np.minimum, inverse, col["min"], g, np.inf),
               max_us=_at(np.maximum, inverse, col["max"], g, -np.inf))
    level = _at(np.minimum, inverse, col["level"].astype(np.float64), g, BASIS_TIERS).astype(np.int64)
    mine = col["level"] == level[inverse]  # a span whose lowest tier is higher has no basis call here
    sums = {c: add(np.where(mine, col[c], 0)) for c in SUMS if c not in ("both_time", "over_time")}
    for c in ("flops", "bytes"):
        known = mine & ~np.isnan(col[c])
        sums[c] = np.where(add(known) > 0, add(np.where(known, col[c], 0)), np.nan)
    sums["both_time"], sums["over_time"] = add(col["both_time"]), add(col["over_time"])
    rep = _first_in_order(inverse, g, pos, col["rep_pos"], col["rated"])
    out.update(rates_from_sums(sums, total, col["peak_tflops"][rep], col["dram_gbps"][rep], col["copy"][rep]))
    bounds = parts.strings["bound"]
    if COMMUNICATION in bounds:
        mark_communication_rows(col["comm"][rep], bounds.index(COMMUNICATION), add(col["moved"]),
                                add(col["busy"]), out["bound"], out)
    out["over_roof"] = marked_level(level)
    for c in ("dtype", "rate_dtype", "grid", "block", "registers", "peak_tflops", "dram_gbps", "flops_reason",
              "bytes_reason", "role", "roof_cause"):
        out[c] = col[c][rep]
    over = _first_in_order(inverse, g, pos, col["over_pos"], col["over_pos"] >= 0, fallback=False)
    out["roof_cause"] = np.where(over >= 0, col["over_cause"][np.clip(over, 0, None)], out["roof_cause"])
    out["reason"] = _main_reason(parts, rows, inverse, g)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = add(col["occ_weight"])
        out["occupancy"] = np.where(weight > 0, add(col["occ_sum"]) / weight, np.nan)
        out["time_share"] = total / total.sum() if total.sum() > 0 else np.full(g, np.nan)
    ranks = np.asarray(span_rank, dtype=np.int64)[pos] if len(pos) else np.zeros(0, dtype=np.int64)
    n = max(int(np.max(span_rank)) + 1, 1) if len(span_rank) else 1
    flat = inverse * n + ranks
    time = np.bincount(flat, weights=col["total"], minlength=g * n).astype(np.float64).reshape(g, n)
    ran = np.bincount(flat, weights=col["count"], minlength=g * n).reshape(g, n) > 0
    strings = {c: merged[c][1] for c in keys if c in merged}
    strings.update({c: parts.strings[c] for c in ("dtype", "rate_dtype", "grid", "block", "flops_reason",
                                                   "bytes_reason", "role", "roof_cause", *FIXED)})
    return Table("groups", {**out, **rank_spread(time, ran)}, strings)


def combined_codes(parts: Parts, col: str, spans: Sequence[int]) -> Tuple[np.ndarray, List[str]]:
    """For a key column: the combined code of each label code of `parts`, and the combined label list, as
    `efficiency.combine` numbers labels (first seen over the spans' whole label lists, in span order)."""
    lists = [parts.cats[col][s] for s in spans]
    seen = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int32)
    labels, first = np.unique(seen, return_index=True)
    by_first = labels[np.argsort(first, kind="stable")]
    code = np.full(len(parts.strings[col]), -1, dtype=np.int64)
    code[by_first] = np.arange(len(by_first))
    return code, [parts.strings[col][i] for i in by_first.tolist()]


def _at(ufunc, inverse: np.ndarray, values: np.ndarray, g: int, init: float) -> np.ndarray:
    out = np.full(g, init, dtype=np.float64)
    ufunc.at(out, inverse, values)
    return out


def _first_in_order(inverse: np.ndarray, g: int, span_pos: np.ndarray, row_pos: np.ndarray, preferred: np.ndarray,
                    fallback: bool = True) -> np.ndarray:
    """Per group, the row whose call comes first (span order, then the call's position in its span) among the
    `preferred` rows, else (with `fallback`) among all its rows; -1 for none."""
    order = np.lexsort((row_pos, span_pos))
    out = np.full(g, -1, dtype=np.int64)
    if fallback:
        out[inverse[order][::-1]] = order[::-1]
    chosen = order[preferred[order]]
    out[inverse[chosen][::-1]] = chosen[::-1]
    return out


def _main_reason(parts: Parts, rows: np.ndarray, inverse: np.ndarray, g: int) -> np.ndarray:
    """Per group, the reason code with the most unrated time (as `grouping._main_reason`)."""
    k = len(CODES)
    where = np.full(len(parts.columns["span"]), -1, dtype=np.int64)
    where[rows] = inverse
    mine = where[parts.reasons["row"]] if len(parts.reasons["row"]) else np.zeros(0, dtype=np.int64)
    keep = mine >= 0
    time = np.bincount(mine[keep] * k + parts.reasons["code"][keep].astype(np.int64),
                       weights=parts.reasons["time"][keep], minlength=g * k)
    return unrated_reason(time.reshape(g, k))


__all__ = ["Parts", "span_parts", "joined", "merge", "PART_KEYS", "ROW_KEYS", "merged_segments"]
