"""What accounts for a change: the kernel classes and the top kernels (or ops) of a diff, as time per step before
and after and their share of the change in GPU time per step.

A diff's times are per span; a side's time per step is its time per span x its spans / its steps (every recorded
step, the first and the hiccups included: kernel time is not split by step here). A share is the row's change /
the change of all GPU time per step (it can exceed 100 % or be negative when other rows moved the other way).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from .compare import DiffResult

TOP = 5


def attribute(result: DiffResult, steps_a: int, steps_b: int, top: int = TOP) -> Dict[str, Any]:
    """The classes (every one that ran) and the `top` rows by size of change, per step (per span when a side has
    no steps), with their share of the total change."""
    s = result.summary
    fa, fb = _factor(s["spans_a"], steps_a), _factor(s["spans_b"], steps_b)
    per = "ms per step" if steps_a and steps_b else "ms per span"
    total = (s["time_us_b"] * fb - s["time_us_a"] * fa) / 1000

    def entry(a_us: Optional[float], b_us: Optional[float]) -> Dict[str, Any]:
        a_ms, b_ms = (a_us or 0.0) * fa / 1000, (b_us or 0.0) * fb / 1000
        return {"a_ms": a_ms, "b_ms": b_ms, "delta_ms": b_ms - a_ms,
                "share_of_change": (b_ms - a_ms) / total if total else None}

    classes = [dict({"class": c["class"]}, **entry(c["time_us_a"], c["time_us_b"])) for c in result.classes]
    classes.sort(key=lambda c: (-abs(c["delta_ms"]), c["class"]))
    rows = [dict({"name": r["name"], "display_name": r["display_name"], "class": r["class"], "status": r["status"]},
                 **entry(r["time_us_a"], r["time_us_b"])) for r in result.rows]
    rows.sort(key=lambda r: (-abs(r["delta_ms"]), r["name"] or ""))
    return {"unit": per, "by": s["by"], "a_ms": s["time_us_a"] * fa / 1000, "b_ms": s["time_us_b"] * fb / 1000,
            "delta_ms": total, "classes": classes, "top": rows[:top],
            "source": "Diff of the two sides' GPU activities; per step = per span x spans / steps (all recorded "
                      "steps); share = the row's change / the change of all GPU time per step"}


def _factor(spans: int, steps: int) -> float:
    return spans / steps if steps else 1.0


def summary_line(att: Dict[str, Any], classes: int = 3, rows: int = 3) -> str:
    """One line: the classes and rows that moved most, "gemm 1.2 -> 3.4 ms (+2.2, 91%)"."""
    if not att["classes"]:
        return "no GPU activity on either side: nothing to attribute the change to at kernel level"
    unit = att["unit"]
    head = f"GPU time {att['a_ms']:,.3f} -> {att['b_ms']:,.3f} {unit} ({att['delta_ms']:+,.3f})"
    moved = [c for c in att["classes"] if c["delta_ms"]][:classes]
    parts = [f"{c['class']} {_move(c)}" for c in moved]
    tops = [f"{_printable(r['display_name'] or r['name'])} {_move(r)}" for r in att["top"][:rows] if r["delta_ms"]]
    what = "ops" if att["by"] == "op" else "kernels"
    return (f"{head}; by class: {', '.join(parts) or 'no change'}"
            + (f"; top {what}: {'; '.join(tops)}" if tops else ""))


def _printable(text: str) -> str:
    """A trace string safe for a terminal line: control characters shown as "?"."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _move(e: Dict[str, Any]) -> str:
    share = "" if e["share_of_change"] is None else f", {100 * e['share_of_change']:.0f}%"
    return f"{e['a_ms']:,.3f} -> {e['b_ms']:,.3f} ({e['delta_ms']:+,.3f}{share})"


__all__ = ["attribute", "summary_line", "TOP"]
