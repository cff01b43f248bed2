"""Routes of the Memory tab, served from the span's stored "memory" section (never from the trace).

    /memory              ?run&worker&span -> {span, spans, has_memory, message, start_us, end_us, steps,
                         devices: [{device, events, allocations, frees, peak: {ts, allocated, reserved, live_count,
                         live_bytes, before_span, unexplained}, never_freed, ..., *_source}]}
    /memory_curve        ?run&worker&span&device[&width&start_us&end_us] -> {t_us, allocated, reserved,
                         fragmentation: {first, min, max, last} per pixel}
    /memory_allocations  ?run&worker&span&device[&which=live_at_peak|never_freed|all&op&sort&order&offset&limit]
                         -> {total, bytes, rows: [{index, t_ms, bytes, addr, op, shape, module, lifetime_us, ...}]}
    /memory_ops          ?run&worker&span&device[&sort&order&offset&limit] -> {total, rows: [{op_index, op, shape,
                         module, allocations, bytes, max_bytes, freed, never_freed, mean_lifetime_us, ...}]}

The memory view is per span: with span "all" the first analysed span is shown and `spans` lists the others.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

from ..analysis.memory import events as mem
from . import params

MAX_WIDTH = 8192
MAX_LIMIT = 5000
WHICH = ("live_at_peak", "never_freed", "all")
ALLOC_SORTABLE = ("index", "t_ms", "bytes", "op", "shape", "module", "lifetime_us", "addr")
OP_SORTABLE = ("op", "shape", "module", "allocations", "bytes", "max_bytes", "freed", "never_freed",
               "never_freed_bytes", "mean_lifetime_us", "max_lifetime_us", "live_at_peak_bytes")


def routes(plugin) -> Dict[str, Callable]:
    return {
        "/memory": lambda req: overview(*_events(plugin, req)),
        "/memory_curve": lambda req: curve(_device(plugin, req), req),
        "/memory_allocations": lambda req: allocations(_device(plugin, req), req),
        "/memory_ops": lambda req: ops(_device(plugin, req), req),
    }


def _events(plugin, request) -> Tuple[str, List[str], mem.MemoryEvents]:
    run, worker, span = params.selection(request)
    stored = plugin.service.sections(run, worker, span, "memory")
    state, section = stored[0]
    return state.span, [s.span for s, _ in stored], mem.MemoryEvents.from_section(section)


def _device(plugin, request) -> mem.MemoryEvents:
    _, _, events = _events(plugin, request)
    device = params.text(request, "device", required=True)
    if device not in events.devices:
        raise params.BadRequest(f"parameter 'device' must be one of: {', '.join(events.devices) or '(none)'}")
    return events.on(device)


def overview(span: str, spans: List[str], events: mem.MemoryEvents) -> Dict[str, Any]:
    return {"span": span, "spans": spans, **mem.summary(events)}


def curve(events: mem.MemoryEvents, request) -> Dict[str, Any]:
    width = params.integer(request, "width", 1000, 1, MAX_WIDTH)
    start = _number(request, "start_us", events.start_us)
    end = _number(request, "end_us", events.end_us)
    if end <= start:
        raise params.BadRequest("parameter 'end_us' must be greater than 'start_us'")
    return mem.curve(events, width, start, end)


def allocations(events: mem.MemoryEvents, request) -> Dict[str, Any]:
    which = params.choice(request, "which", WHICH, "live_at_peak")
    op = params.integer(request, "op", -2, -1, len(events.ops) - 1) if request.args.get("op") else None
    idx = mem.allocations(events, which, op)
    rows = mem.allocation_rows(events, idx)
    pk = mem.peak(events)
    if which == "live_at_peak" and op is None and pk and pk.before_span == pk.before_span and pk.before_span > 0:
        rows.append({"index": -1, "t_ms": None, "bytes": int(pk.before_span), "addr": "", "op_index": -1,
                     "op": mem.BEFORE_SPAN, "shape": "", "module": "", "lifetime_us": None, "allocated_after": None})
    return {"which": which, "bytes": sum(r["bytes"] for r in rows), **_page(request, rows, "bytes", ALLOC_SORTABLE)}


def ops(events: mem.MemoryEvents, request) -> Dict[str, Any]:
    return _page(request, mem.by_op(events), "bytes", OP_SORTABLE)


def _page(request, rows: List[Dict[str, Any]], default_sort: str, sortable) -> Dict[str, Any]:
    from .shapes import sort_rows

    key = params.choice(request, "sort", sortable, default_sort)
    descending = params.choice(request, "order", ("desc", "asc"), "desc") == "desc"
    offset = params.integer(request, "offset", 0, 0, 10 ** 9)
    limit = params.integer(request, "limit", 200, 1, MAX_LIMIT)
    rows = sort_rows(rows, key, descending)
    return {"total": len(rows), "rows": rows[offset: offset + limit]}


def _number(request, name: str, default: float) -> float:
    value = params.text(request, name, default="")
    if value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise params.BadRequest(f"parameter {name!r} must be a number") from None
    if not math.isfinite(number):
        raise params.BadRequest(f"parameter {name!r} must be finite")
    return number
