"""Fuzz every CLI command (and, with --routes, every plugin route) over mutated real traces, ETs and tensor.traces.

    python benchmarks/fuzz.py [--cases 10000] [--seed 1] [--out DIR] [--routes N]

A case is one CLI run: a fresh mutation of a seed group (the samples and small corpus traces: huge numbers, strings
for numbers, wrong types, truncation, invalid UTF-8 in content and file names, empty and odd containers, corrupt
gzip) through one command, the commands in turn. Prints a table command x outcome (exit 0 / exit 2 / exit 1 of
`summarize` when a trace of its logdir failed / traceback / other); every run with an undocumented outcome is saved
under --out/<case>-<command>/ (its files and COMMAND.txt). --routes N also asks every route of the plugin (its WSGI
app in-process, no TensorBoard server) over N more cases and lists the distinct failures (undocumented statuses,
exceptions, 500s).
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_fuzz import OUTCOMES, ROUTE_STATUS, fuzz, fuzz_cli  # noqa: E402


def _table(table) -> list:
    width = max(len(c) for c in table)
    lines = [f"{'command':<{width}}" + "".join(f"{o:>11}" for o in OUTCOMES)]
    for command, counts in table.items():
        lines.append(f"{command:<{width}}" + "".join(f"{counts[o]:>11,}" for o in OUTCOMES))
    totals = {o: sum(c[o] for c in table.values()) for o in OUTCOMES}
    lines.append(f"{'all':<{width}}" + "".join(f"{totals[o]:>11,}" for o in OUTCOMES))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000, help="CLI runs (default 10,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="folder for failing reproducers")
    parser.add_argument("--routes", type=int, default=0, metavar="N", help="also N cases through every route")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:  # a service may still write its cache
        table = fuzz_cli(args.cases, args.seed, Path(tmp), saved=args.out, report=lambda l: print(l, flush=True))
        print(f"\n{args.cases:,} CLI runs in {time.time() - start:,.0f} s (seed {args.seed}); "
              f"reproducers of failures under {args.out}/")
        print("\n".join(_table(table)))
        if args.routes:
            logging.disable(logging.NOTSET)
            logging.getLogger("tb_gpuinsight").setLevel(logging.ERROR)
            done, distinct, hangs = fuzz(args.routes, None, args.seed, Path(tmp) / "routes",
                                         report=lambda l: print(l, flush=True))
            print(f"\nroutes: {done:,} cases through every route; distinct failures {len(distinct)}, failing "
                  f"cases {sum(distinct.values())}, hangs {hangs}")
            for failure, n in sorted(distinct.items(), key=lambda kv: -kv[1]):
                print(f"  {n:5d}  {failure}")
            print("\n".join(_route_table()))


def _route_table() -> list:
    """route x HTTP status (or "exception") over every request of the route fuzz."""
    statuses = sorted({s for counts in ROUTE_STATUS.values() for s in counts})
    width = max([len(r) for r in ROUTE_STATUS] + [5]) + 1
    lines = [f"{'route':<{width}}" + "".join(f"{s:>10}" for s in statuses)]
    for route, counts in sorted(ROUTE_STATUS.items()):
        lines.append(f"/{route:<{width - 1}}" + "".join(f"{counts.get(s, 0):>10,}" for s in statuses))
    return lines


if __name__ == "__main__":
    main()
