"""Routes of the Execution graph tab: a view of the collapsed graph, search, and one node's details.

A span without an Execution Trace is data, not an error: /graph/view answers {"available": false, "reason"}.

The graph of a span (its Execution Trace, linked to its Kineto trace and that trace's kernel analysis, plus the
display tree and its per-node figures: analysis/graph/span.py) is built once by an analysis worker, never in a
request's thread (routes/builds.py), and kept in a small LRU keyed by both files' path, size and version. A request
waits up to WAIT_S for a build in progress, then answers 503 (the tab asks again); a failed build answers 422 with
its reason.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set

import numpy as np

from ..analysis.graph.critical_path import path as cpath
from ..analysis.graph import view as gv
from ..analysis.graph.build import ExecutionGraph
from ..analysis.graph.span import Built, build_span
from ..errors import GpuInsightError
from ..service import NotFound
from ..store.worker import view_build
from . import params
from .builds import Builds, outcome

CACHE_SIZE = 4
MAX_EXPAND_IDS = 200
WAIT_S = 5.0  # a request waits this long for a graph being built before answering 503 (the tab asks again)


def routes(plugin) -> Dict[str, Callable]:
    cache = Builds(CACHE_SIZE)

    def built(request) -> Built:
        device_name = params.device_name(request, plugin.service.datasheet())
        return span_graph(plugin.service, cache, *params.selection(request), device_name=device_name)

    def view_route(request) -> Dict[str, Any]:
        reason = missing_et(plugin.service, *params.selection(request))
        if reason:
            return {"available": False, "reason": reason, "nodes": [], "edges": []}
        return {"available": True, "reason": None, **view(built(request), request)}

    return {
        "/graph/view": view_route,
        "/graph/node": lambda req: node(built(req), req),
        "/graph/search": lambda req: {"matches": gv.search(*_parts(built(req)),
                                                             params.text(req, "q", required=True))},
    }


def _parts(b: Built):
    return b.tree, b.graph, b.figs


def missing_et(service, run: str, worker: str, span: str) -> Optional[str]:
    """Why a selection has no graph (its span has no Execution Trace), or None when it has one."""
    state = service.span_states(run, worker, span)[-1]
    if state.execution_traces:
        return None
    return (f"span {state.span!r} of {run!r} has no Execution Trace: record one with "
            "torch.profiler.ExecutionTraceObserver next to the profiler (see the README)")


def span_graph(service, cache: Builds, run: str, worker: str, span: str,
               device_name: Optional[str] = None) -> Built:
    """The built graph of a selection: its ET (the span's own, else the run's) linked to the span's Kineto trace
    (the latest span when "all" is selected); its kernels rated as `device_name` when the user picked one.
    Raises NotReady while an analysis worker builds it, SpanFailed when it cannot be built."""
    reason = missing_et(service, run, worker, span)
    if reason:
        raise NotFound(reason)
    state = service.span_states(run, worker, span)[-1]
    et_entry, kineto = state.execution_traces[0], state.entry
    path = _path_et_ids(service, run, state)
    # A graph built before the span's summary was ready marks the ET-only path: build again once it is.
    key = tuple((e.path, e.size, e.version) for e in (et_entry, kineto)) + (path is not None, device_name)
    what = f"the execution graph of {state.span}"
    job = (what, service.max_trace_gb, build_span, et_entry.path, kineto.path, path, device_name, service.extra_args,
           service.datasheet())
    future = cache.get(key, lambda: service.background(f"{state.key}#graph", view_build, *job))
    return outcome(future, what, None if service.workers <= 0 else WAIT_S)


def _path_et_ids(service, run: str, state) -> Optional[np.ndarray]:
    """The ET node ids along the span's joint CPU + GPU critical path (its stored section), or None when that
    section is missing or failed (the graph then marks the ET's own op-level path)."""
    try:
        found = service.sections(run, state.worker, state.span, cpath.SECTION)
        return cpath.CriticalPath.from_section(found[-1][1]).seg["et_id"] if found else None
    except GpuInsightError:
        return None


def _ids(request, name: str, tree: gv.Tree) -> Set[int]:
    text = params.text(request, name, default="")
    if not text:
        return set()
    parts = text.split(",")
    if len(parts) > MAX_EXPAND_IDS:
        raise params.BadRequest(f"parameter {name!r} lists too many nodes")
    try:
        ids = {int(p) for p in parts}
    except ValueError:
        raise params.BadRequest(f"parameter {name!r} must be comma-separated node ids") from None
    return {i for i in ids if 0 <= i < len(tree.parent)}


def _node_id(request, tree: gv.Tree, name: str = "id") -> int:
    return params.integer(request, name, 0, 0, len(tree.parent) - 1)


def view(b: Built, request) -> Dict[str, Any]:
    """The visible graph for a collapse mode plus the user's opened / closed nodes, and a node to reveal: `focus`
    (a display node id) or `focus_et` (an ET node id, as the critical path names ops); `focus` in the answer is
    the revealed node's id (null when the ET has no node with that id)."""
    mode = params.choice(request, "collapse", ("annotation", "depth"), "annotation")
    depth = params.integer(request, "depth", 3, 1, 50)
    expanded = gv.default_expanded(b.tree, b.graph, mode, depth)
    expanded |= _ids(request, "open", b.tree)
    expanded -= _ids(request, "close", b.tree)
    focus = _focus(b, request)
    if focus is not None:
        expanded |= set(gv.ancestors(b.tree, focus))
    out = gv.view_json(b.tree, b.graph, b.figs, expanded)
    out.update(summary(b))
    out["focus"] = focus
    return out


def _focus(b: Built, request) -> Optional[int]:
    if request.args.get("focus"):
        return _node_id(request, b.tree, "focus")
    if request.args.get("focus_et"):
        et_id = params.integer(request, "focus_et", 0, -(1 << 62), 1 << 62)
        return b.graph.et.row_of.get(et_id)
    return None


def summary(b: Built) -> Dict[str, Any]:
    """What the header of the tab shows: files, sizes, link rate, critical path summary."""
    g = b.graph
    path = g.critical.summary() if g.critical else {}
    path["steps"] = _path_steps(b)
    return {"et_file": b.et_file, "kineto_file": b.kineto_file, "schema": g.et.schema, "warning": b.warning,
            "node_count": len(g.et), "op_count": int(g.is_op.sum()), "unit_count": len(g.units),
            "data_edge_count": len(g.data_edges), "link": g.link.to_dict(), "critical_path": path}


def _path_steps(b: Built, limit: int = 12) -> List[Dict[str, Any]]:
    """The critical path's longest steps (op and cause), for the summary."""
    g = b.graph
    steps = sorted(g.critical.steps, key=lambda s: -s.us)[:limit] if g.critical else []
    rows = g.critical_units
    return [{"id": int(rows[s.op]), "name": g.et.names[int(rows[s.op])], "cause": s.cause, "us": s.us}
            for s in steps]


def node(b: Built, request) -> Dict[str, Any]:
    """One display node: its figures, and for an ET node its schema, inputs, outputs, link and kernels."""
    tree, g = b.tree, b.graph
    n = _node_id(request, tree)
    out: Dict[str, Any] = {"summary": gv.node_json(tree, g, b.figs, n),
                           "path": [gv.label(tree, g, a) for a in reversed(gv.ancestors(tree, n))]}
    if tree.is_group(n):
        return out
    out["et"] = g.et.node(n)
    out["kineto"] = _kineto(g, n)
    out["kernels"] = _kernels(g, n)
    fwd = int(g.forward[n])
    out["forward"] = {"id": fwd, "name": g.et.names[fwd]} if fwd >= 0 else None
    return out


def _kineto(g: ExecutionGraph, row: int) -> Optional[Dict[str, Any]]:
    if g.link.op[row] < 0:
        return None
    return {"ts": float(g.cpu_ts[row]), "dur": float(g.cpu_dur[row]), "method": g.link.method}


def _kernels(g: ExecutionGraph, row: int, limit: int = 200) -> List[Dict[str, Any]]:
    """The kernels this node's call stack launched (its own and its nested ops'), longest first."""
    if g.efficiency is None:
        return []
    stack = [row] + [int(r) for r in np.flatnonzero(_descendants(g, row))]
    rows = [a for r in stack for a in g.kernels.rows.get(r, ())]
    acts = g.efficiency.activities
    rows.sort(key=lambda a: -acts["dur"][a])
    return [{"name": acts.strings["name"][acts["name"][a]], "dur": float(acts["dur"][a]),
             "op": acts.strings["op_name"][acts["op_name"][a]] if acts["op_name"][a] >= 0 else None,
             **{k: _finite(acts[k][a]) for k in ("flops", "tflops", "gbps", "pct_peak", "pct_dram", "efficiency")}}
            for a in rows[:limit]]


def _descendants(g: ExecutionGraph, row: int) -> np.ndarray:
    """ET rows strictly under `row` in the control tree."""
    under = np.zeros(len(g.et), dtype=bool)
    for r in range(row + 1, len(g.et)):  # children have larger ids, so rows after `row`
        up = int(g.et.parent[r])
        under[r] = up == row or (up >= 0 and under[up])
    return under


def _finite(x) -> Optional[float]:
    x = float(x)
    return x if np.isfinite(x) else None
