"""Routes of the Overview tab.

    /overview  ?run&worker&span -> {categories, source, missing, headline, spans, steps, recommendations}

Everything comes from the spans' stored `overview` sections and their cached analyses: no trace is read here.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from ..analysis.overview import build_overview
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
    return build_overview(parts).to_json()

