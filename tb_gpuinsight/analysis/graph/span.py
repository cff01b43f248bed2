"""The Execution graph of one span as the tab shows it: the ET linked to the span's Kineto trace and that trace's
kernel analysis, with its display tree and per-node figures.

`build_span` reads both files, so the plugin runs it in an analysis worker process, never in a request's thread;
what it returns is plain data (numpy columns, lists, dataclasses) and comes back pickled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ...errors import GpuInsightError
from ...trace.et import load_et
from . import view as gv
from .build import ExecutionGraph, build_graph


@dataclass
class Built:
    """A span's graph with its display tree and figures, and which files it came from."""
    graph: ExecutionGraph
    tree: gv.Tree
    figs: gv.Figures
    et_file: str
    kineto_file: Optional[str]
    warning: str = ""


def build_span(et_path: str, kineto_path: str, path_et_ids: Optional[np.ndarray] = None,
               device_name: Optional[str] = None, extra_args: Sequence[str] = (), datasheet=None) -> Built:
    """The graph of `et_path` linked to `kineto_path` (its kernels rated as `device_name` when given), its ops on
    the joint CPU + GPU critical path marked from `path_et_ids` (the stored path's ET node ids). A Kineto trace
    that cannot be used leaves the ET's graph without times, and a warning that says why."""
    from ...loading import load
    from ..kernels.efficiency import analyze_trace
    from ..kernels.graph_capture import with_captures

    et = load_et(et_path)
    trace = eff = None
    warning = ""
    try:
        trace = load(kineto_path, extra_args=extra_args)
        eff = analyze_trace(trace, datasheet=datasheet, device_name=device_name)
        eff = with_captures(eff, datasheet=datasheet, device_name=device_name)  # replays via captured ops
    except GpuInsightError as exc:  # the ET alone still gives a graph, without times
        warning = f"Kineto trace not usable, graph shown without times: {exc}"
    graph = build_graph(et, trace, eff)
    if trace is not None and path_et_ids is not None:
        graph.use_path(path_et_ids)
    tree = gv.build_tree(graph)
    return Built(graph, tree, gv.figures(tree, graph), et_path, kineto_path if trace is not None else None, warning)
