"""Plugin responsiveness: cold time to the first kernel table, warm time after a restart, route latency under load.

    python benchmarks/plugin.py [TRACE] [--clients 20] [--requests 200] [--downloads 3]

TRACE defaults to the biggest trace of the corpus. Cold: a fresh cache, the trace analysed by a worker process,
next to orjson.loads of the same file. Warm: a new service over the same cache (a TensorBoard restart).
Latency: p50 / p95 of every JSON route (the Memory tab's too when the trace has memory events) with 20 concurrent
clients over HTTP (a threaded WSGI server), while `--downloads` clients download the span's augmented trace
(/trace) over and over; the server process's peak RSS (VmHWM: this process is the TensorBoard side) is printed
with the download times.
Targets: warm under 0.2 s; route p95 under 100 ms; RSS independent of the trace size during downloads.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _measure import has_module, measure  # noqa: E402
from read import _READ  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("TB_GPUINSIGHT_CORPUS", ROOT.parent / "shared" / "traces"))
os.environ.setdefault("TB_GPUINSIGHT_FOLLOW_SYMLINKS", "1")  # its logdirs link the corpus traces


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=200, help="requests per route")
    ap.add_argument("--downloads", type=int, default=3, help="concurrent /trace downloads during the latency test")
    args = ap.parse_args()
    trace = Path(args.trace) if args.trace else _biggest_trace()
    work = Path(tempfile.mkdtemp(prefix="gpuinsight-bench-"))
    try:
        logdir = work / "logdir" / "run"
        logdir.mkdir(parents=True)
        name = "worker0.1700000000000000000.pt.trace.json" + (".gz" if trace.name.endswith(".gz") else "")
        os.symlink(trace.resolve(), logdir / name)
        selection = {"run": "run", "worker": "worker0", "span": name}
        print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB on disk)\n")
        _cold_and_warm(work, selection)
        _latency(work, selection, args.clients, args.requests, args.downloads)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _biggest_trace() -> Path:
    from tb_gpuinsight.logdir import KINETO, sniff

    traces = [p for p in CORPUS.rglob("*.json*") if sniff(p).kind == KINETO]
    if not traces:
        sys.exit(f"no traces found under {CORPUS}; pass a TRACE")
    return max(traces, key=lambda p: _json_size(p))


def _json_size(path: Path) -> int:
    import struct

    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
        f.seek(-4, 2)
        return struct.unpack("<I", f.read(4))[0]


def _service(work: Path, scan_interval: float = 0.05):
    from tb_gpuinsight.service import LogdirService

    return LogdirService(str(work / "logdir"), cache_dir=str(work / "cache"), workers=1,
                         scan_interval=scan_interval)


def _first_table(service, selection) -> float:
    """Seconds from start until the kernel table of `selection` can be served."""
    from tb_gpuinsight.service import NotReady

    t0 = time.perf_counter()
    service.start()
    while True:
        try:
            service.analysis(**selection).by_name()
            return time.perf_counter() - t0
        except (NotReady, Exception) as exc:  # not discovered or not analysed yet
            if not isinstance(exc, NotReady) and "unknown run" not in str(exc):
                raise
            time.sleep(0.005)


def _cold_and_warm(work: Path, selection) -> None:
    cold_service = _service(work)
    cold = _first_table(cold_service, selection)
    cold_service.stop()
    warm_service = _service(work)
    warm = _first_table(warm_service, selection)
    warm_service.stop()
    path = str(next((work / "logdir" / "run").iterdir()).resolve())
    loads = measure("import orjson\n" + _READ + f"path = {path!r}\n", "d = orjson.loads(read_all(path))", 3) \
        if has_module("orjson") else {}
    print(f"{'measure':<46}{'seconds':>9}")
    print(f"{'orjson.loads of the trace (fresh process)':<46}{loads.get('wall_s', float('nan')):>9.3f}")
    print(f"{'cold: start -> first kernel table':<46}{cold:>9.3f}   ({cold / loads['wall_s']:.1f}x orjson.loads)"
          if loads else f"{'cold: start -> first kernel table':<46}{cold:>9.3f}")
    print(f"{'warm (restart, cached summary) -> first table':<46}{warm:>9.3f}   (target < 0.2 s)\n")


def _latency(work: Path, selection, clients: int, requests: int, downloads: int) -> None:
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    import logging

    from werkzeug.serving import make_server

    from tb_gpuinsight.plugin import GpuInsightPlugin

    service = _service(work, scan_interval=3600)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(work / "logdir"), flags=None), service=service)
    _first_table(service, selection)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = make_server("127.0.0.1", 0, application.TensorBoardWSGI([plugin]), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/data/plugin/gpuinsight/"
    eff = service.analysis(**selection)
    from tb_gpuinsight.analysis.kernels.rows import group_rows, sort_order

    table = eff.by_name()
    from tb_gpuinsight.routes.params import name_key

    top_key = name_key(group_rows(table, sort_order(table, "total_us")[:1].tolist())[0]["name"])
    routes = {
        "runs": {},
        "devices": selection,
        "kernels": {**selection, "sort": "total_us", "limit": 200},
        "kernels (filter, asc)": {**selection, "filter": "gemm", "sort": "mean_us", "order": "asc"},
        "kernels (by op, tf32)": {**selection, "group": "op", "dtype": "tf32"},
        "roofline": selection,
        "kernel_ops": {**selection, "name_key": top_key},
        "overview": selection,
        **_memory_routes(service, selection),
    }
    rss_before = _rss_kb("VmRSS")
    stop = threading.Event()
    fetched: list = []
    loaders = [threading.Thread(target=_download_loop, args=(base + "trace?" + urllib.parse.urlencode(selection),
                                                             stop, fetched), daemon=True) for _ in range(downloads)]
    for t in loaders:
        t.start()
    print(f"{'route':<26}{'first ms':>9}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}   ({clients} concurrent clients, "
          f"{requests} requests each route; 'first' is computed, later answers are reused)")
    for label, params in routes.items():
        path = label.split(" ")[0]
        url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        first = _get(url)  # computes the answer, as a user's first view of it does
        with ThreadPoolExecutor(clients) as pool:
            times = sorted(pool.map(lambda _: _get(url), range(requests)))
        p95 = times[int(0.95 * (len(times) - 1))]
        print(f"{label:<26}{first * 1e3:>9.1f}{statistics.median(times) * 1e3:>9.1f}{p95 * 1e3:>9.1f}"
              f"{times[-1] * 1e3:>9.1f}")
    stop.set()
    for t in loaders:
        t.join()
    if downloads:
        sizes = {n for _, n in fetched}
        print(f"\n/trace downloads during the test: {len(fetched)} complete, "
              f"{', '.join(f'{n / 1e6:.1f} MB' for n in sorted(sizes))}; seconds each: "
              f"{', '.join(f'{s:.2f}' for s, _ in fetched[:12])}")
    json_mb = _json_size(Path(service.span_entry(**selection).path)) / 1e6
    print(f"server process RSS: {rss_before / 1024:.0f} MB before the latency test, peak (VmHWM) "
          f"{_rss_kb('VmHWM') / 1024:.0f} MB; the trace's JSON is {json_mb:.0f} MB")
    server.shutdown()
    service.stop()


def _download_loop(url: str, stop: threading.Event, fetched: list) -> None:
    """Download `url` (in 64 KiB reads) until told to stop; record (seconds, bytes) of each complete download."""
    while not stop.is_set():
        t0 = time.perf_counter()
        n = 0
        with urllib.request.urlopen(url, timeout=900) as response:
            while True:
                block = response.read(1 << 16)
                if not block:
                    break
                n += len(block)
        fetched.append((time.perf_counter() - t0, n))


def _rss_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _memory_routes(service, selection):
    """The Memory tab's routes on the trace's busiest device, when it has [memory] events."""
    from tb_gpuinsight.analysis.memory.events import MemoryEvents

    [(_, section)] = service.sections(**selection, name="memory")
    events = MemoryEvents.from_section(section)
    if not len(events):
        return {}
    device = max(events.devices, key=lambda d: len(events.on(d)))
    mid = (events.start_us + events.end_us) / 2
    on = {**selection, "device": device}
    return {"memory": selection, "memory_curve": {**on, "width": 1400},
            "memory_curve (zoom)": {**on, "width": 1400, "start_us": mid, "end_us": mid + 1000},
            "memory_allocations": on, "memory_ops": on}


def _get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
