"""`tb-gpuinsight ranks RUN [--format table|json|csv] [--part ...] [--cycle N]`: the multi-rank view of a run."""
from __future__ import annotations

import json
import sys
from typing import List

from ..analysis.ranks.report import IDLE_CAUSES, Report, from_run_dir
from ..estimate.devices import load_datasheet
from ..terminal import raw_output
from .text import elide

_PARTS = ("ranks", "steps", "collectives", "instances", "stragglers")


def register(sub) -> None:
    """Add the `ranks` subcommand."""
    p = sub.add_parser("ranks", help="distributed run: per-rank breakdown, collectives with bus bandwidth, "
                                     "straggler")
    p.add_argument("run", metavar="RUN", help="run directory holding one trace per rank")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--part", choices=_PARTS, default=None,
                   help="with csv (default ranks) or json: only this part")
    p.add_argument("--cycle", type=int, default=-1, help="n-th profiling cycle of every rank (-1: the latest)")
    p.add_argument("--devices", metavar="FILE", help="extra datasheet rows (JSON)")
    p.set_defaults(func=_cmd_ranks)


def _cmd_ranks(args) -> int:
    report = from_run_dir(args.run, args.cycle, load_datasheet(args.devices))
    if args.format == "json":
        data = report.to_dict(instance_limit=10 ** 9)
        json.dump(data[args.part] if args.part else data, sys.stdout, indent=1)
        print()
    elif args.format == "csv":
        with raw_output(sys.stdout):  # CSV keeps the values, quoted by its encoder
            report.to_pandas(args.part or "ranks").to_csv(sys.stdout, index=False)
    else:
        print("\n".join(describe(report)))
    return 0


def describe(report: Report) -> List[str]:
    """Human lines: ranks table, collectives table, stragglers, problems."""
    lines = [f"world size {report.world_size}, {len(report.ranks)} rank trace(s), collectives from "
             f"{'GPU kernels' if report.source == 'kernel' else 'CPU (gloo) annotations'}; "
             f"interconnect {report.interconnect.get('how')}", "",
             f"{'rank':>5} {'worker':<22}{'step ms':>9}{'compute':>9}{'comm exp':>9}{'comm ovl':>9}{'memcpy':>8}"
             f"{'idle':>8}{'host':>7}{'launch':>7}{'sync':>7}{'data':>7}{'other':>7}"
             f"{'wait':>8}{'last':>6}{'total waited ms':>17}"]
    for r in report.ranks:
        lines.append(f"{r['rank']:>5} {elide(r['worker'], 21):<22}{_ms(r['step_us']):>9}{_ms(r['compute_us']):>9}"
                     f"{_ms(r['comm_exposed_us']):>9}{_ms(r['comm_overlapped_us']):>9}{_ms(r['memcpy_us']):>8}"
                     f"{_ms(r['idle_us']):>8}{_causes(r)}"
                     f"{_ms(r['comm_wait_us']):>8}{r['arrived_last']:>6}"
                     f"{_ms(r['others_waited_us']):>17}")
    lines += ["", "(ms per step; idle split by cause as in the Overview: host-bound, launch-bound, synchronisation, "
              "data loading, other; '-' on a CPU-only trace; wait = time in collectives waiting for the last rank "
              "to arrive, collectives in flight together counted once; last = collectives it arrived last at; total "
              "waited = what the other ranks waited for it inside their steps, summed over steps and ranks: a "
              "total, not per step)", "",
              f"{'collective':<15}{'dtype':<10}{'bytes':>12}{'n':>4} {'algo':<12}{'count':>6}{'total ms/rank':>14}"
              f"{'wait ms/call':>13}{'xfer us/call':>13}{'algbw GB/s':>11}{'busbw GB/s':>11}{'% link':>8}"]
    for c in report.collectives:
        pct = f"{c['pct_link']:.1%}" if c["pct_link"] is not None else "-"
        lines.append(f"{c['kind']:<15}{c['dtype'][:9]:<10}{_num(c['bytes'], '.0f'):>12}{c['group_size']:>4} "
                     f"{elide(c['algo'], 12):<12}{c['count']:>6}{_ms(c['total_time_per_rank_us']):>14}"
                     f"{_ms(c['wait_us']):>13}{_num(c['transfer_us'], '.1f'):>13}{_num(c['algbw_gbps'], '.3f'):>11}"
                     f"{_num(c['busbw_gbps'], '.3f'):>11}{pct:>8}")
    lines.append("")
    for s in report.stragglers:
        lines.append(f"straggler: {s['worker']}: {s['evidence']}")
    if not report.stragglers:
        lines.append("straggler: none (no rank keeps the others waiting at most of the collectives' wait)")
    for p in report.problems:
        lines.append(f"note: {p}")
    return lines


def _causes(row) -> str:
    return "".join(f"{_ms(row[m + '_us']):>7}" for m, _ in IDLE_CAUSES)


def _ms(us) -> str:
    return "-" if us is None else f"{us / 1e3:.3f}"


def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)
