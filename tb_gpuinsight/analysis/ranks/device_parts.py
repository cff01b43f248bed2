"""The All-ranks device cards and roofline from per-span kernel rows (`kernel_parts.py`) instead of every span's
activities.

What `efficiency.combine` gives a selection of several spans: devices are the GPU ids any span ran something on,
matched to the datasheet with the device properties of the first span that ran on it (each call rated against its
own span's devices), and each one's card (`grouping.device_summary`)
sums the calls of every span on that id. The rows hold, per (span, GPU, op, kind, kernel name), the sums a card
adds up (`kernel_parts.card_sums`); the GPU busy time is the union of the spans' busy segments (exactly the union
of their calls). Sums are added per row rather than per call, so a float may differ in its last bits.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ...estimate.devices import DeviceSpec
from ...trace.table import Interner, Table, unique_rows
from ..kernels.grouping import merged_segments
from ..kernels.coverage import is_compute_class, share as coverage_share
from ..kernels.names import kernel_class
from ..kernels.reasons import CODES, REASONS, reason_rows
from ..kernels.roles import COPIES
from .kernel_parts import Parts, combined_codes
from .span_devices import props_by_device

TOP_FAMILIES = 5  # as `grouping._compute_coverage`


def device_ranks(device: np.ndarray, span: np.ndarray, span_rank: Optional[Sequence[int]]) -> Dict[str, List[int]]:
    """Per GPU id (as text), the ranks whose spans ran something on it, given each row's GPU and span position
    and the rank of each span position: what a card's figures add up in an All-ranks selection."""
    if span_rank is None or not len(device):
        return {}
    rank = np.asarray(span_rank, dtype=np.int64)[span]
    pairs = np.unique(np.stack([device.astype(np.int64), rank], 1), axis=0)
    out: Dict[str, List[int]] = {}
    for dev, r in pairs.tolist():
        out.setdefault(str(dev), []).append(int(r))
    return out


