"""Overview: where each step's time goes, headline figures and ranked recommendations.

Parts: `steps` (step windows), `host` (host intervals), `breakdown` (the time split and the stored section),
`figures` (per-step rows, headline figures), `rules` (recommendations). `build_overview` puts one selection's spans
together for the route, the CLI and the Python API.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

from ...jsonutil import finite
from ...sections import Section
from ..kernels.efficiency import Efficiency
from .breakdown import BUSY, CATEGORIES, IDLE, KINDS, LABELS, LAUNCH_GAP_US
from .figures import headline, section_categories, step_rows
from .rules import RULES, SpanData, recommend


@dataclass
class Overview:
    """One selection's overview. `steps`: one row per step (every span); `spans`: headline figures per span;
    `headline`: across the spans; `recommendations`: sorted by recoverable time per step."""
    steps: List[Dict[str, Any]]
    spans: List[Dict[str, Any]]
    headline: Dict[str, Any]
    recommendations: List[Dict[str, Any]]
    missing: List[str] = field(default_factory=list)
    source: str = ""
    categories: List[str] = field(default_factory=lambda: list(CATEGORIES))  # a CPU-only span's are its own

    def to_json(self) -> Dict[str, Any]:
        """Everything as JSON-ready data (NaN and infinities as None), as the /overview route answers."""
        return finite({"categories": [{"key": k, "label": LABELS[k], "kind": KINDS[k]} for k in self.categories],
                "source": self.source, "missing": self.missing, "launch_gap_us": LAUNCH_GAP_US,
                "headline": self.headline, "spans": self.spans, "steps": self.steps,
                "recommendations": self.recommendations})

    def steps_frame(self):
        """Per-step rows as a pandas DataFrame (times in microseconds)."""
        import pandas as pd

        return pd.DataFrame(self.steps)

    def breakdown_frame(self):
        """Steps x categories (microseconds), the columns summing to `wall_us`, labelled as in the UI."""
        import pandas as pd

        frame = pd.DataFrame([{"span": r["span"], "step": r["step"], "wall_us": r["wall_us"],
                               **{LABELS[k]: r.get(f"{k}_us", 0.0) for k in self.categories}} for r in self.steps])
        return frame

    def spans_frame(self):
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in s.items() if not isinstance(v, dict)} for s in self.spans])


def build_overview(parts: Sequence[Tuple[str, Section, Efficiency]]) -> Overview:
    """The overview of (span name, overview section, rated analysis) triples (one worker's spans, in order).
    Spans whose section failed are left out and named in `missing`."""
    data: List[SpanData] = []
    missing: List[str] = []
    spans = []
    for name, section, eff in parts:
        if section.error:
            missing.append(f"{name}: {section.error}")
            continue
        d = SpanData(name, section, eff, step_rows(section, name))
        data.append(d)
        spans.append({"span": name, **headline(d.rows, [d.view])})
        missing.extend(m for m in section.info.get("missing", []) if m not in missing)
    steps = [r for d in data for r in d.rows]
    head = headline(steps, [d.view for d in data]) if data else {}
    for r in steps:  # each step's MFU against the selection's peak (a serving step's phase has its own load)
        r["mfu"] = (r["flops"] / (r["wall_us"] * 1e-6) / 1e12 / head["peak_tflops"]
                    if head.get("peak_tflops") and r["wall_us"] > 0 and r["flops"] > 0 else None)
    sources = {d.section.info.get("source") for d in data}
    categories = [k for k in LABELS if any(k in section_categories(d.section) for d in data)] or list(CATEGORIES)
    return Overview(steps, spans, head, recommend(data) if data else [], missing,
                    sources.pop() if len(sources) == 1 else "mixed", categories)


__all__ = ["Overview", "build_overview", "step_rows", "headline", "RULES", "CATEGORIES", "LABELS", "KINDS", "BUSY",
           "IDLE"]
