"""What a report reads of one selection (a trace, or one worker's spans of a run): per span its stored `overview`
and `memory` sections and its rated analysis, the same data the plugin keeps in its summaries.

The CLI and the Python API build a `Side` from files (`side_from_path`); the plugin's route builds it from the
service's stored sections (`routes/report.py`). The report is then made from the `Side` alone, so the three agree.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..analysis.kernels.efficiency import Efficiency, combine
from ..analysis.overview import Overview, build_overview
from ..errors import ConfigError
from ..sections import Section, SectionContext, build_section


@dataclass
class SpanPart:
    """One span: its name, stored overview and memory sections, and its rated analysis."""
    name: str
    overview: Section
    memory: Optional[Section]
    eff: Efficiency


@dataclass
class Side:
    """One selection of a report: a label, its worker, its spans and the analysis of all of them combined."""
    label: str
    worker: str
    parts: List[SpanPart]
    eff: Efficiency
    _overview: Optional[Overview] = field(default=None, repr=False)

    @property
    def overview(self) -> Overview:
        """The Overview of the side's spans (built once)."""
        if self._overview is None:
            self._overview = build_overview([(p.name, p.overview, p.eff) for p in self.parts])
        return self._overview


def make_side(label: str, worker: str, parts: List[SpanPart], eff: Optional[Efficiency] = None) -> Side:
    """A side from its spans; `eff` (all spans combined) is computed when not given."""
    if not parts:
        raise ConfigError(f"{label}: no analysed span")
    if eff is None:
        effs = [p.eff for p in parts]
        eff = effs[0] if len(effs) == 1 else combine(effs).rerate(effs[0].dtype)
    return Side(label, worker, parts, eff)


def side_from_path(path: "os.PathLike[str] | str", worker: Optional[str] = None, label: Optional[str] = None,
                   **options: Any) -> Side:
    """A trace file, or one worker's spans of a run directory (default the first worker), read and analysed
    here. Options are those of `tb_gpuinsight.analyze`."""
    from ..pipeline import analyze, worker_traces

    parts = []
    for name, trace in worker_traces(path, worker):
        eff = analyze(trace, **options)
        ctx = SectionContext(trace, eff)
        parts.append(SpanPart(name, build_section("overview", ctx), build_section("memory", ctx), eff))
    return make_side(label or _label(path), worker or _worker_of(path), parts)


def run_workers(path: "os.PathLike[str] | str") -> List[str]:
    """The workers of a run directory (none for a trace file)."""
    from ..logdir import discover

    if not os.path.isdir(path):
        return []
    runs = discover(path)
    return sorted(runs[0].workers) if len(runs) == 1 else []


def _worker_of(path: "os.PathLike[str] | str") -> str:
    """The first worker of a run directory; for a trace file, the worker the plugin would list it under (its name
    without the span stamp and suffix), so a single trace is named as TensorBoard names it."""
    from ..logdir import split_name

    if not os.path.isdir(path):
        return split_name(os.path.basename(os.fspath(path)))[0]
    workers = run_workers(path)
    return workers[0] if workers else ""


def _label(path: "os.PathLike[str] | str") -> str:
    return os.path.basename(os.fspath(path).rstrip("/")) or os.fspath(path)


def memory_summaries(side: Side) -> List[Dict[str, Any]]:
    """Per span with memory events, the Memory view's summary (`analysis.memory.summary`)."""
    from ..analysis.memory.events import MemoryEvents, summary

    out = []
    for part in side.parts:
        if part.memory is None or part.memory.error:
            continue
        out.append({"span": part.name, **summary(MemoryEvents.from_section(part.memory))})
    return out
