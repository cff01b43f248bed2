"""Text output shared by the commands: fixed-width tables, CSV on stdout, and the units they print."""
from __future__ import annotations

import csv
import json
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..terminal import raw_output

Column = Tuple[str, str, int]  # (title, row key, width)

# Columns written left-aligned (names and labels); every other column is a number, right-aligned.
_LEFT = ("name", "display_name", "op", "kernel", "bound", "dtype", "status", "class", "kernel_class", "frame",
         "function")


def render_table(rows: List[Dict], columns: Sequence[Column], empty: str = "(none)") -> List[str]:
    """Fixed-width text table; long names are cut in the middle so both ends stay readable (the full value is in
    the JSON / CSV output), numbers and headers never: their column widens to fit. `empty`: the line under the
    header when there is no row ("(no kernels)" for a kernel table)."""
    present = [c for c in columns if any(c[1] in r for r in rows)] or list(columns)
    cells = [[_fmt(key, r.get(key)) for _, key, _ in present] for r in rows]
    widths = [max([width, len(title)] + ([len(row[i]) for row in cells] if key not in _LEFT else []))
              for i, (title, key, width) in enumerate(present)]
    head = "  ".join(_cell(title, width, key) for (title, key, _), width in zip(present, widths))
    out = [head, "-" * len(head)]
    for row in cells:
        out.append("  ".join(_cell(text, width, key) for text, (_, key, _), width in zip(row, present, widths)))
    if not rows:
        out.append(empty)
    return out


def elide(text: str, width: int) -> str:
    """`text` cut to `width` in the middle (`~` marks the cut), so both ends stay readable."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "~" + text[len(text) - (width - 1 - half):]


def _cell(text: str, width: int, key: str) -> str:
    text = elide(text, width)
    return text.ljust(width) if key in _LEFT else text.rjust(width)


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return ("!" if v else "") if key == "over_roof" else ("yes" if v else "")
    if key in ("total_us", "time_us_a", "time_us_b", "delta_us"):
        return f"{v / 1000:,.3f}"
    if key in ("time_share", "pct_peak", "pct_dram", "efficiency", "delta_pct", "pct_peak_a", "pct_peak_b"):
        return f"{100 * v:.1f}"
    if isinstance(v, float) and key.startswith(("count", "launches")):
        return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"  # calls per span: whole unless spans differ
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def print_csv(rows: List[Dict]) -> None:
    """Rows as CSV on stdout, every key of any row in the header (in order of appearance; a row without one has an
    empty cell: some kernel rows carry `fused_from`, others not); nothing for no rows."""
    if not rows:
        return
    with raw_output(sys.stdout):  # CSV keeps the values (control characters included), quoted by its encoder
        writer = csv.DictWriter(sys.stdout, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in rows)


def _csv_cell(value: Any) -> Any:
    """One line per cell: a list or dict (grid, block, shapes), or JSON text as recorded (over several lines in
    CUDA traces), as compact JSON; other text with its line breaks folded into spaces."""
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.dumps(json.loads(value), separators=(",", ":"))
        except ValueError:
            pass
    return " ".join(value.split()) if isinstance(value, str) and "\n" in value else value


def ms(us: float) -> str:
    """Microseconds as milliseconds with their unit."""
    return f"{us / 1000:,.3f} ms"


def signed_ms(us: float) -> str:
    """A change in microseconds as signed milliseconds with their unit."""
    return f"{'+' if us >= 0 else ''}{us / 1000:,.3f} ms"


def pct(v) -> str:
    """A share as a percentage ("unknown" for None)."""
    return "unknown" if v is None else f"{100 * v:.1f}%"


def size(n: int) -> str:
    """A byte count in the largest decimal unit it reaches."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def binary_size(value: Optional[int]) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1."""
    if value is None:
        return "?"
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value:,.0f} B"
