"""Routes of the Timeline tab: a span's lanes, level-of-detail viewports, a selected range's breakdown, every
occurrence of a name, and one event. All read the span's stored timeline index (never the trace).

The timeline is per span. With "all spans" selected the tab names one span itself (`tspan`), by default the
first analysed one; `/timeline/meta` lists the choices. With the worker "all ranks" (`*`) every route answers for
the run's ranks stacked on one time base (analysis/timeline/stack.py): one span per rank, the Distributed tab's
choice (`cycle`: the n-th span of every worker, -1 the latest).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..analysis.timeline import flows, index as tl
from ..analysis.kernels.names import display_name
from ..analysis.timeline.stack import RankIndex, Stack
from ..service import ALL_WORKERS, NotFound
from . import params
from .ranks import rank_report
from .lru import Lru

MAX_LANES = 512
_STACKS = Lru(8)


def routes(plugin) -> Dict[str, Callable]:
    return {
        "/timeline/meta": lambda req: meta_route(plugin, req),
        "/timeline/view": lambda req: view_route(plugin, req),
        "/timeline/range": lambda req: range_route(plugin, req),
        "/timeline/find": lambda req: find_route(plugin, req),
        "/timeline/event": lambda req: event_route(plugin, req),
    }


def span_index(plugin, request) -> Tuple[str, List[str], tl.TimelineIndex]:
    """(chosen span, the selection's analysed spans, its index). Raises NotFound for an unknown `tspan`."""
    run, worker, span = params.selection(request)
    found = plugin.service.sections(run, worker, span, tl.SECTION)
    names = [state.span for state, _ in found]
    wanted = params.text(request, "tspan", default="")
    pick = next((i for i, n in enumerate(names) if n == wanted), None) if wanted else 0
    if pick is None or not found:
        raise NotFound(f"no analysed span {wanted!r} in this selection")
    return names[pick], names, tl.TimelineIndex.from_section(found[pick][1])


def all_ranks(request) -> bool:
    return params.selection(request)[1] == ALL_WORKERS


def rank_stack(plugin, request) -> Stack:
    """The run's ranks stacked (one span per rank, as the Distributed tab picks them), from their stored indexes."""
    run = params.text(request, "run", required=True)
    ranks = rank_report(plugin, request)[0].ranks
    found = [(r, plugin.service.sections(run, r["worker"], r["span"], tl.SECTION)[0]) for r in ranks]

    def build() -> Stack:
        return Stack([RankIndex(r["rank"], r["worker"], r["span"], tl.TimelineIndex.from_section(section))
                      for r, (_, section) in found])

    return _STACKS.get(tuple(state.key for _, (state, _) in found), build)


def number(request, name: str, default: Optional[float] = None) -> float:
    """A finite float parameter (microseconds from the trace start for times)."""
    value = params.text(request, name, default="" if default is None else repr(default))
    if value == "":
        raise params.BadRequest(f"missing parameter {name!r}")
    try:
        out = float(value)
    except ValueError:
        raise params.BadRequest(f"parameter {name!r} must be a number") from None
    if not math.isfinite(out) or abs(out) > 1e15:
        raise params.BadRequest(f"parameter {name!r} must be a finite number of microseconds")
    return out


def _lanes(request) -> Optional[List[int]]:
    text = params.text(request, "lanes", default="")
    if not text:
        return None
    try:
        ids = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise params.BadRequest("parameter 'lanes' must be comma-separated lane ids") from None
    if len(ids) > MAX_LANES:
        raise params.BadRequest(f"at most {MAX_LANES} lanes per query")
    return ids


def meta_route(plugin, request) -> Dict[str, Any]:
    if all_ranks(request):
        out = {"span": "", "spans": [], **rank_stack(plugin, request).meta()}
    else:
        span, spans, index = span_index(plugin, request)
        out = {"span": span, "spans": spans, **tl.meta(index)}
    out["name_keys"] = [params.name_key(name) for name in out["names"]]  # what Find and the drawers send back
    out["display_names"] = [display_name(name) for name in out["names"]]  # what the boxes are labelled
    return out


def view_route(plugin, request) -> Dict[str, Any]:
    """`t0`, `t1` (us from the trace start), `width` (pixels), optional `lanes`, `depth` (deepest CPU level)."""
    depth = params.integer(request, "depth", tl.MAX_DEPTH, 0, tl.MAX_DEPTH)
    width = params.integer(request, "width", 1000, 1, tl.MAX_WIDTH)
    run = params.text(request, "run", required=True)
    if all_ranks(request):
        stack = rank_stack(plugin, request)
        rated = [_efficiency(plugin, request, run, r.worker, r.span) for r in stack.ranks]
        out = stack.viewport(number(request, "t0"), number(request, "t1"), width, _lanes(request), depth,
                             efficiency=[eff for eff, _ in rated])
        out["span"], out["over_roof_column"] = "", any(over for _, over in rated)
        return out
    span, _, index = span_index(plugin, request)
    efficiency, over = _efficiency(plugin, request, run, params.selection(request)[1], span)
    out = tl.viewport(index, number(request, "t0"), number(request, "t1"), width, _lanes(request), depth,
                      efficiency=efficiency)
    out["span"], out["over_roof_column"] = span, over
    return out


def _efficiency(plugin, request, run: str, worker: str, span: str) -> Tuple[np.ndarray, bool]:
    """Each activity's fraction of its roof (against the picked `device_name`, if any). When the activity table
    flags estimates over the roof, those keep their flag (the tab marks them) and `over_roof_column` says that the
    flag came from the table."""
    device_name = params.device_name(request, plugin.service.datasheet())
    acts = plugin.service.analysis(run, worker, span, device_name=device_name).activities
    eff = acts["efficiency"].astype(np.float64)
    if "over_roof" in acts:
        eff = np.where(acts["over_roof"].astype(bool), np.fmax(eff, 1.0 + 1e-6), eff)  # NaN when left unrated
        return eff, True
    return eff, False


def range_route(plugin, request) -> Dict[str, Any]:
    if all_ranks(request):
        return {"span": "", **rank_stack(plugin, request).breakdown(number(request, "t0"), number(request, "t1"))}
    span, _, index = span_index(plugin, request)
    return {"span": span, **tl.breakdown(index, number(request, "t0"), number(request, "t1"))}


def find_route(plugin, request) -> Dict[str, Any]:
    """Occurrences of one name or of every name matching a query, in time order to step through. Exactly one of:
    `name_key` (a name's key from `/timeline/meta`'s `name_keys` or a kernel row: any name length), `name` (an
    exact name, short) or `q` (any part of the raw, demangled or display name, case-insensitive, or a kernel class:
    "gemm", "attention", "nccl"... finds every kernel of that class, `flows.CLASS_WORDS`). Optional `t0`,
    `t1` keep the occurrences in that range. `names` lists the names found (at most MAX_MATCHES, most time first)
    with their key, display name, count and total time."""
    t0 = number(request, "t0") if request.args.get("t0") else None
    t1 = number(request, "t1") if request.args.get("t1") else None
    if all_ranks(request):
        span, target = "", rank_stack(plugin, request)
        names = target.names
        by_class = [int(m[c]) for r, m in zip(target.ranks, target.name_maps)
                    for c in flows.class_codes(r.index, _query_text(request), tl.CLASSES)] if request.args.get("q") \
            else []
        found = target.find_codes(sorted(set(_find_codes(request, names)) | set(by_class)), t0, t1)
    else:
        span, _, index = span_index(plugin, request)
        names = index.names
        by_class = flows.class_codes(index, _query_text(request), tl.CLASSES) if request.args.get("q") else []
        found = tl.find_codes(index, sorted(set(_find_codes(request, names)) | set(by_class)), t0, t1)
    listed, found["names_total"] = found["names"][:tl.MAX_MATCHES], len(found["names"])
    found["names"] = [{**item, "name": names[item["code"]], "display_name": display_name(names[item["code"]]),
                       "key": params.name_key(names[item["code"]])} for item in listed]
    return {"span": span, "query": _query_text(request), **found}


def _find_codes(request, names: List[str]) -> List[int]:
    key = params.key(request, "name_key")
    if key:
        return [i for i, n in enumerate(names) if params.name_key(n) == key]
    name = params.text(request, "name")
    if name:
        return [i for i, n in enumerate(names) if n == name]
    query = params.text(request, "q")
    if query:
        return tl.search_names(names, query)
    raise params.BadRequest("give one of 'name_key', 'name' or 'q' (a part of the name)")


def _query_text(request) -> str:
    """What was looked for, to echo: the query, the exact name, or the key."""
    return request.args.get("q") or request.args.get("name") or request.args.get("name_key") or ""


def event_route(plugin, request) -> Dict[str, Any]:
    row = params.integer(request, "index", 0, 0, 1 << 40)
    if all_ranks(request):
        out = rank_stack(plugin, request).event(row)
    else:
        span, _, index = span_index(plugin, request)
        out = {"span": span, **tl.event(index, row)}
        if out.get("launched"):  # a CPU op's kernels, each with its % of roof
            eff, _ = _efficiency(plugin, request, params.text(request, "run", required=True),
                                 params.selection(request)[1], span)
            for k in out["launched"]:
                value = float(eff[k["act"]]) if 0 <= k["act"] < len(eff) else float("nan")
                k["efficiency"] = value if math.isfinite(value) else None
    return {**out, "name_key": params.name_key(out["name"])}
