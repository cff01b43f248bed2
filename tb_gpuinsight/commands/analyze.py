"""`tb-gpuinsight analyze TRACE` and `tb-gpuinsight augment SRC DST`: the efficiency of every kernel, as a table,
CSV or JSON; and a copy of the trace with each kernel's FLOPs, bytes and achieved share of the peak as args.

    tb-gpuinsight analyze TRACE [--by op] [--format csv|json] [--device 'H100 SXM5'] [--dtype bf16]
    tb-gpuinsight augment TRACE OUT.json.gz
"""
from __future__ import annotations

import json
import os
from typing import Dict, List

from ..trace.stages import stage
from .options import analysis_options, analyze_trace, check_output, rows_to_write
from .text import ms, pct, print_csv, render_table

ANALYZE_COLUMNS = (
    ("!", "over_roof", 1), ("kernel", "display_name", 56), ("class", "kernel_class", 13), ("op", "op", 28),
    ("dev", "device", 3), ("calls", "count", 6),
    ("total ms", "total_us", 9), ("% time", "time_share", 6), ("mean us", "mean_us", 9),
    ("TFLOP/s", "tflops", 8), ("% peak", "pct_peak", 7), ("GB/s", "gbps", 8), ("% DRAM", "pct_dram", 7),
    ("FLOP/B", "intensity", 7), ("bound", "bound", 7), ("dtype", "dtype", 5), ("occ %", "occupancy", 5),
)


def register(sub) -> None:
    """Add the `analyze` and `augment` subcommands."""
    p = sub.add_parser("analyze", help="efficiency of every kernel: FLOPs, bytes, achieved vs device peak")
    p.add_argument("path", help="a Kineto trace (.json or .json.gz)")
    analysis_options(p)
    p.add_argument("--top", type=int, help="rows to show (0 = all; default 20 in a table, all in CSV or JSON)")
    p.add_argument("--by", choices=("name", "op"), default="name",
                   help="group by kernel name, or by launching op and kernel name")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--et", action="append", metavar="PATH",
                   help="Execution Trace supplying shapes the trace lacks (repeatable; default: the companion "
                        "ETs discovery pairs with the trace; --et '' for none)")
    p.add_argument("--capture", action="append", metavar="PATH",
                   help="trace recorded while the CUDA/HIP graphs this trace replays were captured: replayed "
                        "kernels take the captured ops and shapes (repeatable; default: the trace itself, a "
                        "capture_traces/ folder beside it, the run's other spans; --capture '' for none)")
    p.set_defaults(func=analyze)
    p = sub.add_parser("augment", help="write a copy of a trace with kernel_flop, kernel_num_gb and achieved-%% args")
    p.add_argument("src", help="a Kineto trace (.json or .json.gz)")
    p.add_argument("dst", help="output path (.json or .json.gz); never the input")
    analysis_options(p)
    p.set_defaults(func=augment)


def analyze(args) -> int:
    """Entry of `tb-gpuinsight analyze`."""
    eff = analyze_trace(args.path, args)
    with stage("output"):
        return _print_analysis(eff, args)


def augment(args) -> int:
    """Entry of `tb-gpuinsight augment`."""
    from ..analysis.kernels.augment import write_augmented

    check_output(args.src, args.dst)
    count = write_augmented(args.src, args.dst, analyze_trace(args.src, args))
    print(f"wrote {args.dst}: {count:,} events annotated")
    return 0


def _print_analysis(eff, args) -> int:
    from ..analysis.enrich import shape_sources
    from ..analysis.kernels.rows import group_rows, sort_order

    table = eff.by_name() if args.by == "name" else eff.by_op()
    order = sort_order(table, "total_us")
    top = rows_to_write(args)
    rows = group_rows(table, order[:top] if top > 0 else order)
    if args.format == "json":
        print(json.dumps({"devices": eff.summary(), "dtype": args.dtype, "rows": rows,
                          "shape_sources": shape_sources(eff.trace, eff.activities)}, indent=1))
    elif args.format == "csv":
        print_csv(rows)
    else:
        table = render_table(rows, ANALYZE_COLUMNS, "(no kernels)")
        for line in _device_lines(eff) + _shape_source_lines(eff) + [""] + table:
            print(line)
    return 0


def _device_lines(eff) -> List[str]:
    lines = []
    for d in eff.summary():
        s = d["summary"]
        spec = d["spec"]
        lines.append(f"device {d['id']}: {d['trace_name'] or '(no name)'} -> "
                     f"{spec['name'] if spec else 'unknown (efficiency unknown)'}")
        lines.append(f"  {d['how']}")
        lines.append(f"  GPU busy {ms(s['gpu_busy_us'])}, kernels {ms(s['kernel_time_us'])} "
                     f"({s['kernel_count']:,}), memcpy/memset {ms(s['memop_time_us'])}; kernel time with bytes "
                     f"{pct(s['byte_time_share'])}; "
                     f"time-weighted efficiency {pct(s['efficiency'])}")
        lines += _coverage_lines(s)
    if not lines:
        lines.append("no GPU devices or GPU activity in this trace")
    return lines


def _coverage_lines(s: Dict) -> List[str]:
    """Over-the-roof kernels and kernel time without a rated figure, per reason with its hint."""
    from ..analysis.kernels import coverage
    from ..analysis.kernels.reasons import reason_lines

    over = [f"  {s['over_roof_count']:,} kernel calls ({pct(s['over_roof_time_share'])} of kernel time) over the "
            f"physical roof: marked ! and left out of the efficiency"] if s.get("over_roof_count") else []
    families = ", ".join(f"{r['family']} {pct(r['time_share'])} ({r['reason'] or 'unknown'})"
                         for r in s.get("unrated_families", []))
    compute = [f"  {coverage.label(pct(s[coverage.KEY]))}"
               + (f"; without FLOPs: {families}" if families else "")] if s.get("compute_flop_share") is not None \
        else []
    return compute + over + reason_lines({r["code"]: r["time_share"] for r in s.get("reasons", [])})


def _shape_source_lines(eff) -> List[str]:
    """Where the shapes behind the kernel time came from, and which Execution Trace supplied some."""
    from ..analysis.enrich import shape_sources

    info = shape_sources(eff.trace, eff.activities)
    shares = ", ".join(f"{k} {pct(v)}" for k, v in info["kernel_time_share"].items() if v > 0)
    lines = [f"shapes of kernel time: {shares or 'no kernel time'}"]
    for et in info["execution_traces"]:
        verdict = (f"used, {et['linked']:,} ops linked by {et['method']}" if et["used"] else
                   f"not used: {et['reason']}")
        lines.append(f"  Execution Trace {os.path.basename(et['path'])}: {verdict}")
    if info.get("et_by_call_stack") or info.get("et_unmatched"):
        unmatched = ", ".join(f"{name} x{count:,}" for name, count in info["et_unmatched"].items())
        lines.append(f"  sized by call stack: {info['et_by_call_stack']:,} ops ({info['et_by_python_stack']:,} with "
                     f"their Python stack); not matched: {unmatched or 'none'}")
    return lines
