"""Routes of the Overview tab.

    /overview  ?run&worker&span -> {categories, source, missing, headline, spans, steps, recommendations}

Everything comes from the spans' stored `overview` sections and their cached analyses: no trace is read here.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from ..analysis.overview import build_overview
from ..analysis.overview.rank_rules import merged
from ..errors import GpuInsightError
from ..sections import SectionError
from . import params


def routes(plugin) -> Dict[str, Callable]:
    return {"/overview": lambda req: overview(plugin, req)}


def overview(plugin, request) -> Dict[str, Any]:
    run, worker, span = params.selection(request)
    service = plugin.service
    parts = [(state.span, section, service.analysis(run, worker, state.span))
             for state, section in service.sections(run, worker, span, "overview")]
    if parts and all(section.error for _, section, _ in parts):
        raise SectionError(f"overview: {parts[0][1].error}")
    result = build_overview(parts)
    ranks = _ranks(plugin, request, run)
    if ranks is not None:  # a run of several ranks: its straggler and exposed transfers rank with the rest
        result.recommendations = merged(result.recommendations, ranks)
    return result.to_json()


def _ranks(plugin, request, run: str):
    """The Distributed view's report of a run of several workers (None for one worker, or while it cannot be had)."""
    from .ranks import rank_report

    if len(plugin.service.run_json(run)["workers"]) < 2:
        return None
    try:
        return rank_report(plugin, request)[0]
    except GpuInsightError:  # ranks still loading or without distributed data: the per-span rules stand alone
        return None

