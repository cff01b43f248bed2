"""Routes of the Distributed tab: a run's ranks, steps, collectives and straggler, from the stored sections.

    /ranks          ?run[&cycle&instance_limit]
                    -> {world_size, rank_count, source, ranks: [...], collectives: [...], stragglers: [...],
                        problems: [...], interconnect, step_numbers, instances: [...], instance_count, pending,
                        heatmap: (first page of /ranks_heatmap)}
    /ranks_heatmap  ?run&metric[&cycle&page&size&order&q] -> {metric, steps, ranks, values, offset, limit, page,
                        size, total_ranks, matches, order, query, median_per_step, max}: one page of ranks (`size`
                        1..1024, or the older `offset&limit`) in rank order or `order=straggler` (the ranks others
                        waited for first), kept to those matching `q` (a rank number or part of a worker name)
    /ranks_compare  ?run&rank[&cycle&limit] -> {rank, median_rank, summary, classes, rows}: the rank's kernels
                        against the median rank's (the Diff of the two spans), biggest changes first

`cycle` picks the n-th span (profiling cycle) of every worker, -1 = the latest. The answers come from the run's rank
index (store/rank_index.py: one read, no per-rank summary unless a rank changed); ranks whose span is still being
analysed are counted in `pending` and left out until ready; nothing here reads a trace. The Kernel tab's All-ranks
table (`/kernels?worker=*`, routes/kernels.py), its device cards (`/devices`) and roofline (`/roofline`) come from
the same index through `all_ranks_table`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..analysis.diff.compare import diff
from ..analysis.ranks import report as rk
from ..service import ALL_SPANS, ALL_WORKERS, NotFound, NotReady, SpanFailed
from ..store import rank_kernels, rank_table
from . import params
from .lru import Lru

MAX_RANKS_PAGE = 1024
_REPORTS = Lru(16)


def routes(plugin) -> Dict[str, Callable]:
    return {"/ranks": lambda req: ranks_route(plugin, req),
            "/ranks_heatmap": lambda req: heatmap_route(plugin, req),
            "/ranks_compare": lambda req: compare_route(plugin, req)}


def ranks_route(plugin, request) -> Dict[str, Any]:
    report, pending, failed = rank_report(plugin, request)
    out = report.to_dict(params.integer(request, "instance_limit", 500, 0, 100_000))
    out["pending"] = pending
    out["problems"] = failed + report.problems + (
        [f"{pending} rank trace(s) still being analysed: not shown yet"] if pending else [])
    out["heatmap"] = rank_table.heatmap_page(report, "dur", 0, 64)
    return out


def heatmap_route(plugin, request) -> Dict[str, Any]:
    report = rank_report(plugin, request)[0]
    metric = params.choice(request, "metric", rk.STEP_METRICS, "dur")
    order = params.choice(request, "order", rank_table.HEATMAP_ORDERS, "rank")
    query = params.text(request, "q", default="")
    if request.args.get("page") is not None or request.args.get("size") is not None:
        limit = params.integer(request, "size", 64, 1, MAX_RANKS_PAGE)
        offset = params.integer(request, "page", 0, 0, 10 ** 7 // limit) * limit
    else:
        offset = params.integer(request, "offset", 0, 0, 10 ** 7)
        limit = params.integer(request, "limit", 64, 1, MAX_RANKS_PAGE)
    out = rank_table.heatmap_page(report, metric, offset, limit, order, query)
    return {**out, "page": offset // limit, "size": limit}


def compare_route(plugin, request) -> Dict[str, Any]:
    """One rank's kernels against the median rank's, with the Diff tab's arithmetic."""
    report = rank_report(plugin, request)[0]
    rank = params.integer(request, "rank", 0, 0, 10 ** 7)
    limit = params.integer(request, "limit", 20, 1, 500)
    rows = {r["rank"]: r for r in report.ranks}
    if rank not in rows:
        raise NotFound(f"run {params.text(request, 'run')!r} has no rank {rank} here")
    median = rk.median_rank(report)
    run = params.text(request, "run", required=True)
    if median is None:  # no rank has a step time (no step markers, or durations dropped as insane)
        raise NotFound(f"run {run!r} has no rank with a step time: no median rank to compare with")
    mine, theirs = rows[rank], median
    result = diff(plugin.service.analysis(run, theirs["worker"], theirs["span"]),
                  plugin.service.analysis(run, mine["worker"], mine["span"]),
                  names=(f"median rank {theirs['rank']}", f"rank {rank}"))
    ordered = sorted(result.rows, key=lambda r: -abs(r["delta_us"] or 0.0))
    return {"rank": rank, "median_rank": theirs["rank"], "summary": result.summary, "classes": result.classes,
            "rows": ordered[:limit]}


