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
them): each span's trace is read once and reduced to its groups and op timeline, kept in an LRU keyed by path, size
and mtime. Device time and peaks come from the span's cached analysis. Files are only those discovery found.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analysis.shapes import report as sh
from ..errors import TraceError
from ..logdir import FileEntry
from . import params
from .lru import Lru

MAX_LIMIT = 5000
LRU_SIZE = 32
OP_SORTABLE = ("op", "shape", "calls", "cpu_us", "mean_cpu_us", "device_us", "self_us", "kernels", "flops", "tflops",
               "pct_peak", "dtype")


@dataclass
class SpanShapes:
    """What the tab needs of one span's trace: its op groups and its top-level op timeline."""
    groups: Dict[Tuple[str, str, str], sh.OpGroup]
    timeline: sh.Timeline
    record_shapes: bool
    key: Tuple[str, int, str]  # (path, size, version: content digest or ETag) of the trace it was read from


_SPANS = Lru(LRU_SIZE)
_TENSORS = Lru(8)


def routes(plugin) -> Dict[str, Callable]:
    return {
        "/op_shapes": lambda req: op_shapes(_selected(plugin, req), req),
        "/tensors": lambda req: tensors(_selected(plugin, req), req),
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
    e = state.entry
    key = (e.path, e.size, e.version)
    return _SPANS.get(key + (device_name,), lambda: _reduce(plugin, run, worker, state, key, device_name))


def _reduce(plugin, run: str, worker: str, state, key: Tuple[str, int, int],
            device_name: Optional[str] = None) -> SpanShapes:
    from ..loading import load

    trace = load(state.entry.path, extra_args=plugin.service.extra_args)
    eff = plugin.service.analysis(run, worker, state.span, device_name=device_name)
    return SpanShapes(sh.op_groups(trace, eff.activities, eff.shapes), sh.Timeline.of(trace), sh.has_shapes(trace),
                      key)


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

def tensors(sel: Selected, request) -> Dict[str, Any]:
    """A page of the tensor records of the selection's tensor.trace files, joined to its ops."""
    joined, damaged = _joined(sel) if sel.tensor_traces else (None, [])
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


def _joined(sel: Selected) -> Tuple[Optional[sh.Tensors], List[str]]:
    """The selection's tensor.trace files joined to its ops (None when none reads) and "file: reason" of each
    damaged one (a companion that does not read is said to be damaged, as the CLI says, not missing)."""
    key = (tuple((e.path, e.size, e.version) for e in sel.tensor_traces), tuple(s.key for s in sel.spans))
    return _TENSORS.get(key, lambda: _join(sel))


def _join(sel: Selected) -> Tuple[Optional[sh.Tensors], List[str]]:
    from ..trace.tensortrace import read_tensor_trace

    read, damaged = [], []
    for e in sel.tensor_traces:
        try:
            read.append(read_tensor_trace(e.path))
        except TraceError as exc:
            damaged.append(f"{os.path.basename(e.path)}: {exc.reason}")
    if not read:
        return None, damaged
    return sh.join_tensors(read, sh.Timeline.concat([s.timeline for s in sel.spans])), damaged


def _json_safe(row: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else
                int(v) if isinstance(v, np.integer) else v) for k, v in row.items()}
