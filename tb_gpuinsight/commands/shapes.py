"""`tb-gpuinsight shapes PATH`: ops grouped by input shapes (a Kineto trace), and tensor records (a tensor.trace).

    tb-gpuinsight shapes TRACE                      # op groups, then the tensors of its tensor.trace if it has one
    tb-gpuinsight shapes TRACE --leaves             # leaf ops only: each device microsecond counted once
    tb-gpuinsight shapes TRACE --tree               # the op tree: total and self device time per op group
    tb-gpuinsight shapes TRACE --op aten::mm        # the input-shape distribution of one op
    tb-gpuinsight shapes TRACE --tensors T.trace    # join these tensor.trace files instead of the companions
    tb-gpuinsight shapes FILE.tensor.trace          # a tensor.trace alone; malformed lines listed on stderr
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

from .. import logdir as logdir_mod
from ..analysis.shapes import report as sh
from ..errors import GpuInsightError
from .text import print_csv, render_table

OP_COLUMNS = (("op", "op", 40), ("input shapes", "shape", 44), ("types", "types", 20), ("calls", "calls", 7),
              ("CPU ms", "cpu_ms", 9), ("device ms", "device_ms", 9), ("self ms", "self_ms", 9), ("kernels", "kernels", 7),
              ("GFLOP", "gflop", 9), ("TFLOP/s", "tflops", 8), ("% peak", "pct_peak", 7))
TENSOR_COLUMNS = (("kind", "kind", 4), ("t ms", "t_ms", 9), ("name", "name", 14), ("shape", "shape", 22),
                  ("bytes", "bytes", 10), ("function", "function", 34), ("location", "location", 30),
                  ("op", "op", 24), ("producer", "producer", 30))
DIST_COLUMNS = (("input shapes", "shape", 56), ("calls", "calls", 7), ("% calls", "share", 7),
                ("CPU ms", "cpu_ms", 9), ("device ms", "device_ms", 9), ("TFLOP/s", "tflops", 8),
                ("% peak", "pct_peak", 7))


def register(sub) -> None:
    """Add the `shapes` subcommand."""
    p = sub.add_parser("shapes", help="ops grouped by input shapes and dtypes; tensor.trace records joined to ops")
    p.add_argument("path", help="a Kineto trace, or a tensor.trace file")
    p.add_argument("--tensors", action="append", metavar="FILE",
                   help="tensor.trace file(s) to join (default: the trace's companions, as discovery pairs them)")
    p.add_argument("--no-tensors", action="store_true", help="show the op groups only")
    p.add_argument("--op", metavar="NAME", help="show the input-shape distribution of this op")
    p.add_argument("--filter", default="", help="only op groups / tensors whose text contains this")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--leaves", action="store_true",
                      help="leaf op groups only (no child op with device time): nothing counted twice")
    view.add_argument("--tree", action="store_true", help="op groups as a tree (parent -> children), indented")
    p.add_argument("--top", type=int, default=30, help="rows to show per table (0 = all)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight shapes`."""
    kind = logdir_mod.sniff(args.path)
    if kind.kind == logdir_mod.TENSOR_TRACE:
        return _tensor_trace_only(args)
    if kind.kind != logdir_mod.KINETO:
        raise GpuInsightError(f"{args.path}: not a Kineto trace or a tensor.trace ({kind.reason or kind.kind})")
    from .. import shapes as shapes_api

    tensor_paths = [] if args.no_tensors else args.tensors
    report = shapes_api(args.path, tensor_paths)
    if args.op:
        return _emit(args, {"op": args.op, "shapes": sh.distribution(report.rows, args.op)}, "shapes", DIST_COLUMNS)
    rows = [r for r in report.rows if _contains(args.filter, r["op"], r["shape"]) and (r["leaf"] or not args.leaves)]
    if args.tree:
        rows = sh.tree_rows(report.rows, [r["id"] for r in rows] if args.filter else None)
        if args.format == "table":
            rows = [{**r, "op": "  " * r["depth"] + r["op"]} for r in rows]
    out: Dict[str, Any] = {"path": args.path, "record_shapes": report.record_shapes, "ops": _top(rows, args.top)}
    if not report.record_shapes:
        print(f"note: {sh.NO_SHAPES}", file=sys.stderr)
    if report.tensors is not None:
        out.update(_tensor_part(report.tensors, args))
    elif report.damaged_tensor_traces:  # found but damaged: said in every format
        print(f"note: {report.tensors_note}", file=sys.stderr)
    elif not args.no_tensors and args.format == "table":
        print(f"note: {sh.NO_TENSOR_TRACE}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print_csv(out["ops"])
        return 0
    _print_rows(out["ops"], OP_COLUMNS, f"{len(rows):,} op groups (by name, input shapes and dtypes)")
    if "tensors" in out:
        print()
        _print_rows(out["tensors"], TENSOR_COLUMNS, f"{out['tensor_total']:,} tensor records, "
                                                    f"{out['matched']:,} joined to an op")
    return 0


def _tensor_trace_only(args) -> int:
    from ..trace.tensortrace import read_tensor_trace

    tensors = sh.join_tensors([read_tensor_trace(args.path)])
    part = _tensor_part(tensors, args)
    if args.format == "json":
        print(json.dumps(part, indent=1))
    elif args.format == "csv":
        print_csv(part["tensors"])
    else:
        _print_rows(part["tensors"], TENSOR_COLUMNS, f"{part['tensor_total']:,} tensor records")
    return 0


def _tensor_part(tensors: sh.Tensors, args) -> Dict[str, Any]:
    for e in tensors.errors:
        print(f"{e['file']}:{e['line']}: skipped: {e['reason']}", file=sys.stderr)
    if tensors.error_count > len(tensors.errors):
        print(f"... {tensors.error_count - len(tensors.errors):,} more malformed lines skipped", file=sys.stderr)
    mask = sh.tensor_filter(tensors, args.filter)
    order = sh.tensor_order(tensors, "ts", False)
    order = order[mask[order]]
    shown = order if args.top <= 0 else order[: args.top]
    return {"tensors": sh.tensor_rows(tensors, shown.tolist()), "tensor_total": int(len(order)),
            "matched": tensors.matched, "malformed_lines": tensors.error_count}


def _emit(args, payload: Dict[str, Any], key: str, columns) -> int:
    if args.format == "json":
        print(json.dumps(payload, indent=1))
    elif args.format == "csv":
        print_csv(payload[key])
    else:
        title = f"input shapes of {payload['op']}" if payload[key] else f"no calls of {payload['op']} in this trace"
        _print_rows(payload[key], columns, title)
    return 0


def _print_rows(rows: List[Dict[str, Any]], columns, title: str) -> None:
    print(title)
    for line in render_table([_display(r) for r in rows], columns):
        print(line)


def _display(r: Dict[str, Any]) -> Dict[str, Any]:
    """Text cells for the fixed-width table: times in ms, FLOPs in GFLOP, percentages, locations."""
    out = dict(r)
    for src, dst in (("cpu_us", "cpu_ms"), ("device_us", "device_ms"), ("self_us", "self_ms")):
        if src in r:
            out[dst] = None if r[src] is None else f"{r[src] / 1000:,.3f}"
    if "flops" in r:
        out["gflop"] = None if r["flops"] is None else f"{r['flops'] / 1e9:,.3f}"
    if "share" in r:  # render_table formats pct_peak itself
        out["share"] = f"{100 * r['share']:.1f}"
    if "input_types" in r:  # a list as written by the profiler; anything else (a malformed trace) as its text
        types = r["input_types"]
        out["types"] = (" ".join(str(t) for t in types if t) if isinstance(types, list) else
                        None if types is None else str(types)) or None
    if "file" in r:
        out["location"] = f"{os.path.basename(r['file'])}:{r['line']}"
        out["t_ms"] = f"{r['t_ms']:,.3f}"
    return {k: (v if v != "" else None) for k, v in out.items()}


def _contains(needle: str, *texts: str) -> bool:
    return not needle or any(needle.lower() in t.lower() for t in texts)


def _top(rows: List[Dict[str, Any]], top: int) -> List[Dict[str, Any]]:
    return rows if top <= 0 else rows[:top]


