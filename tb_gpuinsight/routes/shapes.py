"""Routes of the Tensor shapes tab: op groups by input shapes, the tensors of a tensor.trace, an op's shape mix.

    /op_shapes           ?run&worker&span[&view=flat|tree&leaf=1|0&filter&sort&order&offset&limit]
                         -> {record_shapes, message, spans, view, total, device_us, rows: [{op, shape, input_dims,
                             input_types, concrete_inputs, calls, cpu_us, mean_cpu_us, device_us (total), self_us,
                             leaf, id, parent, depth (tree), kernels, flops, flops_reason, tflops, pct_peak, dtype,
                             peak_tflops}]}
                         flat: leaf ops only by default (leaf=0: every op); tree: parents before children, a
                         filter keeps its hits and their ancestors; `device_us` of the answer is the sum of self
                         times, the selection's device time counted once.
    /tensors             ?run&worker&span[&filter&sort&order&offset&limit]
                         -> {has_tensor_trace, message, files: [{file, records, lines, errors}], errors: [{file, line,
                             reason}], error_count, matched, total, rows: [{kind, t_ms, ts, shape, ndim, numel, bytes,
                             ptr, name, function, file, line, op, op_shape, producer}]}
    /shape_distribution  ?run&worker&span&op -> {op, total_calls, shapes: [{shape, input_types, calls, share, cpu_us,
                             device_us, tflops, pct_peak}]}

The op groups need the Kineto ops themselves (a CPU-only run launches no kernel, so the cached analysis has none of
them): each span's trace is read once by an analysis worker, never in a request's thread (routes/builds.py), and
reduced to its groups and op timeline, kept in an LRU keyed by path, size and version; the tensor.trace files are
read and joined there too. Device time and peaks come from the span's cached analysis. Files are only those
discovery found.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analysis.shapes import report as sh
from ..analysis.shapes.span import SpanShapes, joined_tensors, span_shapes
from ..logdir import FileEntry
from ..store.worker import view_build
from . import params
from .builds import Builds, outcome

MAX_LIMIT = 5000
LRU_SIZE = 32
OP_SORTABLE = ("op", "shape", "calls", "cpu_us", "mean_cpu_us", "device_us", "self_us", "kernels", "flops", "tflops",
               "pct_peak", "dtype")


SHAPES_WAIT_S = 90.0  # a request waits this long for a span's op groups being built (the tab's own limit: 120 s)
_SPANS = Builds(LRU_SIZE)
_TENSORS = Builds(8)


def routes(plugin) -> Dict[str, Callable]:
    return {
        "/op_shapes": lambda req: op_shapes(_selected(plugin, req), req),
        "/tensors": lambda req: tensors(plugin, _selected(plugin, req), req),
        "/shape_distribution": lambda req: shape_distribution(_selected(plugin, req), req),
    }


@dataclass
class Selected:
    spans: List[SpanShapes]
    tensor_traces: List[FileEntry]


def _selected(plugin, request) -> Selected:
    """The ready spans a request names, reduced (cached; rated as the picked `device_name`, if any), and their
    tensor.trace files (span's own, then run's)."""
    run, worker, span = params.selection(request)
    device_name = params.device_name(request, plugin.service.datasheet())
    ready = plugin.service.ready_states(run, worker, span)  # 503 while loading, 422 when its analysis failed
    spans = [_span_shapes(plugin, run, worker, s, device_name) for s in ready]
    seen, traces = set(), []
    for s in ready:
        for entry in s.tensor_traces:
            if entry.path not in seen:
                seen.add(entry.path)
                traces.append(entry)
    return Selected(spans, traces)


def _span_shapes(plugin, run: str, worker: str, state, device_name: Optional[str] = None) -> SpanShapes:
    """A span's op groups and op timeline, built from its trace by an analysis worker (its stored analysis, rated
    as `device_name`, gives device time and peaks)."""
    service, e = plugin.service, state.entry
    key = (e.path, e.size, e.version)

    def submit():
        eff = service.analysis(run, worker, state.span, device_name=device_name)
        job = (f"the op groups of {state.span}", service.max_trace_gb, span_shapes, e.path, service.extra_args,
               eff.activities, eff.shapes, key)
        return service.background(f"{state.key}#shapes", view_build, *job)

    future = _SPANS.get(key + (device_name,), submit)
    return outcome(future, f"the op groups of {state.span}", _wait(service))


def _wait(service) -> Optional[float]:
    return None if service.workers <= 0 else SHAPES_WAIT_S


def _page(request, default_sort: str, sortable: Sequence[str]) -> Tuple[str, bool, int, int]:
    """(sort key, descending, offset, limit) of a paged route."""
    sort = params.choice(request, "sort", sortable, default_sort)
    descending = params.choice(request, "order", ("desc", "asc"), "desc") == "desc"
    offset = params.integer(request, "offset", 0, 0, 10 ** 9)
    limit = params.integer(request, "limit", 200, 1, MAX_LIMIT)
    return sort, descending, offset, limit


# ---------------------------------------------------------------------------------------------- op groups

def op_shapes(sel: Selected, request) -> Dict[str, Any]:
    """A page of the op groups, filtered by op name or shape text and sorted on the server."""
    rows = sh.merge_groups(s.groups for s in sel.spans)
    record_shapes = any(s.record_shapes for s in sel.spans)
    view = params.choice(request, "view", ("flat", "tree"), "flat")
    leaf_only = params.choice(request, "leaf", ("1", "0"), "1") == "1"
    needle = params.text(request, "filter", default="").lower()
    hits = [r for r in rows if needle in r["op"].lower() or needle in r["shape"].lower()] if needle else rows
    sort, descending, offset, limit = _page(request, "device_us", OP_SORTABLE)
    if view == "tree":
        page = sh.tree_rows(rows, [r["id"] for r in hits] if needle else None)
        total, page = len(page), page[:MAX_LIMIT]
    else:
        hits = sort_rows([r for r in hits if r["leaf"]] if leaf_only else hits, sort, descending)
        total, page = len(hits), hits[offset: offset + limit]
    return {"record_shapes": record_shapes, "message": None if record_shapes else sh.NO_SHAPES,
            "spans": len(sel.spans), "view": view, "total": total,
            "device_us": sum(r["self_us"] or 0.0 for r in rows), "rows": [_json_safe(r) for r in page]}


def sort_rows(rows: List[Dict[str, Any]], key: str, descending: bool) -> List[Dict[str, Any]]:
    """Rows sorted by one key; unknown (None) values last in either direction; ties keep their order."""
    known = [r for r in rows if r.get(key) is not None]
    unknown = [r for r in rows if r.get(key) is None]
    text = isinstance(known[0][key], str) if known else False
    known.sort(key=lambda r: r[key].lower() if text else r[key], reverse=descending)
    return known + unknown


def shape_distribution(sel: Selected, request) -> Dict[str, Any]:
    op = params.text(request, "op", required=True)
    shapes = sh.distribution(sh.merge_groups(s.groups for s in sel.spans), op)
    return {"op": op, "total_calls": sum(s["calls"] for s in shapes), "shapes": [_json_safe(s) for s in shapes]}


# ---------------------------------------------------------------------------------------------- tensors

def tensors(plugin, sel: Selected, request) -> Dict[str, Any]:
    """A page of the tensor records of the selection's tensor.trace files, joined to its ops."""
    joined, damaged = _joined(plugin, sel) if sel.tensor_traces else (None, [])
    if joined is None:  # none found, or every one found is damaged
        return {"has_tensor_trace": False, "message": sh.damaged_note(damaged) if damaged else sh.NO_TENSOR_TRACE,
                "damaged": damaged, "files": [], "errors": [], "error_count": 0, "matched": 0, "total": 0,
                "rows": []}
    mask = sh.tensor_filter(joined, params.text(request, "filter", default=""))
    sort, descending, offset, limit = _page(request, "ts", sorted(sh.TENSOR_SORTABLE | {"t_ms"}))
    order = sh.tensor_order(joined, "ts" if sort == "t_ms" else sort, descending)
    order = order[mask[order]]
    t0 = int(joined.table["ts"].min()) if len(joined.table) else 0
    files = [{**f, "file": os.path.basename(f["file"])} for f in joined.files]
    errors = [{**e, "file": os.path.basename(e["file"])} for e in joined.errors[:50]]
    message = (sh.damaged_note(damaged) if damaged else
               None if len(joined.table) else "the tensor.trace has no records")
    return {"has_tensor_trace": True, "message": message, "damaged": damaged, "files": files, "errors": errors, "error_count": joined.error_count, "matched": joined.matched,
            "total": int(len(order)), "rows": sh.tensor_rows(joined, order[offset: offset + limit].tolist(), t0)}


def _joined(plugin, sel: Selected) -> Tuple[Optional[sh.Tensors], List[str]]:
    """The selection's tensor.trace files joined to its ops (None when none reads) and "file: reason" of each
    damaged one, built by an analysis worker."""
    service = plugin.service
    key = (tuple((e.path, e.size, e.version) for e in sel.tensor_traces), tuple(s.key for s in sel.spans))
    job = ("the tensor records", service.max_trace_gb, joined_tensors, [e.path for e in sel.tensor_traces],
           [s.timeline for s in sel.spans])
    future = _TENSORS.get(key, lambda: service.background("tensor.trace#shapes", view_build, *job))
    return outcome(future, "the tensor records", _wait(service))


def _json_safe(row: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else
                int(v) if isinstance(v, np.integer) else v) for k, v in row.items()}
