"""`tb-gpuinsight diff A B`: two traces (or run directories: all their spans) compared kernel by kernel or op by
op, as a table, CSV or JSON; with `--fail-if-slower PCT` a regression gate (exit 1, see `commands/report.py`).

    tb-gpuinsight diff OLD NEW [--by op] [--match exact] [--format csv|json] [--fail-if-slower 5]
"""
from __future__ import annotations

import json
import os
from typing import Dict, List

from . import report as gate_commands
from .options import analysis_options, check_device, model_config_arg, rows_to_write
from .text import ms, pct, print_csv, render_table, signed_ms

DIFF_COLUMNS = (
    ("kernel", "display_name", 56), ("class", "class", 13), ("status", "status", 7), ("calls A", "count_a", 7),
    ("calls B", "count_b", 7), ("launches A", "launches_a", 10), ("launches B", "launches_b", 10),
    ("A ms", "time_us_a", 9), ("B ms", "time_us_b", 9), ("delta ms", "delta_us", 9),
    ("delta %", "delta_pct", 8), ("TFLOP/s A", "tflops_a", 9), ("TFLOP/s B", "tflops_b", 9),
    ("% peak A", "pct_peak_a", 8), ("% peak B", "pct_peak_b", 8), ("noise", "within_noise", 5),
)


def register(sub) -> None:
    """Add the `diff` subcommand."""
    p = sub.add_parser("diff", help="compare two traces (or run directories: all their spans) kernel by kernel")
    p.add_argument("a", help="trace file, or a run directory (its spans are averaged)")
    p.add_argument("b", help="trace file, or a run directory, compared with A")
    p.add_argument("--names", nargs=2, metavar=("NAME_A", "NAME_B"), help="labels for the two sides")
    p.add_argument("--match", choices=("normalized", "exact"), default="normalized",
                   help="match kernels by normalised name (default) or exact name")
    p.add_argument("--by", choices=("kernel", "op"), default="kernel",
                   help="rows per kernel, or per launching op and input shapes")
    analysis_options(p)
    p.add_argument("--top", type=int, help="rows to show (0 = all; default 20 in a table, all in CSV or JSON)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    gate_commands.add_gate_options(p)
    p.set_defaults(func=diff)


def diff(args) -> int:
    """Entry of `tb-gpuinsight diff`: the diff on stdout; with a gate, its verdict sets the exit status."""
    from .. import diff as diff_api

    names = tuple(args.names) if args.names else (os.path.basename(args.a.rstrip("/")),
                                                 os.path.basename(args.b.rstrip("/")))
    check_device(args)
    options = dict(dtype=args.dtype, devices_file=args.devices, device=args.device,
                   model_config=model_config_arg(args))
    if args.fail_if_slower is None:
        _print_diff(args, diff_api(args.a, args.b, names=names, match=args.match, by=args.by, **options))
        return 0
    result, verdict, attribution = gate_commands.diff_with_gate(args, names, options)  # each side read once
    try:
        _print_diff(args, result)
    except BrokenPipeError:  # output cut short (piped into `head`): the gate's verdict still sets the exit status
        pass
    return gate_commands.report_verdict(verdict, attribution)


def _print_diff(args, result) -> None:
    """The diff as a table, CSV or JSON on stdout."""
    top = rows_to_write(args)
    shown = result.rows[:top] if top > 0 else result.rows
    if args.format == "json":
        print(json.dumps({"summary": result.summary, "classes": result.classes, "rows": shown}, indent=1))
    elif args.format == "csv":
        print_csv(result.to_pandas().head(len(shown)).to_dict("records"))
    else:
        columns = ((args.by, "display_name", 56),) + DIFF_COLUMNS[1:]  # rows are kernels, or ops with --by op
        table = render_table(shown, columns, f"(no {args.by}s)")
        for line in _summary_lines(result.summary, result.classes) + [""] + table:
            print(line)


def _summary_lines(s: Dict, classes: List[Dict]) -> List[str]:
    per = lambda n: f" per span ({n} spans)" if n > 1 else ""  # noqa: E731
    lines = [f"A = {s['name_a']}: {ms(s['time_us_a'])} of GPU activity{per(s['spans_a'])}"
             f" on {', '.join(s['devices_a']) or 'no device'}",
             f"B = {s['name_b']}: {ms(s['time_us_b'])}{per(s['spans_b'])} on {', '.join(s['devices_b']) or 'no device'}"
             f" ({signed_ms(s['delta_us'])}, {_relative(s)}); {s['added']} kernels only in B, "
             f"{s['removed']} only in A" + (f", {s['within_noise']} changes within span-to-span noise"
                                           if s["within_noise"] else ""),
             ""]
    lines += ["by class:      A ms      B ms   delta ms   share of change"] if classes else \
        ["by class: none (no GPU activity on either side)"]
    for c in classes:  # no share of a total that did not change
        lines.append(f"  {c['class']:<13}{c['time_us_a'] / 1000:>8.3f}{c['time_us_b'] / 1000:>10.3f}"
                     f"{c['delta_us'] / 1000:>+11.3f}   {pct(c['share_of_change']) if s['delta_us'] else '-'}")
    if s.get("suggest"):
        lines += ["", f"note: {s['suggest']['why']} (--by {s['suggest']['by']})"]
    return lines


def _relative(s: Dict) -> str:
    """B's change as a share of A; said in words when A has no GPU time to be a share of."""
    if s["delta_pct"] is not None:
        return pct(s["delta_pct"])
    return "no change" if not s["delta_us"] else "A has no GPU activity"
