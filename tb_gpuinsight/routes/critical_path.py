"""Routes of the critical path (Execution graph tab's list, Timeline overlay), from the stored "critical_path"
sections; nothing here reads a trace.

    /critical_path        ?run&worker&span[&step&limit]
                          -> {available, reason, has_et, causes, steps: [...], segments: [...], totals,
                              segment_count, truncated}
    /critical_path/ranks  ?run[&span] -> {ranks: [{worker, rank, wall_us, path_us, steps, causes, top}], longest,
                              why, pending, problems}

`step`: a step label ("ProfilerStep#12"), its number ("12") or position ("#0"); `limit` (default 5000): at most
that many segments, the longest, kept in path order. Times are microseconds from the span's first event (the
Timeline's time base). With span "all" (or the worker "all ranks"), the spans' steps are listed one after the other.
For /critical_path/ranks, `span` "all" (the default) takes every analysed span of each worker.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from ..analysis.graph.critical_path import path as cpath
from ..analysis.graph.critical_path.ranks import compare
from ..service import NotFound, NotReady, SpanFailed
from . import params

DEFAULT_LIMIT = 5000
MAX_LIMIT = 100_000


def routes(plugin) -> Dict[str, Callable]:
    return {"/critical_path": lambda req: path_route(plugin, req),
            "/critical_path/ranks": lambda req: ranks_route(plugin, req)}


def _paths(plugin, run: str, worker: str, span: str) -> List[Tuple[str, cpath.CriticalPath]]:
    found = plugin.service.sections(run, worker, span, cpath.SECTION)
    ok = [(state, section) for state, section in found if not section.error]
    if found and not ok:  # the builder failed on every span: the analysis failed for this view (422)
        raise SpanFailed(f"{found[0][0].span}: critical path: {found[0][1].error}")
    return [(state.span, cpath.CriticalPath.from_section(section)) for state, section in ok]


def path_route(plugin, request) -> Dict[str, Any]:
    run, worker, span = params.selection(request)
    step = params.text(request, "step", default="") or None
    limit = params.integer(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    parts = _paths(plugin, run, worker, span)
    out = cpath.to_json(parts, step, limit)
    if step is not None and not out["available"] and parts:
        raise NotFound(f"no step {step!r} in this selection")
    return out


def ranks_route(plugin, request) -> Dict[str, Any]:
    run = params.text(request, "run", required=True)
    span = params.text(request, "span", default=params.ALL_SPANS)
    info = plugin.service.run_json(run)
    items, pending, problems = [], 0, []
    for w in info["workers"]:
        worker = w["worker"]
        if span != params.ALL_SPANS and span not in {s["span"] for s in w["spans"]}:
            continue
        try:
            items.append((worker, [cp for _, cp in _paths(plugin, run, worker, span)]))
        except NotReady:
            pending += 1
        except SpanFailed as exc:
            problems.append(f"{worker}: {exc}")
    if not items and pending:
        raise NotReady(f"run {run!r}: {pending} rank trace(s) still being analysed")
    out = compare(items)
    out["pending"] = pending
    out["problems"] = problems
    return out
