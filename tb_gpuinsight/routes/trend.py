"""Route of the Trends view: every run of the logdir in recording order, marked against the runs before it
(`analysis.diff.trend`), from the stored summaries only: each run's digest is built once from its spans' stored
`overview` sections and cached analyses, and kept until one of its spans changes.

    /trend  ?metric=step|kernel|mfu|class:NAME&threshold=PCT
            -> {metric, threshold, rule, order, runs: [{run, steps, step_ms, band_ms, mfu, classes, change,
                why, top, ...}], pending: [runs still being analysed], problems: [one line per failed run]}
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from ..analysis.diff.stats import threshold
from ..analysis.diff.trend import check_metric, digest, recording_order, trend
from ..analysis.overview import build_overview
from ..errors import GpuInsightError
from ..service import ALL_SPANS
from . import params
from .lru import Lru

_DIGESTS = Lru(4096)  # one small digest per run version: hundreds of runs cost little


def routes(plugin) -> Dict[str, Callable]:
    return {"/trend": lambda req: trend_route(plugin, req)}


def trend_route(plugin, request) -> Dict[str, Any]:
    try:
        metric = check_metric(params.text(request, "metric", default="step"))
        pct = threshold(params.text(request, "threshold", default="5"), "threshold")
    except ValueError as exc:
        raise params.BadRequest(str(exc)) from None
    digests, pending, problems = [], [], []
    for run in plugin.service.runs_json()["runs"]:
        if not run["workers"]:
            continue
        worker = run["workers"][0]["worker"]
        if run["status"] == "loading":
            pending.append(run["run"])
            continue
        try:
            digests.append(_digest(plugin.service, run["run"], worker))
        except GpuInsightError as exc:  # a failed run is named, the others still trend
            problems.append(f"{run['run']}: {exc}")
    out = trend(digests, metric, pct) if digests else {"metric": metric, "threshold": pct, "runs": []}
    out.update(order="recording time (earliest span stamp)", pending=pending, problems=problems)
    return out


def _digest(service, run: str, worker: str):
    """The run's digest (its first worker, all ready spans), cached by the spans' summary keys."""
    states = service.ready_states(run, worker, ALL_SPANS)
    key = (run, worker, tuple(s.key for s in states))

    def build():
        parts = [(state.span, section, service.analysis(run, worker, state.span))
                 for state, section in service.sections(run, worker, ALL_SPANS, "overview") if not section.error]
        order = recording_order([s.stamp for s in states], [s.entry.mtime_ns for s in states])
        return digest(run, worker, order, build_overview(parts), service.analysis(run, worker, ALL_SPANS))

    return _DIGESTS.get(key, build)
