"""Our analysis against its peers on the same trace, as whole processes: orjson.loads of the JSON (the floor any
Python reader starts from), `tb-gpuinsight analyze --format csv --top 0`, and HolisticTraceAnalysis' trace parsing
plus kernel breakdown.

    python benchmarks/peers.py TRACE [--repeat N]

Each figure is a fresh process (interpreter start, imports, reading, work), the median of --repeat runs of its wall
time, CPU seconds (which a shared machine inflates less; with those of the processes it starts) and peak RSS (of its
largest process: HTA parses in a forked pool); the methods run in rounds, each once per round, since a shared
machine's speed drifts. Ours runs with its estimate memo warm (an untimed run first, in a cache of its own). Ratios
are against orjson.loads of the same run; our bytecode is compiled first, as an installed package has it. A peer that
is not installed says so (`pip install HolisticTraceAnalysis`, or the `bench` extra). The machine's load average is
printed beside."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(__file__))
from _measure import compile_bytecode, has_module, json_size  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ORJSON = ("import gzip, sys, orjson\n"
           "raw = open(sys.argv[1], 'rb').read()\n"
           "d = orjson.loads(gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw)\n")
_OURS = ("import sys\nfrom tb_gpuinsight.cli import main\n"
         "sys.exit(main(['analyze', '--format', 'csv', '--top', '0', sys.argv[1]]))\n")
# HTA reads every trace of a directory: the trace alone, linked into an empty one.
_HTA = ("import logging, os, sys, tempfile\nlogging.disable(logging.WARNING)\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        "d = tempfile.mkdtemp()\nos.symlink(sys.argv[1], os.path.join(d, os.path.basename(sys.argv[1])))\n"
        "kb = TraceAnalysis(trace_dir=d).get_gpu_kernel_breakdown(visualize=False)\n")
METHODS = [("orjson.loads", "orjson", _ORJSON), ("tb-gpuinsight analyze (csv, all rows)", "tb_gpuinsight", _OURS),
           ("HTA parse + kernel breakdown", "hta", _HTA)]


# Runs a method's code, then reports its CPU seconds and peak RSS with those of the processes it started and
# waited for (HTA parses a trace in a forked pool; we may decode in forked workers) as the last line of stderr.
_RUNNER = r"""
import json, resource, sys
code = sys.argv.pop(1)
try:
    exec(compile(code, "<method>", "exec"), {"__name__": "__method__"})
finally:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    sys.stderr.write("\n" + json.dumps({"cpu_s": cpu, "rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1e3}) + "\n")
"""


def run_once(code: str, path: str, cache: str) -> Dict[str, float]:
    """Wall seconds, CPU seconds and peak RSS (MB, of its largest process) of one fresh process running `code` on
    `path`; its output is discarded."""
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _RUNNER, code, path], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    lines = [line for line in out.stderr.splitlines() if line.strip()] or ["{}"]
    if out.returncode != 0:
        return {"error": (lines[-2] if len(lines) > 1 else "failed")[:160]}
    return {"wall_s": wall, **json.loads(lines[-1])}


def measure_all(path: str, repeat: int) -> List[Tuple[str, Optional[Dict[str, float]]]]:
    """(method, median run or None when not installed), running the methods in rounds."""
    present = [(name, code) for name, module, code in METHODS if has_module(module)]
    runs: Dict[str, List[Dict[str, float]]] = {name: [] for name, _ in present}
    cache = tempfile.mkdtemp(prefix="peers-cache-")  # our estimate memo, warmed by an untimed run: a user's case
    try:
        run_once(_OURS, path, cache)
        for _ in range(repeat):
            for name, code in present:
                runs[name].append(run_once(code, path, cache))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return [(name, _median(runs[name]) if name in runs else None) for name, _, _ in METHODS]


def _median(runs: List[Dict[str, float]]) -> Dict[str, float]:
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    return {key: statistics.median(r[key] for r in runs) for key in ("wall_s", "rss_mb", "cpu_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    compile_bytecode(ROOT)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"trace: {path}\nJSON size: {json_size(path) / 1e6:.1f} MB (file {os.path.getsize(path) / 1e6:.1f} MB); "
          f"median of {args.repeat}; load average {load} on {os.cpu_count()} cores\n")
    rows = measure_all(path, args.repeat)
    ref = dict(rows).get("orjson.loads") or {}
    print(f"{'method':<38}{'wall s':>9}{'cpu s':>8}{'peak RSS MB':>13}{'time/orjson':>13}{'cpu/orjson':>12}"
          f"{'RSS/orjson':>12}")
    for name, m in rows:
        if m is None:
            print(f"{name:<38}  not installed")
        elif "error" in m:
            print(f"{name:<38}  failed: {m['error']}")
        else:
            t, c, r = (m[k] / ref[k] if k in ref else float("nan") for k in ("wall_s", "cpu_s", "rss_mb"))
            print(f"{name:<38}{m['wall_s']:>9.2f}{m['cpu_s']:>8.2f}{m['rss_mb']:>13.0f}{t:>13.2f}{c:>12.2f}{r:>12.2f}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
