"""Fuzz every CLI command and every plugin route over mutated real traces, ETs and tensor.traces.

    python benchmarks/fuzz.py [--cases 10000] [--seed 1] [--jobs N] [--route-every 10] [--subprocess-every 100]
                              [--out DIR]

A case is a fresh mutation of a seed group (the samples and small corpus traces; tests/test_fuzz.py's random
mutations and tests/fuzz_cases.py's targeted ones: 401-digit device properties and base times, durations of 1e308
and 1e400, `{"traceEvents":[1,2,3]}`, invalid UTF-8 file names, a rank of 2**70, 10 MB names, symlink loops, FIFOs,
directories and sparse files named like traces; terminal escapes in names, ProfilerStep numbers past int64, memory
on 300 devices, links out of the folder, bz2 under a .gz name, a 100 KB gzip file name). Each case runs through one
CLI command in this process (the commands in turn); every --subprocess-every-th run is repeated as a real
`tb-gpuinsight` process, every other one with its stdout on /dev/full (one line and exit 1 expected); every
--route-every-th case also goes through the Python API and every route of the plugin (its WSGI app in-process,
analysis included). A raw control character in text output and a partial file left behind count as failures.
Prints the totals (tracebacks, HTTP 500s, errors of more than one line, raw control bytes, the slowest run), the
command x outcome and route x status tables, and each distinct failure; reproducers of CLI failures are kept under
--out/<case>-<command>/.
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz_cli import NOT_ONE_LINE, OUTCOMES, RAW_CONTROL, TRACEBACK, CliFuzz, alarms  # noqa: E402
from tests.test_fuzz import (CASE_TIMEOUT_S, ROUTE_STATUS, SLOWEST_ROUTE, Hang, make_case, run_case,  # noqa: E402
                             seeds)


class RouteTally:
    """The route side: cases run, distinct failures with their counts, hangs."""

    def __init__(self, work: Path, report) -> None:
        self.work, self.report = work, report
        self.reference = seeds()[0][1]
        self.cases = self.hangs = 0
        self.distinct: Dict[str, int] = {}

    def run(self, case: int, label: str, files: Dict[str, object]) -> None:
        signal.alarm(CASE_TIMEOUT_S)
        try:
            failures = run_case(files, self.work, self.reference)
        except Hang:
            failures = [f"hang (over {CASE_TIMEOUT_S} s)"]
            self.hangs += 1
        finally:
            signal.alarm(0)
        self.cases += 1
        for f in set(failures):
            if f not in self.distinct:
                self.report(f"case {case} ({label}) routes: {f}")
            self.distinct[f] = self.distinct.get(f, 0) + 1


def _tally(cli: CliFuzz, routes: RouteTally, done: int) -> Dict:
    """What one process of the run counted (plain data: it comes back from a forked shard)."""
    return {"done": done, "table": cli.table, "subprocess_runs": cli.subprocess_runs,
            "subprocess_failures": cli.subprocess_failures, "slowest": cli.slowest, "distinct": routes.distinct,
            "hangs": routes.hangs, "route_cases": routes.cases, "route_status": dict(ROUTE_STATUS),
            "slowest_route": SLOWEST_ROUTE[0]}


def _add_counts(into: Dict, counts: Dict) -> None:
    for key, n in counts.items():
        if isinstance(n, dict):
            _add_counts(into.setdefault(key, {}), n)
        else:
            into[key] = into.get(key, 0) + n


def _merge(parts: List[Dict]) -> Dict:
    """The shards' tallies as one run's."""
    out: Dict = {"slowest": max(p["slowest"] for p in parts), "slowest_route": max(p["slowest_route"] for p in parts)}
    for key in ("done", "subprocess_runs", "subprocess_failures", "hangs", "route_cases"):
        out[key] = sum(p[key] for p in parts)
    for key in ("table", "distinct", "route_status"):
        out[key] = {}
        for p in parts:
            _add_counts(out[key], p[key])
    return out


def _totals(args, t: Dict, seconds: float) -> List[str]:
    counts = {o: sum(c[o] for c in t["table"].values()) for o in OUTCOMES}
    failures, statuses = t["distinct"], t["route_status"]
    route_500 = sum(c.get("500", 0) + c.get("exception", 0) for c in statuses.values())
    route_tracebacks = sum(n for f, n in failures.items() if " at " in f)  # an exception: type at project frame
    multi_line = sum(n for f, n in failures.items() if f.endswith(("error of several lines", "multi-line error message")))
    rows = [("cases", f"{t['done']:,} of {args.cases:,} (seed {args.seed}, {args.jobs} process(es), {seconds:,.0f} s)"),
            ("commands run", f"{sum(counts.values()):,} in process + {t['subprocess_runs']:,} as processes"),
            ("routes requested", f"{sum(sum(c.values()) for c in statuses.values()):,} over {t['route_cases']:,} "
                                 f"cases ({len(statuses)} routes)"),
            ("tracebacks", f"{counts[TRACEBACK] + route_tracebacks:,} (CLI {counts[TRACEBACK]:,}, API and routes "
                           f"{route_tracebacks:,}, processes {t['subprocess_failures']:,} failed)"),
            ("HTTP 500s", f"{route_500:,}"),
            ("non-one-line errors", f"{counts[NOT_ONE_LINE] + multi_line:,}"),
            ("raw control bytes", f"{counts[RAW_CONTROL]:,} runs printed one unescaped (CSV output excepted)"),
            ("other failures", f"{counts['other']:,} CLI, {sum(failures.values()) - route_tracebacks - multi_line:,} route cases, "
                               f"{t['hangs']} hangs"),
            ("slowest command", f"{t['slowest'][0]:.2f} s ({t['slowest'][1]})"),
            ("slowest route", f"{t['slowest_route'][0]:.2f} s ({t['slowest_route'][1]})")]
    return [f"{k:<20} {v}" for k, v in rows]


def _command_table(table) -> List[str]:
    width = max(len(c) for c in table)
    lines = [f"{'command':<{width}}" + "".join(f"{o:>12}" for o in OUTCOMES)]
    for command, counts in table.items():
        lines.append(f"{command:<{width}}" + "".join(f"{counts[o]:>12,}" for o in OUTCOMES))
    totals = {o: sum(c[o] for c in table.values()) for o in OUTCOMES}
    lines.append(f"{'all':<{width}}" + "".join(f"{totals[o]:>12,}" for o in OUTCOMES))
    return lines


def _route_table(by_route: Dict[str, Dict[str, int]]) -> List[str]:
    """route x HTTP status (or "exception") over every request."""
    statuses = sorted({s for counts in by_route.values() for s in counts})
    width = max([len(r) for r in by_route] + [5]) + 1
    lines = [f"{'route':<{width}}" + "".join(f"{s:>10}" for s in statuses)]
    for route, counts in sorted(by_route.items()):
        lines.append(f"/{route:<{width - 1}}" + "".join(f"{counts.get(s, 0):>10,}" for s in statuses))
    return lines


def _shard(args, shard: int) -> Dict:
    """Cases shard, shard + jobs, shard + 2 * jobs, ... in this process; its tally."""
    report = lambda line: print(line, flush=True)  # noqa: E731
    groups, start, done = seeds(), time.time(), 0
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, alarms():
        cli = CliFuzz(Path(tmp) / "cli", args.out, report, args.subprocess_every)
        routes = RouteTally(Path(tmp) / "routes", report)
        routes.run(-1, "warm-up", dict(routes.reference))  # imports, the reference's summary: not counted
        ROUTE_STATUS.clear()
        routes.cases, SLOWEST_ROUTE[0] = 0, (0.0, "")
        for case in range(shard, args.cases, args.jobs):
            if args.max_seconds is not None and time.time() - start > args.max_seconds:
                report(f"shard {shard}: stopped after {args.max_seconds:,.0f} s")
                break
            rng = random.Random(f"{args.seed}:{case}")  # each case its own: reproducible alone, whatever --jobs
            label, group = groups[case % len(groups)]
            files = make_case(group, rng, rename=True)
            cli.run(case, label, files, rng.choice)
            if args.route_every and case % args.route_every == 0:
                routes.run(case, label, files)
            done += 1
            if done % 250 == 0:
                report(f"... shard {shard}: {done:,} cases, {time.time() - start:,.0f} s")
        return _tally(cli, routes, done)


def _in_processes(args) -> List[Dict]:
    """The shards in forked processes that may start processes of their own (a Pool's daemonic workers may not:
    `summarize` and the decode fan out)."""
    context, shards = multiprocessing.get_context("fork"), []
    for shard in range(args.jobs):
        here, there = context.Pipe(duplex=False)
        process = context.Process(target=lambda k=shard, conn=there: conn.send(_shard(args, k)))
        process.start()
        there.close()
        shards.append((process, here))
    tallies = []
    for shard, (process, conn) in enumerate(shards):
        try:
            tallies.append(conn.recv())
        except EOFError:
            print(f"shard {shard} died (exit {process.join() or process.exitcode}): its cases are not counted")
        process.join()
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run the cases in N forked processes side by side (case i in process i mod N)")
    parser.add_argument("--route-every", type=int, default=10, metavar="K", help="every K-th case through the routes")
    parser.add_argument("--subprocess-every", type=int, default=100, metavar="K",
                        help="every K-th CLI run also as a process")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="folder for failing reproducers")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop after this long (the tables give the exact number of cases run)")
    args = parser.parse_args()
    logging.getLogger("tb_gpuinsight").setLevel(logging.ERROR)  # the routes' logged 500s are counted, not printed
    logging.getLogger("tb_gpuinsight").propagate = False
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if args.jobs <= 1:
        args.jobs = 1
        tally = _shard(args, 0)
    else:
        tally = _merge(_in_processes(args))
    print()
    print("\n".join(_totals(args, tally, time.time() - start)))
    print()
    print("\n".join(_command_table(tally["table"])))
    print()
    print("\n".join(_route_table(tally["route_status"])))
    for failure, n in sorted(tally["distinct"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {failure}")


if __name__ == "__main__":
    main()
