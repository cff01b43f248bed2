"""`tb-gpuinsight trend LOGDIR`: every run of a logdir in recording order, each with its median step time, noise
band, MFU and class split, marked regression / improvement / none against the runs before it (the rule is in
`analysis/diff/trend.py`), with the kernels behind each marked change.

    tb-gpuinsight trend LOGDIR                              # a table
    tb-gpuinsight trend LOGDIR --metric class:gemm --format json
    tb-gpuinsight trend LOGDIR --order-by batch_size --threshold 10
    tb-gpuinsight trend LOGDIR --store DIR                  # from a summary store: no trace read
"""
from __future__ import annotations

import json
from typing import Any, Dict, List

from .options import analysis_options, check_device
from .text import render_table

COLUMNS = (("run", "run", 32), ("steps", "steps", 5), ("step ms", "step_ms", 10), ("band ms", "band_ms", 9),
           ("MFU %", "mfu", 7), ("value", "value", 10), ("change", "change", 11))


def register(sub) -> None:
    """Add the `trend` subcommand."""
    p = sub.add_parser("trend", help="every run of a logdir in order, each marked regression / improvement / none "
                                     "against the runs before it, with the kernels behind each change")
    p.add_argument("logdir", help="a directory of runs")
    p.add_argument("--metric", default="step", metavar="step|kernel|mfu|class:NAME",
                   help="what is compared per step: step time (default), GPU kernel time, MFU, or the time of one "
                        "Overview class (class:gemm, class:communication, class:data_loading, ...)")
    p.add_argument("--threshold", default=5.0, type=float, metavar="PCT",
                   help="the smallest change that counts, in %% of the earlier runs' median (default 5)")
    p.add_argument("--order-by", metavar="HPARAM", help="order runs by this hparam's value instead of recording time")
    p.add_argument("--store", metavar="DIR|URL",
                   help="read the runs from this summary store (tb-gpuinsight summarize LOGDIR --store DIR, or the "
                        "plugin's cache directory) instead of their traces; runs it lacks are read from their files")
    p.add_argument("--format", choices=("table", "json"), default="table")
    analysis_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight trend`."""
    from .. import trend

    check_device(args)
    result = trend(args.logdir, metric=args.metric, threshold=args.threshold, order_by=args.order_by,
                   store=args.store, dtype=args.dtype, device=args.device, devices_file=args.devices)
    if args.format == "json":
        print(json.dumps(result, indent=1))
        return 0
    for line in render(result):
        print(line)
    return 0


def render(result: Dict[str, Any]) -> List[str]:
    """The trend as text: one row per run, then why each run is marked and the kernels behind each change."""
    rows = [dict(r, step_ms=_num(r["step_ms"]), band_ms=_num(r["band_ms"]), mfu=_num(r["mfu"], 2),
                 value=_num(r["value"])) for r in result["runs"]]
    out = [f"metric: {result['metric']}, threshold {result['threshold']:g}%, runs by {result['order']}", ""]
    out += render_table(rows, COLUMNS, "(no runs)") + [""]
    for r in result["runs"]:
        out.append(f"{r['run']}: {r['change']}: {r['why']}")
        for k in r.get("top", []):
            share = "" if k["share_of_change"] is None else f", {100 * k['share_of_change']:.0f}% of the change"
            out.append(f"    {k['kernel'][:80]} ({k['class']}): {k['a_ms']:,.3f} -> {k['b_ms']:,.3f} ms per step"
                       f" ({k['delta_ms']:+,.3f}{share})")
    out += [f"note: {p}" for p in result.get("problems", [])]
    out += ["", f"rule: {result['rule']}"]
    return out


def _num(x: Any, digits: int = 3) -> Any:
    return None if x is None else round(x, digits)
