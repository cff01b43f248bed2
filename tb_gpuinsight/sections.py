"""Summary sections: what a view needs from a trace beyond the kernel activity table, built once by the analysis
workers and stored in the span's summary, so that no route re-reads a trace.

A view registers a builder in `SECTION_BUILDERS` as "module:function". The function takes a `SectionContext` (the
loaded trace, its unrated efficiency analysis and the span's companion files) and returns a `Section`: JSON-ready
`info` plus numeric numpy `arrays` (no object arrays: summaries are loaded with `allow_pickle=False`).

A builder that raises does not fail the span: its section records the one-line reason in `error` and every other
view of the span still works. The CLI and Python API call `build_section` on a loaded trace to get the same data.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .errors import GpuInsightError

if TYPE_CHECKING:  # pragma: no cover
    from .trace.kineto import KinetoTrace

# name -> "module:function". Adding a view's data to every summary = one line here (and an ENGINE_VERSION bump).
SECTION_BUILDERS: Dict[str, str] = {
    "shape_sources": "tb_gpuinsight.analysis.enrich:shape_sources_section",
    "overview": "tb_gpuinsight.analysis.overview.breakdown:build_section",
    "memory": "tb_gpuinsight.analysis.memory.events:build_section",
    "timeline": "tb_gpuinsight.analysis.timeline.index:build_section",
    "distributed": "tb_gpuinsight.analysis.ranks.report:build_section",
    "critical_path": "tb_gpuinsight.analysis.graph.critical_path.path:build_section",
}


@dataclass
class SectionContext:
    """What a builder may use: the loaded trace, its analysis (before rating) and the span's companion files."""
    trace: "KinetoTrace"
    # The unrated `analysis.kernels.efficiency.Efficiency`: typed loosely so that this registry, which the summary
    # envelope and the views import, never imports the analysis that fills its sections.
    eff: Any
    execution_traces: Sequence[str] = ()
    tensor_traces: Sequence[str] = ()


@dataclass
class Section:
    """One view's stored data. `error` is set (and the rest empty) when its builder failed."""
    name: str
    info: Dict[str, Any] = field(default_factory=dict)
    arrays: Dict[str, np.ndarray] = field(default_factory=dict)
    error: str = ""

    def check(self) -> "Section":
        """Raise `SectionError` when the builder failed, else return self (for views that need the data)."""
        if self.error:
            raise SectionError(f"{self.name}: {self.error}")
        return self


class SectionError(GpuInsightError):
    """A section whose builder failed for this trace (the message is the builder's one-line reason)."""


def builder(name: str) -> Callable[[SectionContext], Section]:
    """The registered builder function of a section."""
    target = SECTION_BUILDERS.get(name)
    if target is None:
        raise KeyError(f"no section named {name!r}")
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


def build_section(name: str, ctx: SectionContext) -> Section:
    """Build one section; a failure becomes a section with `error` set, never an exception."""
    try:
        section = builder(name)(ctx)
        section.name = name
        _check_arrays(section)
    except GpuInsightError as exc:
        return Section(name, error=str(exc)[:300])
    except MemoryError:
        return Section(name, error="out of memory while building this view's data")
    except Exception as exc:  # a bug in one view must not lose the other views of the span
        return Section(name, error=f"internal error: {type(exc).__name__}: {exc}"[:300])
    return section


def build_all(ctx: SectionContext, names: Optional[List[str]] = None) -> Dict[str, Section]:
    """Every registered section (or the named ones) of one trace."""
    return {n: build_section(n, ctx) for n in (names if names is not None else list(SECTION_BUILDERS))}


def _check_arrays(section: Section) -> None:
    for key, arr in section.arrays.items():
        if not isinstance(arr, np.ndarray) or arr.dtype == object:
            raise TypeError(f"section {section.name}: array {key!r} must be a numeric numpy array")
