"""Diff two analyses (runs, spans, all spans of a worker, devices) kernel by kernel or op by op.

Rows are matched by normalised kernel name (`kernels.names.normalize`; or the exact name), or, with `by="op"`, by
launching op name and input shapes. Times are per span: a side that aggregates N spans contributes its total / N,
so a 3-span run compares fairly with a 1-span run (and single spans compare their plain totals). Rows are sorted by
their impact on total GPU time (|delta|). With several spans on a side, each row carries the spread of its per-span
time (min / median / max) and a delta smaller than the spread on either side is flagged `within_noise`.
The summary splits GPU time into kernel classes and says how much of the change each class explains, the share
of GPU time matched on both sides (`matched_share`) and, when kernel names barely match, a suggestion to compare by
op (`suggest`). `count` is kernel launches by kernel and op calls by op; `launches` is always kernel launches.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ...trace.table import Interner, Table, unique_rows
from ..kernels.efficiency import Efficiency, aggregate
from ..kernels.names import CLASSES, kernel_class, name_fields, normalize
from ..kernels.rows import disambiguate, group_rows

MATCHES = ("normalized", "exact")
BYS = ("kernel", "op")
_SIDE = ("count", "launches", "time_us", "mean_us", "tflops", "gbps", "pct_peak", "pct_dram", "efficiency", "dtype")
# Below this share of GPU time in rows found on both sides, kernel names "barely match" (another vendor, another
# library version): comparing by op and input shapes is suggested.
NAME_MATCH_SUGGEST_OP = 0.3


@dataclass
class DiffResult:
    """Rows (JSON-ready dicts), the summary and the per-class breakdown of one comparison."""
    rows: List[Dict[str, Any]]
    summary: Dict[str, Any]
    classes: List[Dict[str, Any]] = field(default_factory=list)

    def to_pandas(self):
        """The rows as a pandas DataFrame (spreads flattened into *_min / *_median / *_max columns)."""
        import pandas as pd

        flat = []
        for row in self.rows:
            out = {k: v for k, v in row.items() if not k.startswith("spread_")}
            for side in ("a", "b"):
                spread = row.get(f"spread_{side}") or {}
                for stat in ("min", "median", "max"):
                    out[f"time_{stat}_{side}"] = spread.get(stat)
            flat.append(out)
        return pd.DataFrame(flat)


def diff(a: Efficiency, b: Efficiency, names: Tuple[str, str] = ("A", "B"), match: str = "normalized",
         by: str = "kernel") -> DiffResult:
    """Compare analysis `a` (before) with `b` (after)."""
    if match not in MATCHES or by not in BYS:
        raise ValueError(f"match must be one of {MATCHES} and by one of {BYS}")
    left, right = _side(a, match, by), _side(b, match, by)
    rows = [_row(key, left.rows.get(key), right.rows.get(key), by) for key in _keys(left.rows, right.rows)]
    rows.sort(key=lambda r: (-abs(r["delta_us"]), r["name"] or ""))
    disambiguate(rows)
    matched = _matched_share(rows, left.total + right.total)
    classes = _classes(left, right)
    total_a, total_b = left.total, right.total
    summary = {
        "name_a": names[0], "name_b": names[1], "match": match, "by": by,
        "spans_a": left.spans, "spans_b": right.spans,
        "time_us_a": total_a, "time_us_b": total_b, "delta_us": total_b - total_a,
        "delta_pct": (total_b - total_a) / total_a if total_a > 0 else None,
        "devices_a": _device_names(a), "devices_b": _device_names(b),
        "added": sum(r["status"] == "added" for r in rows), "removed": sum(r["status"] == "removed" for r in rows),
        "within_noise": sum(bool(r["within_noise"]) for r in rows),
        "matched_share": matched, "suggest": _suggestion(by, matched),
    }
    return DiffResult(rows, summary, classes)


@dataclass
class _Side:
    rows: Dict[Tuple[str, ...], Dict[str, Any]]
    spans: int
    total: float
    class_time: Dict[str, float]


def _side(eff: Efficiency, match: str, by: str) -> _Side:
    acts = _keyed(eff.activities, eff, match, by)
    spans = _span_count(acts)
    table = aggregate(acts, ("dkey",))
    classes = _group_classes(acts, table)
    rows = {}
    spread = _spreads(acts, table, spans)
    op_calls = _op_calls(acts, table)
    first_name: Dict[int, int] = {}  # a raw name per key: what its display name is made from
    for code, name in zip(acts["dkey"].tolist(), acts["name"].tolist()):
        first_name.setdefault(code, name)
    for i, r in enumerate(group_rows(table)):
        code = int(table["dkey"][i])
        key = (table.strings["dkey"][code],)
        rows[key] = {
            "raw": acts.strings["name"][first_name[code]],
            "class": classes[i], "launches": r["count"] / spans,
            "count": (op_calls[i] if by == "op" else r["count"]) / spans if key[0] != _NO_OP else None,
            "time_us": r["total_us"] / spans, "mean_us": r["mean_us"], "tflops": r["tflops"], "gbps": r["gbps"],
            "pct_peak": r["pct_peak"], "pct_dram": r["pct_dram"], "efficiency": r["efficiency"],
            "dtype": r["dtype"], "spread": spread[i] if spans > 1 else None,
        }
    return _Side(rows, spans, float(acts["dur"].sum()) / spans, _class_time(acts, spans))


def _class_time(acts: Table, spans: int) -> Dict[str, float]:
    """GPU time per kernel class from each activity's own class, so the split does not depend on the grouping
    (an op row holds kernels of several classes)."""
    time = np.bincount(acts["dclass"], weights=acts["dur"], minlength=len(acts.strings["dclass"]))
    return {name: float(t) / spans for name, t in zip(acts.strings["dclass"], time.tolist()) if t}


def _keyed(acts: Table, eff: Efficiency, match: str, by: str) -> Table:
    """The activities with a diff key column (`dkey`) and a class column (`dclass`)."""
    names, kinds, ops = acts.strings["name"], acts.strings["kind"], acts.strings["op_name"]
    keys, classes = Interner(), Interner()
    label = (lambda n: normalize(n)) if match == "normalized" else (lambda n: n)
    dkey = np.empty(len(acts), dtype=np.int32)
    dclass = np.empty(len(acts), dtype=np.int32)
    for i, (n, k, o, s) in enumerate(zip(acts["name"].tolist(), acts["kind"].tolist(), acts["op_name"].tolist(),
                                         acts["op_shape"].tolist() if "op_shape" in acts else [-1] * len(acts))):
        op = ops[o] if o >= 0 else None
        dclass[i] = classes.code(kernel_class(names[n], kinds[k], op))
        dkey[i] = keys.code(label(names[n]) if by == "kernel" else _op_key(op, eff.shapes.get(s)))
    columns = dict(acts.columns, dkey=dkey, dclass=dclass)
    return Table("activities", columns, dict(acts.strings, dkey=keys.items, dclass=classes.items))


def _op_calls(acts: Table, table: Table) -> np.ndarray:
    """Per group: the distinct launching op calls of its activities (one `aten::mm` call launching two kernels
    is one call), counted over (span, op index); a kernel replayed from a graph capture counts as one call of its
    captured op."""
    group = {code: i for i, code in enumerate(table["dkey"].tolist())}
    rows = np.fromiter((group[c] for c in acts["dkey"].tolist()), dtype=np.int64, count=len(acts))
    span = acts["span"].astype(np.int64) if "span" in acts else np.zeros(len(acts), dtype=np.int64)
    op = acts["op"].astype(np.int64)
    has = op >= 0
    sources = acts.strings.get("source", [])
    replayed = (acts["source"] == sources.index("capture")) if "capture" in sources else np.zeros(len(acts), bool)
    has &= ~replayed  # a replayed kernel's op is the replay's, not the captured op it counts under
    calls = unique_rows(np.stack([rows[has], span[has], op[has]], axis=1))[0] if has.any() else np.zeros((0, 3))
    counted = np.bincount(calls[:, 0].astype(np.int64), minlength=len(table)).astype(float)
    return counted + np.bincount(rows[replayed], minlength=len(table))  # each replayed launch: a captured call


def _matched_share(rows: List[Dict[str, Any]], total: float) -> Optional[float]:
    """Share of both sides' GPU time in rows found on both sides."""
    both = sum((r["time_us_a"] or 0.0) + (r["time_us_b"] or 0.0) for r in rows if r["status"] == "both")
    return both / total if total > 0 else None


