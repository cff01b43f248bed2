"""Serving under load from the first second: latency and errors while the logdir is still being analysed, then warm.

    python benchmarks/serve_load.py [TRACE] [--clients 32] [--first 60] [--warm 30] [--small 3]

The logdir holds TRACE (default: the corpus's biggest) and `--small` small corpus traces as runs of their own. The
plugin's server (a threaded WSGI server over a fresh cache, one analysis worker) starts, and at once `--clients`
clients request routes for `--first` seconds: /runs, and for every run /kernels and /overview (a run still being
analysed answers 503 "still loading", which counts as an answer, not an error). Then, once every run is analysed, the
same load for `--warm` seconds. Printed per phase: requests, answers by status, errors (5xx other than 503, broken
connections, timeouts), p50 / p99 / max latency of all answers and of /runs alone, and when each run was ready.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(__file__))
from plugin import CORPUS, _biggest_trace, _json_size  # noqa: E402

os.environ.setdefault("TB_GPUINSIGHT_FOLLOW_SYMLINKS", "1")  # the logdir links the corpus traces
TIMEOUT_S = 120.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, help="the big trace (default: the corpus's biggest)")
    for flag, default, what in (("--clients", 32, "concurrent clients"),
                                ("--first", 60.0, "seconds of load from the server's start"),
                                ("--warm", 30.0, "seconds of load once every run is analysed"),
                                ("--small", 3, "small corpus traces added as runs of their own")):
        ap.add_argument(flag, type=type(default), default=default, help=what)
    args = ap.parse_args()
    big = args.trace or _biggest_trace()
    with tempfile.TemporaryDirectory(prefix="gpuinsight-load-", ignore_cleanup_errors=True) as tmp:
        runs = _logdir(Path(tmp) / "logdir", big, args.small)
        print(f"trace: {big} ({big.stat().st_size / 1e6:.1f} MB on disk, {_json_size(big) / 1e6:.0f} MB of JSON) "
              f"and {len(runs) - 1} small runs; {args.clients} clients\n")
        _run(Path(tmp), runs, args)


def _logdir(root: Path, big: Path, small: int) -> List[str]:
    """Runs "big" and "small0".. (one linked corpus trace each); their names."""
    from tb_gpuinsight.logdir import KINETO, sniff

    picks = sorted((p for p in CORPUS.rglob("*.json*") if p.stat().st_size < 2e6 and sniff(p).kind == KINETO),
                   key=lambda p: p.stat().st_size)[-small:] if small else []
    runs = []
    for i, trace in enumerate([big] + picks):
        name = "big" if i == 0 else f"small{i - 1}"
        (root / name).mkdir(parents=True)
        suffix = ".pt.trace.json" + (".gz" if trace.name.endswith(".gz") else "")
        os.symlink(trace.resolve(), root / name / f"worker0.1700000000000000000{suffix}")
        runs.append(name)
    return runs


def _run(work: Path, runs: List[str], args) -> None:
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.serving import make_server

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    service = LogdirService(str(work / "logdir"), cache_dir=str(work / "cache"), workers=1, scan_interval=1.0)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(work / "logdir"), flags=None), service=service)
    server = make_server("127.0.0.1", 0, application.TensorBoardWSGI([plugin]), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/data/plugin/gpuinsight/"
    ready: Dict[str, float] = {}
    try:
        first = _load(base, runs, args.clients, args.first, ready, t0)
        _print("first", args.first, first)
        while len(ready) < len(runs) and time.perf_counter() - t0 < 1800:
            _note_ready(base, ready, t0)
            time.sleep(0.5)
        order = sorted(ready.items(), key=lambda kv: kv[1])
        print("ready after start: " + ", ".join(f"{r} {s:.1f} s" for r, s in order)
              + ("" if len(ready) == len(runs) else f"; not ready: {sorted(set(runs) - set(ready))}"))
        warm = _load(base, runs, args.clients, args.warm, ready, t0)
        _print("warm", args.warm, warm)
    finally:
        server.shutdown()
        service.stop()


def _load(base: str, runs: List[str], clients: int, seconds: float, ready: Dict[str, float],
          t0: float) -> List[Tuple[str, str, float]]:
    """(route, status, seconds) of every request `clients` clients made in `seconds`."""
    end = time.perf_counter() + seconds
    query = {r: urllib.parse.urlencode({"run": r, "worker": "worker0"}) for r in runs}
    urls = [("runs", base + "runs")] + [(route, f"{base}{route}?{query[r]}") for r in runs
                                        for route in ("kernels", "overview")]

    def client(k: int) -> List[Tuple[str, str, float]]:
        rng, out = random.Random(k), []
        while time.perf_counter() < end:
            route, url = urls[0] if rng.random() < 0.3 else rng.choice(urls)
            status, took, body = _get(url)
            out.append((route, status, took))
            if route == "runs" and status == "200":
                _ready_from(body, ready, t0)
        return out

    with ThreadPoolExecutor(clients) as pool:
        return [r for part in pool.map(client, range(clients)) for r in part]


def _get(url: str) -> Tuple[str, float, bytes]:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            body = response.read()
            status = str(response.status)
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), str(exc.code)
    except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out
        body, status = b"", f"failed ({type(getattr(exc, 'reason', exc)).__name__})"
    return status, time.perf_counter() - start, body


def _note_ready(base: str, ready: Dict[str, float], t0: float) -> None:
    status, _, body = _get(base + "runs")
    if status == "200":
        _ready_from(body, ready, t0)


def _ready_from(body: bytes, ready: Dict[str, float], t0: float) -> None:
    for run in json.loads(body).get("runs", []):
        if run.get("status") == "ready" and run["run"] not in ready:
            ready[run["run"]] = time.perf_counter() - t0


def _pct(times: List[float], q: float) -> float:
    return times[min(len(times) - 1, int(q * (len(times) - 1) + 0.5))] * 1e3 if times else float("nan")


def _print(phase: str, seconds: float, results: List[Tuple[str, str, float]]) -> None:
    statuses = Counter(s for _, s, _ in results)
    errors = sum(n for s, n in statuses.items() if not s.isdigit() or (s.startswith("5") and s != "503"))
    every = sorted(t for _, _, t in results)
    runs = sorted(t for r, _, t in results if r == "runs")
    print(f"{phase} {seconds:.0f} s: {len(results):,} requests, by status "
          + ", ".join(f"{s} {n:,}" for s, n in sorted(statuses.items())) + f"; errors {errors}")
    print(f"  all routes  p50 {_pct(every, 0.5):8.1f} ms  p99 {_pct(every, 0.99):8.1f} ms  max "
          f"{_pct(every, 1.0):8.1f} ms")
    print(f"  /runs       p50 {_pct(runs, 0.5):8.1f} ms  p99 {_pct(runs, 0.99):8.1f} ms  max "
          f"{_pct(runs, 1.0):8.1f} ms\n")


if __name__ == "__main__":
    main()
