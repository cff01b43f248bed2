"""Scale-out of `summarize`: N rank files on 1 and 2 workers, and the memory one worker needs for a big trace.

    python benchmarks/scale_out.py [TRACE] [--files 1 16 64] [--workers 1 2] [--engine dask|local]
    python benchmarks/scale_out.py [TRACE] --large-mb 500 [--memory-limit 2GB]

TRACE defaults to a real 15 MB (uncompressed) NCCL rank trace of the corpus. Each N makes a logdir of N links to
it named as ranks (`rank{i}.<stamp>.pt.trace.json.gz`: one trace per rank, as a 2,048-rank job writes), summarises
it into a fresh store and prints, side by side: total seconds, files per second, seconds per file (mean over files,
measured in the worker), speedup over 1 worker, the peak RSS of each worker, and what the plugin then costs from
the store: a fresh service's scan (no trace read) plus one rank's kernel table (`/kernels`), and the run's per-rank
report over all N ranks (`/ranks`).

--large-mb writes a trace of that many MB (the real trace repeated, `scale_trace.py`) and summarises it on one Dask
worker started with `--memory-limit` (its nanny kills the worker past 95% of it): it passes or it fails, and the
worker's peak RSS is printed. The last lines estimate a 1 TB / 2,048-rank logdir on K workers from the measured
per-file rate (MB of trace per second per worker).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CORPUS = os.environ.get("TB_GPUINSIGHT_CORPUS", os.path.join(os.path.dirname(ROOT), "shared", "traces"))
os.environ.setdefault("TB_GPUINSIGHT_FOLLOW_SYMLINKS", "1")  # its logdirs link the corpus traces
DEFAULT = os.path.join(CORPUS, "hta", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
STAMP = "1700000000000000000"


def rank_logdir(trace: str, n: int, root: str) -> str:
    run = os.path.join(root, "logdir", "job")
    os.makedirs(run)
    suffix = ".pt.trace.json.gz" if trace.endswith(".gz") else ".pt.trace.json"
    for i in range(n):
        os.symlink(os.path.abspath(trace), os.path.join(run, f"rank{i}.{STAMP}{suffix}"))
    return os.path.dirname(run)


def one_run(trace: str, n: int, workers: int, engine: str) -> Dict[str, float]:
    from tb_gpuinsight.store.batch import summarize

    tmp = tempfile.mkdtemp(prefix="tb-gpuinsight-scale-")
    try:
        logdir = rank_logdir(trace, n, tmp)
        store = os.path.join(tmp, "store")
        report = summarize(logdir, store, engine=engine, workers=workers)
        if report.failed:
            raise SystemExit(f"failed: {report.failed[0]}")
        peaks: Dict[int, float] = {}
        for s in report.stats:
            peaks[s["pid"]] = max(peaks.get(s["pid"], 0), s["peak_rss"])
        return {"total_s": report.seconds, "per_file_s": sum(s["seconds"] for s in report.stats) / n,
                "cpu_per_file_s": sum(s["cpu_seconds"] for s in report.stats) / n,
                "peaks_mib": sorted(p / 2**20 for p in peaks.values()), **cold_view_times(logdir, store)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cold_view_times(logdir: str, store: str) -> Dict[str, float]:
    """`view_times` in a fresh interpreter: no answer or report cached in memory by an earlier run."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--view", logdir, store],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def view_times(logdir: str, store: str) -> Dict[str, float]:
    """Seconds for a fresh plugin over the store: scan, one rank's /kernels, the run's /ranks."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    t0 = time.perf_counter()
    service = LogdirService(logdir, store=store, workers=0, scan_interval=3600)
    service.scan()
    scan = time.perf_counter() - t0
    client = Client(application.TensorBoardWSGI(
        [GpuInsightPlugin(base_plugin.TBContext(logdir=logdir, flags=None), service=service)]))
    out = {"scan_s": scan}
    for name, route, query in (("rank_view_s", "kernels", {"run": "job", "worker": "rank0", "span": "all"}),
                               ("ranks_view_s", "ranks", {"run": "job", "span": "all"})):
        t0 = time.perf_counter()
        response = client.get(f"/data/plugin/gpuinsight/{route}", query_string=query)
        if response.status_code != 200:
            raise SystemExit(f"/{route}: {response.status_code} {response.get_data(as_text=True)[:200]}")
        out[name] = time.perf_counter() - t0
    return out


def uncompressed_mb(trace: str) -> float:
    from tb_gpuinsight.trace.source import read_all

    return len(read_all(trace)) / 1e6


def scaling(args) -> None:
    mb = uncompressed_mb(args.trace)
    print(f"trace {os.path.basename(args.trace)}: {os.path.getsize(args.trace) / 1e6:.1f} MB on disk, "
          f"{mb:.1f} MB of JSON; engine {args.engine}; {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f} at start")
    print(f"{'files':>6}{'workers':>8}{'total s':>9}{'files/s':>9}{'s/file':>8}{'cpu s/file':>11}{'speedup':>8}"
          f"{'peak RSS per worker MiB':>26}{'scan s':>8}{'rank view s':>12}{'ranks view s':>13}")
    rates: List[float] = []
    for n in args.files:
        base = None
        for w in args.workers:
            r = one_run(args.trace, n, w, args.engine)
            base = base or r["total_s"]
            rates.append(r["cpu_per_file_s"])
            peaks = ", ".join(f"{p:.0f}" for p in r["peaks_mib"])
            print(f"{n:>6}{w:>8}{r['total_s']:>9.1f}{n / r['total_s']:>9.2f}{r['per_file_s']:>8.2f}"
                  f"{r['cpu_per_file_s']:>11.2f}"
                  f"{base / r['total_s']:>8.2f}{peaks:>26}{r['scan_s']:>8.2f}{r['rank_view_s']:>12.3f}"
                  f"{r['ranks_view_s']:>13.3f}", flush=True)
    per_file = sorted(rates)[len(rates) // 2]
    rate = mb / per_file  # MB of JSON per CPU second: a worker with a core of its own
    print(f"\nmedian {per_file:.2f} CPU s per {mb:.1f} MB file = {rate:.1f} MB/s per worker with a core of its own "
          f"(CPU time, not wall time: this machine's other load does not inflate it)")
    tb, ranks = 1e6, 2048
    for k in (1, 16, 64, 256):
        print(f"1 TB / {ranks} ranks (~{tb / ranks:.0f} MB each) on {k:>3} workers: "
              f"{tb / rate / k / 3600:.2f} h (compute only; reading from storage adds its transfer time)")


def large(args) -> None:
    from distributed import LocalCluster

    from tb_gpuinsight.store.batch import summarize

    tmp = tempfile.mkdtemp(prefix="tb-gpuinsight-large-")
    try:
        run = os.path.join(tmp, "logdir", "big")
        os.makedirs(run)
        big = os.path.join(run, f"rank0.{STAMP}.pt.trace.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "scale_trace.py"), args.trace, big,
                        "--target-mb", str(args.large_mb)], check=True)
        size = os.path.getsize(big) / 1e6
        with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, memory_limit=args.memory_limit,
                          dashboard_address=None) as cluster:
            report = summarize(os.path.dirname(run), os.path.join(tmp, "store"), engine="dask",
                               scheduler=cluster.scheduler_address, max_trace_gb=None)
        if report.failed:
            print(f"{size:.0f} MB trace on one worker limited to {args.memory_limit}: FAILED "
                  f"({report.failed[0][1]})")
            return
        s = report.stats[0]
        print(f"{size:.0f} MB trace on one worker limited to {args.memory_limit}: {s['seconds']:.1f} s wall, "
              f"{s['cpu_seconds']:.1f} CPU s ({size / s['cpu_seconds']:.1f} MB/s per core), worker peak RSS "
              f"{s['peak_rss'] / 2**20:.0f} MiB ({s['peak_rss'] / 1e6 / size:.2f}x the JSON)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=DEFAULT)
    ap.add_argument("--files", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--engine", choices=("dask", "local"), default="dask")
    ap.add_argument("--large-mb", type=float, default=None)
    ap.add_argument("--memory-limit", default="2GB")
    ap.add_argument("--view", nargs=2, metavar=("LOGDIR", "STORE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.view:
        print(json.dumps(view_times(*args.view)))
        return
    if not os.path.isfile(args.trace):
        raise SystemExit(f"{args.trace}: not found (set TB_GPUINSIGHT_CORPUS or pass a trace)")
    large(args) if args.large_mb else scaling(args)


if __name__ == "__main__":
    main()