def _suggestion(by: str, matched: Optional[float]) -> Optional[Dict[str, str]]:
    if by != "kernel" or matched is None or matched >= NAME_MATCH_SUGGEST_OP:
        return None
    return {"by": "op", "why": f"kernel names barely match: only {matched:.0%} of GPU time is in kernels found on "
                                "both sides (another vendor or library?); compare by op and input shapes"}


def _group_classes(acts: Table, table: Table) -> List[str]:
    """A row's class: the class of most of its time (one kernel name may serve a GEMM op and another op)."""
    group = {code: i for i, code in enumerate(table["dkey"].tolist())}
    rows = np.fromiter((group[c] for c in acts["dkey"].tolist()), dtype=np.int64, count=len(acts))
    n_classes = len(acts.strings["dclass"])
    time = np.bincount(rows * n_classes + acts["dclass"], weights=acts["dur"], minlength=len(table) * n_classes)
    best = time.reshape(len(table), n_classes).argmax(axis=1) if n_classes else np.zeros(len(table), int)
    return [acts.strings["dclass"][c] if n_classes else "other" for c in best.tolist()]


_NO_OP = "(no launching op)"


def _op_key(op: Optional[str], shape: Optional[tuple]) -> str:
    if op is None:
        return _NO_OP
    if not shape:
        return op
    dims, types = shape[0], shape[1]
    return f"{op} {json.dumps(dims, separators=(',', ':'))} {json.dumps(types, separators=(',', ':'))}"


