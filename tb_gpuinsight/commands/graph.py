"""`tb-gpuinsight graph ET [--trace KINETO] [--dot OUT] [--json OUT]`: link rate, critical path, exports."""
from __future__ import annotations

import json
from typing import Dict, List

from ..analysis.graph.critical_path.deps import CAUSES as JOINT_CAUSES
from ..analysis.graph.op_path import CAUSES
from ..analysis.graph.build import ExecutionGraph, load_graph
from ..terminal import atomic_file

_CAUSE_LABELS = {"cpu_op": "CPU op", "gpu_kernel": "GPU kernel", "launch_gap": "launch gap",
                 "host_gap": "host gap (CPU between ops)"}


def register(sub) -> None:
    """Add the `graph` subcommand."""
    p = sub.add_parser("graph", help="Execution Trace graph: link to Kineto, critical path, DOT / JSON export")
    p.add_argument("et", metavar="ET", help="Execution Trace file (.json or .json.gz)")
    p.add_argument("--trace", metavar="KINETO", help="the Kineto trace of the same run and span, for timings")
    p.add_argument("--dot", metavar="OUT", help="write the op graph (units and data edges) as Graphviz DOT")
    p.add_argument("--json", metavar="OUT", help="write nodes, edges, link and critical path as JSON")
    p.set_defaults(func=_cmd_graph)


def _cmd_graph(args) -> int:
    graph = load_graph(args.et, args.trace)
    for line in describe(graph):
        print(line)
    if args.dot:
        with atomic_file(args.dot, "w", encoding="utf-8") as f:
            f.write(to_dot(graph))
    if args.json:
        with atomic_file(args.json, "w", encoding="utf-8") as f:
            json.dump(to_json(graph), f, separators=(",", ":"))
    return 0


def describe(graph: ExecutionGraph) -> List[str]:
    """Human lines: the ET, its counts, the link, the critical path by cause (the joint CPU + GPU path when a
    Kineto trace was given, else the ET's op-level path)."""
    et, link, cp = graph.et, graph.link, graph.critical
    lines = [f"file      {et.path}", f"schema    {et.schema}",
             f"nodes     {len(et):,} ({int(graph.is_op.sum()):,} ops, {len(graph.units):,} top-level ops, "
             f"{len(graph.data_edges):,} data edges, {int((graph.forward >= 0).sum()):,} backward nodes linked "
             "to their forward op)"]
    if link.method == "none":
        lines.append("link      no Kineto trace linked (pass --trace KINETO for times and kernels)")
    else:
        offset = f", offset {link.offset}" if link.offset else ""
        lines.append(f"link      {link.linked:,} of {link.linkable:,} nodes ({link.rate:.1%}) by {link.method}"
                     f"{offset}")
    if graph.joint is not None:
        return lines + _joint_lines(graph)
    unit = "us" if cp.timed else "ops"
    lines.append(f"critical  {cp.length_us:,.0f} us over {len(cp.ops()):,} ops; step {cp.step_us:,.0f} us"
                 if cp.timed else f"critical  {len(cp.ops()):,} ops long (untimed: each op counts 1)")
    total = cp.length_us or 1.0
    for cause in CAUSES:
        us = cp.by_cause.get(cause, 0.0)
        if us:
            lines.append(f"  {_CAUSE_LABELS[cause]:<28}{us:>14,.0f} {unit}  {us / total:6.1%}")
    return lines


def _joint_lines(graph: ExecutionGraph) -> List[str]:
    """The joint CPU + GPU critical path (as `critical-path` reports it), summed over the trace's steps."""
    steps = graph.joint.steps
    wall = sum(s["wall_us"] for s in steps) or 1.0
    lines = [f"critical  {sum(s['path_us'] for s in steps):,.0f} us of {wall:,.0f} us over {len(steps)} step(s), "
             f"{len(graph.critical_rows()):,} top-level ops on it (details: tb-gpuinsight critical-path)"]
    for cause in JOINT_CAUSES:
        us = sum(s["causes"].get(cause, 0.0) for s in steps)
        if us:
            lines.append(f"  {cause.replace('_', ' '):<28}{us:>14,.0f} us  {us / wall:6.1%}")
    return lines


def _label(graph: ExecutionGraph, row: int) -> str:
    return graph.et.names[row].replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph: ExecutionGraph) -> str:
    """Top-level ops and their data edges; the critical path in red."""
    on_path = set(graph.critical_rows())
    lines = ["digraph execution_graph {", "  node [shape=box, fontsize=10];"]
    for row in graph.units.tolist():
        style = ", color=red, penwidth=2" if row in on_path else ""
        lines.append(f'  n{graph.et.ids[row]} [label="{_label(graph, row)}"{style}];')
    for p, c in graph.data_edges:
        style = " [color=red]" if p in on_path and c in on_path else ""
        lines.append(f"  n{graph.et.ids[p]} -> n{graph.et.ids[c]}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_json(graph: ExecutionGraph) -> Dict[str, object]:
    """Every top-level op with its times and kernels, the data edges (ET ids), link and critical path."""
    et, k = graph.et, graph.kernels
    nodes = [{"id": int(et.ids[r]), "name": et.names[r], "parent": int(et.ids[et.parent[r]]) if et.parent[r] >= 0
              else None, "cpu_us": None if graph.cpu_dur[r] != graph.cpu_dur[r] else float(graph.cpu_dur[r]),
              "gpu_us": float(k.gpu_us[r]), "kernels": len(k.rows.get(r, ()))} for r in graph.units.tolist()]
    path = graph.critical.summary() if graph.joint is None else \
        {"model": "joint CPU + GPU", "steps": graph.joint.steps}
    return {"schema": et.schema, "nodes": nodes,
            "data_edges": [[int(et.ids[p]), int(et.ids[c])] for p, c in graph.data_edges],
            "link": graph.link.to_dict(), "critical_path": {**path,
                                                            "ops": [int(et.ids[r]) for r in graph.critical_rows()]}}
