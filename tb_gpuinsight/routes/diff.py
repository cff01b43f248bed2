"""Route of the Diff tab: two selections (run / worker / span or "all") compared kernel by kernel or op by op, with
the step-time verdict of the comparison rule (`analysis.diff.stats`) and what accounts for the change, per step.
Everything comes from the spans' stored sections and cached analyses: no trace is read here."""
from __future__ import annotations

from typing import Any, Callable, Dict

from ..analysis.diff.attribution import attribute
from ..analysis.diff.compare import BYS, MATCHES, describe_for_diff, diff, most_comparable
from ..analysis.diff.stats import threshold
from ..analysis.overview import build_overview
from ..analysis.kernels.efficiency import AUTO
from ..errors import GpuInsightError
from ..estimate.devices import DTYPES
from . import params

MAX_LIMIT = 5000
_SORTS = ("impact", "delta_us", "delta_pct", "time_us_a", "time_us_b", "name", "class", "status")


def routes(plugin) -> Dict[str, Callable]:
    return {"/diff": lambda req: diff_route(plugin, req), "/diff/suggest": lambda req: suggest_route(plugin, req)}


def suggest_route(plugin, request) -> Dict[str, Any]:
    """The most comparable B for A = `run`/`worker`/`span` (`analysis.diff.most_comparable`), with why."""
    a = params.selection(request)
    spans = {}
    for run in plugin.service.runs_json()["runs"]:
        for w in run["workers"]:
            spans[(run["run"], w["worker"])] = [s["span"] for s in w["spans"] if s.get("status") == "ready"]
    return most_comparable(a, spans, lambda sel: _describe(plugin, sel))


def _describe(plugin, sel):
    try:
        return describe_for_diff(plugin.service.analysis(*sel))
    except GpuInsightError:  # not ready or failed: not a candidate
        return None


def diff_route(plugin, request) -> Dict[str, Any]:
    """`a_run`, `a_worker`, `a_span` and `b_...` select the sides; `match`, `by`, `dtype`, `filter`, `status`,
    `sort`, `order`, `offset`, `limit` shape the table; `threshold` (%, default 5) is the verdict's. The summary,
    classes, verdict and attribution always cover every row."""
    pct = _threshold(request)
    dtype = params.choice(request, "dtype", (AUTO,) + tuple(DTYPES), AUTO)
    sides = [params.selection(request, prefix) for prefix in ("a_", "b_")]
    overrides = [params.device_name(request, plugin.service.datasheet(), prefix) for prefix in ("a_", "b_")]
    a, b = (plugin.service.analysis(*side, dtype, name) for side, name in zip(sides, overrides))
    match = params.choice(request, "match", MATCHES, "normalized")
    by = params.choice(request, "by", BYS, "kernel")
    names = tuple(_label(side) for side in sides)
    result = diff(a, b, names=names, match=match, by=by)
    rows = _filtered(result.rows, params.text(request, "filter", default=""),
                     params.choice(request, "status", ("", "both", "added", "removed"), ""))
    rows = _sorted(rows, params.choice(request, "sort", _SORTS, "impact"),
                   params.choice(request, "order", ("desc", "asc"), "desc") == "desc")
    offset = params.integer(request, "offset", 0, 0, 10 ** 9)
    limit = params.integer(request, "limit", 200, 1, MAX_LIMIT)
    verdict, steps = _verdict(plugin, sides, pct)
    return {"summary": result.summary, "classes": result.classes, "total": len(rows),
            "rows": rows[offset: offset + limit], "verdict": verdict, "attribution": attribute(result, *steps)}


def _threshold(request) -> float:
    try:
        return threshold(params.text(request, "threshold", default="5"), "threshold")
    except ValueError as exc:
        raise params.BadRequest(str(exc)) from None


def _verdict(plugin, sides, pct: float):
    """The step-time comparison of the two selections (None when a side has no steps) and their step counts."""
    from ..reporting.gate import LABELS, compare

    overviews = []
    for run, worker, span in sides:
        parts = [(state.span, section, plugin.service.analysis(run, worker, state.span))
                 for state, section in plugin.service.sections(run, worker, span, "overview") if not section.error]
        overviews.append(build_overview(parts))
    steps = tuple(len(ov.steps) for ov in overviews)
    change = compare(overviews[0], overviews[1], "step")
    if change is None:
        return None, steps
    return dict(change.comparison.to_dict(pct), label=LABELS["step"], unit="ms"), steps


def _label(side) -> str:
    run, worker, span = side
    return f"{run} / {worker} / {'all spans' if span == params.ALL_SPANS else span}"


def _filtered(rows, text: str, status: str):
    needle = text.lower()
    return [r for r in rows if (not needle or needle in (r["name"] or "").lower()) and
            (not status or r["status"] == status)]


def _sorted(rows, key: str, descending: bool):
    if key == "impact":
        ordered = sorted(rows, key=lambda r: abs(r["delta_us"]))
    else:
        known = [r for r in rows if r.get(key) is not None]
        missing = [r for r in rows if r.get(key) is None]
        ordered = sorted(known, key=lambda r: r[key]) + ([] if descending else missing)
        if descending:
            return ordered[::-1] + missing
    return ordered[::-1] if descending else ordered