def _span_count(acts: Table) -> int:
    return int(acts["span"].max()) + 1 if "span" in acts and len(acts) else 1


def _spreads(acts: Table, table: Table, spans: int) -> List[Dict[str, float]]:
    """Per group: min / median / max of its time in each span (0 in spans where it did not run)."""
    if spans <= 1:
        return [{}] * len(table)
    group = {code: i for i, code in enumerate(table["dkey"].tolist())}
    rows = np.fromiter((group.get(c, 0) for c in acts["dkey"].tolist()), dtype=np.int64, count=len(acts))
    per_span = np.bincount(rows * spans + acts["span"], weights=acts["dur"], minlength=len(table) * spans)
    matrix = per_span.reshape(len(table), spans)
    return [{"min": float(m.min()), "median": float(np.median(m)), "max": float(m.max())} for m in matrix]


def _keys(left: Dict, right: Dict) -> List:
    return list(left) + [k for k in right if k not in left]


def _row(key: Tuple[str, ...], a: Optional[Dict], b: Optional[Dict], by: str) -> Dict[str, Any]:
    row: Dict[str, Any] = {"name": key[0], "class": (a or b)["class"],
                           "status": "both" if a and b else ("removed" if a else "added")}
    if by == "kernel":  # the key is a (normalised) kernel name: the name columns of one of its raw names
        fields = name_fields((a or b)["raw"])
        row.update(display_name=fields["display_name"], demangled=fields["demangled"])
    else:
        row.update(display_name=key[0], demangled=None)
    row["kernel_class"] = row["class"]
    for col in _SIDE:
        row[f"{col}_a"] = a.get(col) if a else None
        row[f"{col}_b"] = b.get(col) if b else None
    ta, tb = (a or {}).get("time_us", 0.0), (b or {}).get("time_us", 0.0)
    row["delta_us"] = tb - ta
    row["delta_pct"] = (tb - ta) / ta if ta > 0 else None
    row["spread_a"] = (a or {}).get("spread")
    row["spread_b"] = (b or {}).get("spread")
    row["within_noise"] = _within_noise(row)
    return row


