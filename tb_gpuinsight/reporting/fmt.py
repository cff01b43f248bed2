"""Number formatting shared by the Markdown and HTML renderings of a report: a value with its unit, as text."""
from __future__ import annotations

from typing import Any, Dict, Optional


def value(v: Any, unit: str = "") -> str:
    """`v` in `unit` as short text ("-" when unknown)."""
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if unit == "bytes":
        return size(v)
    if unit.startswith("%"):
        return percent(v) + "%" + unit[1:]
    text = f"{v:,.3f}" if unit.startswith("ms") and abs(v) < 1e5 else number(v)
    return f"{text} {unit}" if unit else text


def percent(v: float) -> str:
    """One decimal, or two significant digits for a small non-zero share (0.029, not 0.0)."""
    return f"{v:.2g}" if 0 < abs(v) < 0.1 else f"{v:.1f}"


def number(v: float) -> str:
    """Whole numbers as such; three significant digits below 100, one decimal below 1000, separators above."""
    if v == int(v):
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"
    return f"{v:.3g}"


def size(n: float) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def figure(f: Optional[Dict[str, Any]]) -> str:
    """A report figure (`{"value", "unit", "source"}`) as text, for a sentence ("unknown" when it is)."""
    return "unknown" if not f or f["value"] is None else value(f["value"], f["unit"])


def cell(row: Dict[str, Any], column: Dict[str, str]) -> str:
    """A table cell as text: units in the column header, so numbers without their unit here (bytes excepted)."""
    v = row.get(column["key"])
    unit = column["unit"]
    if unit == "bytes":
        return value(v, "bytes")
    if isinstance(v, float) and unit.startswith("%"):
        return ("+" if v > 0 else "") + percent(v) if column["key"].startswith("delta") else percent(v)
    if isinstance(v, float):
        return f"{v:+,.3f}" if column["key"].startswith("delta") else (f"{v:,.3f}" if abs(v) < 1e4 else f"{v:,.0f}")
    return value(v)


def numeric(column: Dict[str, str]) -> bool:
    """A column of numbers (right-aligned)."""
    return bool(column["unit"]) or column["key"] in ("rank", "count")


def header(column: Dict[str, str]) -> str:
    unit = column["unit"]
    return f"{column['label']} ({unit})" if unit and unit != "bytes" else column["label"]


def evidence(items) -> str:
    """A rule's evidence as "name value unit, ..."."""
    return ", ".join(f"{e['name'].replace('_', ' ')} {value(e['value'], e['unit'] if e['unit'] != 'count' else '')}"
                     for e in items)


def change(m: Dict[str, Any]) -> str:
    """A headline metric against the baseline: "median step time: 4.4 ms → 7.9 ms (slower by 3.5 ms, 78.4%; noise
    band 0.1 ms; 7 and 6 steps kept)"."""
    unit = m["unit"]
    pct = "" if m["slower_pct"] is None else f", {abs(m['slower_pct']):.1f}%"
    band = "noise unknown" if m["noise"] is None else f"noise band {value(m['noise'], unit)}"
    way = "slower" if m["slower"] > 0 else "faster"
    kept = f"; {m['kept_a']} and {m['kept_b']} steps kept" if "kept_a" in m else ""
    return (f"median {m['label']}: {value(m['a'], unit)} \u2192 {value(m['b'], unit)} ({way} by "
            f"{value(abs(m['slower']), unit)}{pct}; {band}{kept})")


def verdict(m: Dict[str, Any]) -> str:
    """Whether a change is outside the noise band: "outside", "within" or "unknown" (too few steps to judge)."""
    if m.get("judgeable") is False:
        return "unknown"
    return {True: "outside", False: "within"}.get(m["outside_noise"], "unknown")


VERDICTS = {"outside": "outside the noise band", "within": "within the noise band",
            "unknown": "too few steps per side: the noise is unknown"}


def subject(r: Dict[str, Any]) -> str:
    """The line under the title: "Worker W, 2 spans, 12 step(s) (ProfilerStep); tb-gpuinsight 0.1.0, report schema
    1." (plain text: each rendering escapes it). A part the report does not know is left out, not shown as "-"."""
    s = r["subject"]
    spans = len(s["spans"])
    parts = [f"Worker {s['worker']}"] if s["worker"] else []
    parts += [f"{spans} span{'s' if spans != 1 else ''}",
              f"{s['steps']} step(s)" + (f" ({s['step_source']})" if s["step_source"] else "")]
    return f"{', '.join(parts)}; {r['generator']}, report schema {r['schema_version']}."


def step_source(r: Dict[str, Any]) -> str:
    """Where a report's step figures come from (and MFU's, when there is a GPU)."""
    source = r["step"]["time"]["mean"]["source"]
    return f"{source}; MFU: {r['utilization']['mfu']['source']}" if r["devices"] else source
