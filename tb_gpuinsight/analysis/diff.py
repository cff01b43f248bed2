"""Diff two efficiency analyses kernel by kernel: side by side, aligned by kernel name, with deltas.

Rows are sorted by their impact on total GPU time (|delta of total time|). A kernel on one side only is "added"
(only in B) or "removed" (only in A).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .efficiency import Efficiency, aggregate
from .rows import group_rows

SIDE_COLUMNS = ("count", "total_us", "mean_us", "tflops", "gbps", "pct_peak", "pct_dram", "efficiency")


def diff_rows(a: Efficiency, b: Efficiency, key: Tuple[str, ...] = ("kind", "name")) -> List[Dict[str, Any]]:
    """One row per kernel name present on either side, all devices together."""
    left = _by_key(a, key)
    right = _by_key(b, key)
    rows = []
    for k in list(left) + [k for k in right if k not in left]:
        la, rb = left.get(k), right.get(k)
        row: Dict[str, Any] = dict(zip(key, k))
        row["status"] = "both" if la and rb else ("removed" if la else "added")
        for col in SIDE_COLUMNS:
            row[f"{col}_a"] = la.get(col) if la else None
            row[f"{col}_b"] = rb.get(col) if rb else None
        ta, tb = row["total_us_a"] or 0.0, row["total_us_b"] or 0.0
        row["delta_us"] = tb - ta
        row["delta_pct"] = (tb - ta) / ta if ta > 0 else None
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["delta_us"]))
    return rows


def totals(eff: Efficiency) -> Dict[str, float]:
    """Total kernel and memop time (us) over all devices."""
    return {"kernel_time_us": sum(d.summary.get("kernel_time_us", 0.0) for d in eff.devices.values()),
            "memop_time_us": sum(d.summary.get("memop_time_us", 0.0) for d in eff.devices.values())}


def _by_key(eff: Efficiency, key: Tuple[str, ...]) -> Dict[Tuple, Dict[str, Any]]:
    """Grouped rows over all devices, keyed by `key`."""
    return {tuple(r[k] for k in key): r for r in group_rows(aggregate(eff.activities, key))}


def summarize(rows: List[Dict[str, Any]], names: Optional[Tuple[str, str]] = None) -> Dict[str, Any]:
    """Totals of a diff: time on each side and how many kernels were added or removed."""
    a, b = names or ("A", "B")
    total_a = sum(r["total_us_a"] or 0.0 for r in rows)
    total_b = sum(r["total_us_b"] or 0.0 for r in rows)
    return {"name_a": a, "name_b": b, "total_us_a": total_a, "total_us_b": total_b,
            "delta_us": total_b - total_a,
            "added": sum(r["status"] == "added" for r in rows),
            "removed": sum(r["status"] == "removed" for r in rows)}


__all__ = ["diff_rows", "summarize", "totals", "SIDE_COLUMNS"]
