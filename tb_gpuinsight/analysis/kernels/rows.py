"""Grouped efficiency tables as plain rows (dicts of str / float / None) for the CLI, JSON routes and CSV.

Unknown numbers are None, never 0 or NaN, so JSON stays valid and a UI can show "unknown" with its reason.
A row's rates describe the same calls (`efficiency._basis`); `covered_share` is the time share of its calls with
both estimates, `over_roof` says its figures come from calls over the physical roof (`roof_cause` says why),
`reason` is the reason code (`reasons.REASONS`) with most of its time ("" when rated).

Every row that names a kernel also carries `display_name`, `demangled` and `kernel_class` (`names.py`), and its
labels are honest: `bound` compute / memory only where the row's FLOPs and bytes are both known (None otherwise;
collectives keep "communication"), memcpy/memset rows have no dtype, and occupancy is None (not 0) where the trace
recorded none.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from ...trace.table import Table
from .names import name_fields, short_hash

# Output column -> source column in a grouped table; string columns are decoded, NaN becomes None.
ROW_COLUMNS = (
    ("device", "device"), ("kind", "kind"), ("op", "op_name"), ("name", "name"),
    ("count", "count"), ("total_us", "total_us"), ("mean_us", "mean_us"), ("min_us", "min_us"),
    ("max_us", "max_us"), ("time_share", "time_share"), ("flops", "flops"), ("flops_reason", "flops_reason"),
    ("bytes", "bytes"), ("bytes_reason", "bytes_reason"), ("tflops", "tflops"), ("gbps", "gbps"),
    ("dtype", "rate_dtype"),
    ("peak_tflops", "peak_tflops"), ("pct_peak", "pct_peak"), ("pct_dram", "pct_dram"),
    ("intensity", "intensity"), ("bound", "bound"), ("efficiency", "efficiency"), ("occupancy", "occupancy"),
    ("registers", "registers"), ("grid", "grid"), ("block", "block"), ("role", "role"),
    ("covered_share", "covered_share"), ("reason", "reason"), ("over_roof", "over_roof"),
    ("over_roof_share", "over_roof_share"), ("roof_cause", "roof_cause"),
)
SORTABLE = {out for out, _ in ROW_COLUMNS} - {"device", "kind"}


def group_rows(table: Table, index: Optional[Iterable[int]] = None) -> List[Dict[str, Any]]:
    """Rows of a grouped table (all, or those at `index`), JSON-ready."""
    present = [(out, src) for out, src in ROW_COLUMNS if src in table]
    rows = range(len(table)) if index is None else index
    return disambiguate([honest({out: _value(table, src, i) for out, src in present}) for i in rows])


_COPIES = ("memcpy", "memset")


def honest(row: Dict[str, Any]) -> Dict[str, Any]:
    """A row with its kernel name fields added and the labels that its figures do not support cleared."""
    if row.get("name") is not None:
        row.update(name_fields(row["name"], row.get("kind") or "kernel", row.get("op")))
    roofline_bound = row.get("bound") in ("compute", "memory")  # "communication" (a collective) is no roofline claim
    if roofline_bound and (row.get("flops") is None or row.get("bytes") is None) or row.get("bound") == "unknown":
        row["bound"] = None
    if row.get("kind") in _COPIES:
        row["dtype"] = None
    return row


def disambiguate(rows: List[Dict[str, Any]], key: str = "name") -> List[Dict[str, Any]]:
    """Give rows whose different raw names fold to one display name a short stable hash of the raw name (two
    dtype instances of `vectorized_elementwise_kernel<AbsFunctor>` in one table must stay distinguishable)."""
    seen: Dict[str, set] = {}
    for row in rows:
        if row.get("display_name") is not None:
            seen.setdefault(row["display_name"], set()).add(row.get(key))
    for row in rows:
        if len(seen.get(row.get("display_name"), ())) > 1 and row["display_name"] != row.get(key):
            row["display_name"] = f"{row['display_name']} #{short_hash(row[key])}"
    return rows


def _value(table: Table, col: str, i: int) -> Any:
    v = table[col][i]
    cats = table.strings.get(col)
    if cats is not None:
        return cats[v] if v >= 0 else None
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        v = int(v)
        return None if col == "registers" and v < 0 else v
    return v


def sort_order(table: Table, key: str, descending: bool = True) -> np.ndarray:
    """Row order by an output column; unknown values last whichever the direction."""
    src = dict(ROW_COLUMNS).get(key, key)
    values = table[src]
    cats = table.strings.get(src)
    if cats is not None:
        text = np.array([cats[c] if c >= 0 else "" for c in values], dtype=object)
        order = np.argsort(text.astype(str), kind="stable")
        return order[::-1] if descending else order
    values = values.astype(np.float64)
    missing = np.isnan(values) | ((values < 0) if src == "registers" else False)
    keyed = np.where(missing, np.inf, -values if descending else values)
    return np.argsort(keyed, kind="stable")


def name_filter(table: Table, text: str, column: str = "name") -> np.ndarray:
    """Rows whose `column` contains `text`, case-insensitive (all rows for empty text)."""
    if not text or column not in table:
        return np.ones(len(table), dtype=bool)
    needle = text.lower()
    cats = table.strings[column]
    hits = np.fromiter((needle in c.lower() for c in cats), dtype=bool, count=len(cats))
    codes = table[column]
    return (codes >= 0) & hits[np.clip(codes, 0, None)] if len(cats) else np.zeros(len(table), dtype=bool)


__all__ = ["ROW_COLUMNS", "SORTABLE", "group_rows", "honest", "disambiguate", "sort_order", "name_filter"]