def _within_noise(row: Dict[str, Any]) -> Optional[bool]:
    """True when the change is smaller than the span-to-span spread on either side (None: no spread known)."""
    ranges = [s["max"] - s["min"] for s in (row["spread_a"], row["spread_b"]) if s]
    if not ranges or row["status"] != "both":
        return None
    return abs(row["delta_us"]) <= max(ranges)


def _classes(left: _Side, right: _Side) -> List[Dict[str, Any]]:
    change = right.total - left.total
    out = []
    for name in CLASSES:
        ta, tb = left.class_time.get(name, 0.0), right.class_time.get(name, 0.0)
        if ta or tb:
            out.append({"class": name, "time_us_a": ta, "time_us_b": tb, "delta_us": tb - ta,
                        "share_of_change": (tb - ta) / change if change else None})
    return out


Selection = Tuple[str, str, str]  # (run, worker, span)
# What a candidate is compared on: its device names and the set of its launching op names (None: not ready).
Describe = Callable[[Selection], Optional[Tuple[frozenset, frozenset]]]
SAME_OPS = 0.6  # Jaccard overlap of launching op names for "the same model"
MAX_CANDIDATES = 24  # other runs looked at: each costs one summary load


def most_comparable(a: Selection, spans: Dict[Tuple[str, str], List[str]], describe: Describe) -> Dict[str, Any]:
    """The default B side of a diff with A = `a`: the same worker's previous span (its next one for its first
    span); else a run on the same device whose launching ops mostly match (the most similar); else none, with the
    reason. `spans`: every (run, worker) -> its spans in time order."""
    run, worker, span = a
    own = spans.get((run, worker), [])
    if span in own and len(own) > 1:
        i = own.index(span)
        return ({"b": _sel(run, worker, own[i - 1]), "why": "the same worker's previous span"} if i else
                {"b": _sel(run, worker, own[1]), "why": "the same worker's next span (A is its first)"})
    mine = describe(a)
    if mine is None or not mine[0]:
        return {"b": None, "why": "the device of A is not known: pick B"}
    best, best_score = None, 0.0
    for other in _candidates(run, worker, spans):
        theirs = describe(other)
        if theirs is None or theirs[0] != mine[0]:
            continue
        score = _jaccard(mine[1], theirs[1])
        if score >= SAME_OPS and score > best_score:
            best, best_score = other, score
    if best is None:
        return {"b": None, "why": f"no earlier span of this worker and no other run on {', '.join(sorted(mine[0]))} "
                                  "with the same ops: pick B"}
    return {"b": _sel(*best), "why": f"run {best[0]!r} on the same device ({', '.join(sorted(mine[0]))}) with "
                                     f"{best_score:.0%} of the same ops"}


def _candidates(run: str, worker: str, spans: Dict[Tuple[str, str], List[str]]) -> List[Selection]:
    """One selection per other run (its worker of the same name, else its first), that run's latest span."""
    by_run: Dict[str, List[str]] = {}
    for (r, w) in spans:
        if r != run and spans[(r, w)]:
            by_run.setdefault(r, []).append(w)
    out = []
    for r in sorted(by_run)[:MAX_CANDIDATES]:
        w = worker if worker in by_run[r] else sorted(by_run[r])[0]
        out.append((r, w, spans[(r, w)][-1]))
    return out


def _jaccard(x: frozenset, y: frozenset) -> float:
    return len(x & y) / len(x | y) if x or y else 0.0


def _sel(run: str, worker: str, span: str) -> Dict[str, str]:
    return {"run": run, "worker": worker, "span": span}


def describe_for_diff(eff: Efficiency) -> Tuple[frozenset, frozenset]:
    """What `most_comparable` compares: device names and launching op names of an analysis."""
    return frozenset(_device_names(eff)), frozenset(eff.activities.strings["op_name"])


def _device_names(eff: Efficiency) -> List[str]:
    return [d.match.trace_name or (d.match.spec.name if d.match.spec else f"device {d.id}")
            for d in eff.devices.values()]


__all__ = ["diff", "DiffResult", "MATCHES", "BYS", "most_comparable", "describe_for_diff"]