def span_ranks(plugin, request) -> Optional[np.ndarray]:
    """For an "All ranks" selection, the rank (0..n-1, by worker) of each span of its combined analysis, in the
    order `service.analysis` combines them; None for a selection of one worker."""
    run, worker, span = params.selection(request)
    if worker != ALL_WORKERS:
        return None
    states = plugin.service.ready_states(run, worker, span)
    workers = {w: i for i, w in enumerate(sorted({s.worker for s in states}))}
    return np.array([workers[s.worker] for s in states], dtype=np.int64)


def all_ranks_table(plugin, request, group: str) -> Tuple[Any, int]:
    """The All-ranks kernel table (`group` "name" or "op"; "device": by GPU and name, the roofline's; "cards": the
    device cards, `device_parts.cards`) of an "All ranks" selection and its rank count, from the run's rank index
    (store/rank_kernels.py): one small read when the ranks' summaries are those it was made for, else merged from
    the index's per-span rows, reading only the summaries of spans it does not hold yet."""
    run, worker, span = params.selection(request)
    service = plugin.service
    states = service.ready_states(run, worker, span)  # in the order `service.analysis` combines them
    workers = {w: i for i, w in enumerate(sorted({s.worker for s in states}))}
    ranks = [workers[s.worker] for s in states]
    chosen = [(s.key, s.worker, s.span, s.identity) for s in states]

    def build() -> Dict[str, Any]:
        def fallback(key: str, worker: str, name: str):
            return service.analysis(run, worker, name)

        present = [s.key for s in service.span_states(run, ALL_WORKERS, ALL_SPANS)]
        return rank_kernels.tables_for(service.store, run, chosen, ranks, present, service.datasheet(), fallback,
                                       write=False)[0]

    key = ("kernels", run, tuple(c[0] for c in chosen), tuple(ranks))
    return _REPORTS.get(key, build)[group], len(workers)


def rank_report(plugin, request) -> Tuple[rk.Report, int, List[str]]:
    run = params.text(request, "run", required=True)
    cycle = params.integer(request, "cycle", -1, -1, 10 ** 6)
    chosen, pending, failed = _chosen_spans(plugin, run, cycle)
    if not chosen and pending:
        raise NotReady(f"run {run!r}: {pending} rank trace(s) still being analysed")
    if failed and not chosen:  # failed for good: asking again will not help
        raise SpanFailed(f"run {run!r}: no rank trace of cycle {cycle} could be analysed ({failed[0]})")
    if not chosen:
        raise NotFound(f"run {run!r} has no trace for cycle {cycle}")
    key = (run, cycle, tuple(state.key for _, state in chosen))

    def build() -> rk.Report:
        return index_report(plugin, run, chosen)

    return _REPORTS.get(key, build), pending, failed


def index_report(plugin, run: str, chosen: List[Tuple[str, Any]]) -> rk.Report:
    """The report through the run's rank index: one read of the index, no summary read unless a rank changed."""
    service = plugin.service

    def fallback(key: str, worker: str, span: str):
        return {name: service.sections(run, worker, span, name)[0][1] for name in (rk.SECTION, "overview")}

    spans = [(state.key, worker, state.span, state.identity) for worker, state in chosen]
    present = [state.key for state in service.span_states(run, ALL_WORKERS, ALL_SPANS)]
    return rank_table.report_for(service.store, run, spans, present, service.datasheet(), fallback, write=False)[0]


def per_rank_report(plugin, run: str, chosen: List[Tuple[str, Any]]) -> rk.Report:
    """The report from every rank's own summary (what `index_report` must equal; the benchmarks' old path)."""
    traces = []
    for worker, state in chosen:
        (_, section), = plugin.service.sections(run, worker, state.span, rk.SECTION)
        (_, overview), = plugin.service.sections(run, worker, state.span, "overview")
        traces.append(rk.RankTrace(worker, state.span, section, overview))
    return rk.analyze(traces, plugin.service.datasheet())


def _chosen_spans(plugin, run: str, cycle: int) -> Tuple[List[Tuple[str, Any]], int, List[str]]:
    """(worker, span state) of every worker's cycle-th span that is analysed, how many are not yet, and the
    reasons of those that failed."""
    by_worker: Dict[str, List[Any]] = {}
    for state in plugin.service.span_states(run, ALL_WORKERS, ALL_SPANS):  # one pass, in the service's order
        by_worker.setdefault(state.worker, []).append(state)
    chosen, pending, failed = [], 0, []
    for worker, spans in sorted(by_worker.items()):
        if cycle >= len(spans):
            continue
        state = spans[cycle]
        if state.status == "ready":
            chosen.append((worker, state))
        elif state.status == "error":
            failed.append(f"{worker}: {state.reason}")
        else:
            pending += 1
    return chosen, pending, failed
