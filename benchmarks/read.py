"""Reading speed and memory: stdlib json.loads, orjson.loads and tb_gpuinsight.load on the same trace, side by side;
then one big trace decoded on 1 process against several.

    python benchmarks/read.py TRACE [TRACE ...] [--repeat N] [--workers 1 2 4] [--decode-only]

Each method runs in a fresh process and includes reading (and inflating) the file, as a user's load would.
The decode table loads the trace with `load_kineto(path, workers=N)` for each N of --workers (default 1 2; a
count above the machine's cores is capped to them): wall time, its speedup over 1 process, peak RSS of the parent
and of the largest worker, CPU seconds of the parent and of all workers together, and the parent's share:
the stages this process spends alone (inflating, cutting and copying batches, receiving parts, the array's last
stretch, merging) over the 1-process wall time. From CPU seconds (which a shared machine does not inflate) it
estimates the wall time on 2 and 4 cores: the parent's streaming work overlaps the workers', the merge does not.
The machine's load average is printed before and after: on a shared machine, compare CPU seconds too.
Targets: our load at most 1.0x orjson's wall time, peak RSS at most 2x the JSON; 1 GB on 4 cores 3x faster than 1.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(__file__))
from _measure import has_module, json_size, measure, print_table  # noqa: E402

# Baselines read the file the plain way a user would: whole bytes, inflated with gzip when compressed.
_READ = ("import gzip\n"
         "def read_all(p):\n"
         "    raw = open(p, 'rb').read()\n"
         "    return gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw\n")

# One decode in a fresh process: wall, this process's and its workers' peak RSS and CPU, the stages' split.
_DECODE = r"""
import json, resource, sys, time
from tb_gpuinsight.trace import kineto, stages
path, workers = sys.argv[1], int(sys.argv[2])
stages.reset()
before = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
trace = kineto.load_kineto(path, workers=workers)
wall = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"wall_s": wall, "rss_kb": me.ru_maxrss, "worker_rss_kb": kids.ru_maxrss,
                  "cpu_s": cpu, "worker_cpu_s": kids.ru_utime + kids.ru_stime,
                  "events": trace.meta.event_count, "stages": stages.totals()}))
"""
# Stages of the parent that overlap the workers (the pipeline), and those after the workers are done.
_STREAMING = ("inflate", "fan out", "receive parts")
_IDLE = ("wait for workers",)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=3, help="runs per method (best for the read table, median for "
                                                          "the decode table)")
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="decoding processes to compare")
    ap.add_argument("--decode-only", action="store_true", help="only the 1-vs-N decode table")
    args = ap.parse_args()
    workers = sorted(set([1] + args.workers))
    print(f"load average before: {_load_average()}  (cores: {os.cpu_count()})")
    for trace in args.traces:
        path = os.path.abspath(trace)
        json_bytes = json_size(path)  # block by block: the parent must not hold the trace (children's RSS)
        print(f"\ntrace: {path}\nJSON size: {json_bytes / 1e6:.1f} MB (file {os.path.getsize(path) / 1e6:.1f} MB)\n")
        if not args.decode_only:
            _read_table(path, json_bytes, args.repeat)
            print()
        _decode_table(path, json_bytes, workers, args.repeat)
    print(f"\nload average after: {_load_average()}")


def _read_table(path: str, json_bytes: int, repeat: int) -> None:
    setup_read = _READ + f"path = {path!r}\n"
    rows = [("json.loads (stdlib)", measure("import json\n" + setup_read, "d = json.loads(read_all(path))", repeat))]
    if has_module("orjson"):
        rows.append(("orjson.loads", measure("import orjson\n" + setup_read, "d = orjson.loads(read_all(path))",
                                             repeat)))
    rows.append(("tb_gpuinsight.load", measure(f"import tb_gpuinsight\npath = {path!r}",
                                               "t = tb_gpuinsight.load(path)", repeat)))
    print_table("read", rows, json_bytes, "orjson.loads" if "orjson.loads" in dict(rows) else "json.loads (stdlib)")


def _decode(path: str, workers: int, repeat: int) -> Optional[Dict]:
    """The median run (by wall time) of `repeat` fresh processes; None when the load failed."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _DECODE, path, str(workers)], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if out.returncode != 0:
            print(f"  {workers} processes failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
            return None
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    runs.sort(key=lambda r: r["wall_s"])
    return runs[len(runs) // 2]


def _decode_table(path: str, json_bytes: int, workers: List[int], repeat: int) -> None:
    rows = [(n, _decode(path, n, repeat)) for n in workers]
    base = dict(rows).get(1)
    print(f"decode on several processes (load_kineto(workers=N), median of {repeat}; RSS/JSON of {json_bytes / 1e6:.0f}"
          " MB)")
    print(f"{'processes':>9}{'wall s':>9}{'speedup':>9}{'RSS MB':>9}{'RSS/JSON':>9}{'worker RSS MB':>15}"
          f"{'cpu s':>8}{'worker cpu s':>14}{'parent share':>14}")
    for n, r in rows:
        if r is None:
            continue
        speedup = base["wall_s"] / r["wall_s"] if base else float("nan")
        share = _parent_busy(r) / base["wall_s"] if base else float("nan")
        print(f"{n:>9}{r['wall_s']:>9.2f}{speedup:>9.2f}{r['rss_kb'] / 1e3:>9.0f}{r['rss_kb'] * 1e3 / json_bytes:>9.2f}"
              f"{r['worker_rss_kb'] / 1e3:>15.0f}{r['cpu_s']:>8.2f}{r['worker_cpu_s']:>14.2f}{share:>14.2f}")
    fanned = [(n, r) for n, r in rows if r and n > 1 and r["worker_cpu_s"] > 0]
    if base and fanned:
        _estimate(base, *fanned[-1])


def _parent_busy(run: Dict) -> float:
    """Seconds the parent spends on its own work (every stage but waiting for workers)."""
    return sum(v for k, v in run["stages"].items() if k not in _IDLE)


def _estimate(base: Dict, n: int, run: Dict) -> None:
    """The stage split of the N-process run, and the wall times on more cores it implies. CPU seconds, not wall
    time: on a shared machine they count the work, not the waiting for a core."""
    stages = run["stages"]
    streaming_wall = sum(stages.get(k, 0.0) for k in _STREAMING)
    streaming = run["cpu_s"] * streaming_wall / max(_parent_busy(run), 1e-9)  # the parent's CPU, split as its stages
    after = run["cpu_s"] - streaming  # the array's last stretch, the header, merging: after the workers
    work, serial_cpu = run["worker_cpu_s"], base["cpu_s"]
    print(f"\nsplit of the {n}-process run (wall s): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(stages.items())))
    print(f"CPU s: 1 process {serial_cpu:.2f}; {n} processes: parent streaming (inflate, cut, copy, receive) "
          f"{streaming:.2f}, parent after the workers (last stretch, merge) {after:.2f}, workers {work:.2f}")
    fraction = (streaming + after) / serial_cpu
    total = streaming + after + work  # the fan-out's own CPU: a stricter 1-core baseline when it is below serial_cpu
    for cores in (2, 4):
        # The parent streams while the workers decode; all of it shares the cores; the merge comes after.
        wall = max(streaming, work / cores, (streaming + work) / cores) + after
        amdahl = 1 / (fraction + (1 - fraction) / cores)
        print(f"{cores} cores: estimated wall {wall:.2f} s, speedup {serial_cpu / wall:.2f}x over 1 process "
              f"({total / wall:.2f}x over the same work on one core) (pipeline); Amdahl with the parent's share "
              f"{fraction:.2f} as serial fraction: {amdahl:.2f}x")


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