def cards(parts: Parts, spans: Sequence[int], span_rank: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """What the device cards of `spans` (positions in `parts`, in the order they combine) are made of, JSON-ready:
    `props` (per GPU, the device properties of the first span that ran on it, `span_devices.props_by_device`), `ids`
    (the GPUs that ran something), `summaries` (per GPU, as `grouping.device_summary`, and "all": every GPU of every
    span together, busy time summed over the GPUs, what the All-ranks table adds up) and `kernels` (kernel names,
    in the combined label order: the device hint) and, given `span_rank` (the rank of each of `spans`), `ranks`:
    per GPU, the ranks its card adds up."""
    spans = list(spans)
    order_of = np.full(parts.spans, -1, dtype=np.int64)
    order_of[np.asarray(spans, dtype=np.int64)] = np.arange(len(spans))
    rows = np.flatnonzero(order_of[parts.columns["span"]] >= 0)
    labels = {c: combined_codes(parts, c, spans) for c in ("name", "kind", "op_name")}
    col = {c: parts.columns[c][rows] for c in parts.columns}
    props = _props(parts, spans, col)
    code = {c: np.where(col[c] >= 0, labels[c][0][np.clip(col[c], 0, None)], -1) if len(labels[c][0]) else col[c]
            for c in labels}
    kinds = labels["kind"][1]
    copy = np.array([k in COPIES for k in kinds] + [False], dtype=bool)[code["kind"]]
    ids = sorted(set(col["device"].tolist()))
    # as `rating._device_reports`: the listed devices when no GPU ran anything (their cards then say so)
    shown = [d for d in ids if d >= 0] if ids else sorted({int(d.get("id", i)) for i, d in enumerate(props)})
    busy = {c: np.concatenate([parts.per_span[c][s] for s in spans]) if spans else np.zeros(0)
            for c in ("busy_device", "busy_start", "busy_end")}
    summaries = {}
    for dev in shown:
        mine = col["device"] == dev
        summaries[str(dev)] = _summary(parts, rows[mine], {c: v[mine] for c, v in col.items()},
                                       {c: v[mine] for c, v in code.items()}, labels, copy[mine],
                                       _busy(busy, dev))
    if len(ids) > 1 or len(np.unique(col["span"])) > 1:  # what the All-ranks table sums: every rank's GPU together
        summaries["all"] = _summary(parts, rows, col, code, labels, copy, sum(_busy(busy, d) for d in shown))
    names = labels["name"][1]
    ran = np.zeros(len(names) + 1, dtype=bool)
    ran[code["name"][np.array([k == "kernel" for k in kinds] + [False])[code["kind"]]]] = True
    return {"props": props, "ids": ids, "summaries": summaries,
            "kernels": [n for n, k in zip(names, ran[:-1].tolist()) if k],
            "ranks": device_ranks(col["device"], order_of[col["span"]], span_rank)}


def _props(parts: Parts, spans: Sequence[int], col: Dict[str, np.ndarray]) -> List[Dict[str, Any]]:
    """The selection's device properties as `efficiency.combine` makes them: per GPU id, the first span's (in
    `spans` order) that ran on it (`col`: the selection's rows)."""
    decoded: Dict[int, Any] = {}
    span_props = []
    for s in spans:
        code = int(parts.per_span["props"][s][0])
        if code not in decoded:
            decoded[code] = json.loads(parts.strings["props"][code])
        span_props.append(decoded[code])
    ran: Dict[int, List[int]] = {}
    if len(col["span"]):
        for s, dev in unique_rows(np.stack([col["span"], col["device"]], axis=1))[0].tolist():
            ran.setdefault(s, []).append(dev)
    return props_by_device(span_props, [ran.get(int(s), []) for s in spans])


def device_reports(card: Dict[str, Any], datasheet: Optional[Sequence[DeviceSpec]]):
    """The combined analysis's device reports ({id: DeviceReport}, with their summaries) from `cards`."""
    from ..kernels.rating import _device_reports

    ids = np.asarray(card["ids"], dtype=np.int32)
    reports = _device_reports(card["props"], Table("activities", {"device": ids}, {}), list(datasheet or ()), None)
    for dev, report in reports.items():
        report.summary = card["summaries"].get(str(dev), report.summary)
    return reports


def _busy(busy: Dict[str, np.ndarray], dev: int) -> float:
    """GPU `dev`'s busy time: the union of the spans' busy segments (`grouping.busy_time`)."""
    mine = busy["busy_device"] == dev
    start, end = merged_segments(busy["busy_start"][mine], busy["busy_end"][mine])
    return float((end - start).sum()) if len(start) else 0.0


def _summary(parts: Parts, rows: np.ndarray, col: Dict[str, np.ndarray], code: Dict[str, np.ndarray],
             labels: Dict[str, Any], copy: np.ndarray, busy: float) -> Dict[str, Any]:
    """One GPU's card from its rows (`rows` their positions in `parts`), as `grouping.device_summary`."""
    kernel = ~copy

    def total(name: str, mask: np.ndarray = kernel) -> float:
        return float(col[name][mask].sum())

    kernel_time, rated_time = total("total"), total("rated_time")
    reasons = _code_time(parts.reasons, rows, kernel)
    return {
        "gpu_busy_us": busy,
        "kernel_time_us": kernel_time,
        "memop_time_us": total("total", copy),
        "kernel_count": int(col["count"][kernel].sum()),
        "byte_time_share": _ratio(total("byte_time"), kernel_time),
        "covered_time_share": _ratio(total("both_time"), kernel_time),
        "rated_time_share": _ratio(rated_time, kernel_time),
        "over_roof_time_share": _ratio(total("over_time"), kernel_time),
        "over_roof_count": int(col["over_count"][kernel].sum()),
        "efficiency": _ratio(total("rated_sum"), rated_time),
        "flops": total("kept_flops"),
        "bytes": total("kept_bytes"),
        "reasons": reason_rows({CODES[i]: float(t) / kernel_time for i, t in enumerate(reasons.sum(axis=0))
                                if i and t > 0} if kernel_time > 0 else {}),
        **_coverage(parts, rows, col, code, labels, kernel),
    }


def _coverage(parts: Parts, rows: np.ndarray, col: Dict[str, np.ndarray], code: Dict[str, np.ndarray],
              labels: Dict[str, Any], kernel: np.ndarray) -> Dict[str, Any]:
    """As `grouping._compute_coverage`: kernel families are numbered in the order of the sorted (name, kind, op)
    codes, so families that tie keep the combined analysis's order."""
    names, kinds, ops = (labels[c][1] for c in ("name", "kind", "op_name"))
    triples = np.stack([code["name"], code["kind"], code["op_name"]], axis=1)
    uniq, inverse = unique_rows(triples) if len(rows) else (np.zeros((0, 3)), rows)
    classes = Interner()
    distinct = np.array([classes.code(kernel_class(names[n], kinds[k], ops[o] if o >= 0 else None))
                         for n, k, o in uniq.tolist()], dtype=np.int32)
    cls = distinct[inverse.reshape(-1)] if len(rows) else np.zeros(0, dtype=np.int32)
    flags = [is_compute_class(kinds[k], classes.items[c]) for (_, k, _), c in zip(uniq.tolist(), distinct.tolist())]
    compute = kernel & (np.array(flags, dtype=bool)[inverse.reshape(-1)] if len(rows) else np.zeros(0, dtype=bool))
    compute_time = float(col["total"][compute].sum())
    unknown = compute & (col["unknown_count"] > 0)
    known_time = float(col["flop_time"][compute].sum())
    by_reason = _code_time(parts.unknown, rows, unknown)
    found = []
    for c in np.unique(cls[unknown]).tolist():
        mine = unknown & (cls == c)
        time = by_reason[mine].sum(axis=0)
        reason = CODES[int(np.argmax(time))] if time.any() else ""
        found.append({"family": classes.items[c], "time_share": _ratio(float(col["unknown_time"][mine].sum()),
                                                                       compute_time),
                      "reason": REASONS[reason][0] if reason in REASONS else "", "code": reason})
    found.sort(key=lambda r: -(r["time_share"] or 0))
    return {"compute_time_us": compute_time, "compute_flop_share": coverage_share(known_time, compute_time),
            "unrated_families": found[:TOP_FAMILIES]}


def _code_time(sparse: Dict[str, np.ndarray], rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Rows x reason codes: the time of `sparse` (row, code, time cells) on `rows` where `keep`."""
    where = np.full(int(rows.max()) + 1 if len(rows) else 0, -1, dtype=np.int64)
    where[rows[keep]] = np.flatnonzero(keep)
    out = np.zeros((len(rows), len(CODES)))
    if len(sparse["row"]) and len(where):
        inside = sparse["row"] < len(where)
        at = np.where(inside, where[np.clip(sparse["row"], 0, len(where) - 1)], -1)
        hit = at >= 0
        np.add.at(out, (at[hit], sparse["code"][hit].astype(np.int64)), sparse["time"][hit])
    return out


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b > 0 else None


__all__ = ["cards", "device_reports"]
