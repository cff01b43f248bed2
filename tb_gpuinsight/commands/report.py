"""`tb-gpuinsight report TRACE|RUN`: one page of the headline figures, for people (md, html), CI and agents (json);
and the regression gate of `tb-gpuinsight diff A B --fail-if-slower PCT`.

    tb-gpuinsight report RUN                         # Markdown on stdout
    tb-gpuinsight report RUN --baseline OLD_RUN --format html -o report.html
    tb-gpuinsight report TRACE --format json         # schema in docs/reference.md
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, Tuple

from ..errors import ConfigError
from ..terminal import atomic_file
from .options import analysis_options, check_device, check_output, model_config_arg

EXIT_SLOWER = 1
EXIT_UNDECIDED = 3  # too few steps to judge: neither a pass nor a failure


def register(sub) -> None:
    """Add the `report` subcommand."""
    p = sub.add_parser("report", help="one page: step time, MFU, ranked recommendations, wasteful kernels, memory, "
                                      "ranks, changes from a baseline")
    p.add_argument("path", help="a Kineto trace, or a run directory")
    p.add_argument("--baseline", metavar="TRACE|RUN", help="compare with this trace or run directory")
    p.add_argument("--worker", help="the worker of a run directory (default: the first)")
    p.add_argument("--format", choices=("md", "json", "html"), default="md")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of stdout")
    analysis_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight report`."""
    from ..reporting import make_report, render

    check_device(args)
    for path in (args.path, args.baseline):
        if path is not None and not os.path.exists(path):
            raise ConfigError(f"{path}: no such file or directory")
    if args.output:
        check_output(args.path, args.output)
    data = make_report(args.path, args.baseline, worker=args.worker, dtype=args.dtype, device=args.device,
                       devices_file=args.devices, model_config=model_config_arg(args))
    text = render(data, args.format)
    if args.output:
        with atomic_file(args.output, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


# ------------------------------------------------------------------------------------- diff --fail-if-slower

def add_gate_options(p) -> None:
    """`--fail-if-slower PCT` and `--metric` on `tb-gpuinsight diff`."""
    from ..reporting.gate import METRICS, MIN_STEPS

    p.add_argument("--fail-if-slower", type=float, metavar="PCT",
                   help="exit 1 when B's median step is worse than A's by more than PCT %% and beyond the noise "
                        "band (2 robust sigma of the noisier side), the first step of each span and hiccups left "
                        f"out; exit 3 with fewer than {MIN_STEPS} kept steps a side; one line on stderr says why")
    p.add_argument("--metric", choices=METRICS, default="step",
                   help="what --fail-if-slower compares per step: step time (default), GPU kernel time, or MFU")


def diff_with_gate(args, names: Tuple[str, str], options: Dict[str, Any]):
    """The diff of A and B with each side read once, the gate's verdict on them and what accounts for the change
    (None when the verdict is not a change beyond the noise)."""
    from ..analysis.diff.attribution import attribute
    from ..analysis.diff.compare import diff
    from ..reporting.gate import check_threshold, gate
    from ..reporting.sides import side_from_path

    check_threshold(args.fail_if_slower)  # before any trace is read
    a = side_from_path(args.a, label=names[0], **options)
    b = side_from_path(args.b, label=names[1], **options)
    try:
        result = diff(a.eff, b.eff, names=names, match=args.match, by=args.by)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    verdict = gate(a.overview, b.overview, args.metric, args.fail_if_slower, names)
    changed = verdict.change.comparison.verdict(args.fail_if_slower) in ("regression", "improvement")
    return result, verdict, attribute(result, len(a.overview.steps), len(b.overview.steps)) if changed else None


def report_verdict(verdict, attribution=None) -> int:
    """Print the gate's line on stderr (and, for a change beyond the noise, a second line: what accounts for it);
    the exit status: 1 when slower beyond the threshold and the noise, 3 when too few steps to judge, else 0."""
    from ..analysis.diff.attribution import summary_line
    from ..reporting.gate import FAIL, UNDECIDED

    print(f"tb-gpuinsight: gate: {verdict.line}", file=sys.stderr)
    if attribution is not None and attribution["classes"]:  # a CPU-only run has no kernel to name
        print(f"tb-gpuinsight: gate: behind the change: {summary_line(attribution)}", file=sys.stderr)
    return {FAIL: EXIT_SLOWER, UNDECIDED: EXIT_UNDECIDED}.get(verdict.status, 0)
