"""The Distributed tab and the All-ranks kernel table at thousands of ranks: first-answer times of their routes
through real TensorBoard, old (every rank's summary read, and for kernels analysed, on the request) against new
(the run's rank index), and the server's RSS.

    python benchmarks/ranks_scale.py [--ranks 64 1024 10000] [--old-max 1024] [--old-max-s3 64]
                                     [--stores local s3]

A run of N ranks is N copies of the 8 real DLRM ranks (corpus `param/dlrm_8ranks`, `tests/rank_copies.py`): each
rank file a link to real rank i % 8 named `rank{i}`, its summary the real rank's summary with its identity and its
distributedInfo rank / world size set to i / N (what summarising the copy gives, without summarising 10,000
files). The store is filled like `summarize --store` leaves it (rank index included, timed as "index build");
each (N, store, path) is then served by a fresh process: TensorBoard's WSGI app over the plugin with
`--gpuinsight_store`, asked over HTTP for /ranks (as the tab asks: no instance list), heatmap pages (rank order,
top stragglers, a rank search), /ranks_compare of the last rank, then the Kernel tab's All-ranks table (by name,
then by op), its device cards (/devices) and roofline (/roofline), each of those two as the first request of a
fresh server would find it (the analyses and answers the earlier requests kept in memory dropped before it; torch
imported before any timing, as /devices says whether its FLOP formulas are there). `--stores s3` serves the same
store, uploaded as it is, from an S3-compatible server on 127.0.0.1
(moto, as the tests use). Old and new answers are compared: identical, floats to 1e-9 relative.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.rank_copies import build, real_summaries  # noqa: E402  (the copies the tests use too)

CORPUS = os.environ.get("TB_GPUINSIGHT_CORPUS", os.path.join(os.path.dirname(ROOT), "shared", "traces"))
DLRM = os.path.join(CORPUS, "param", "dlrm_8ranks")


def build_store(work: str, real, n: int, store_url: str) -> Dict[str, float]:
    """Logdir of n rank links and a filled store (summaries, then the rank index as `summarize` writes it)."""
    from tb_gpuinsight.store.rank_table import index_logdir
    from tb_gpuinsight.logdir import discover
    from tb_gpuinsight.store import open_store

    logdir = os.path.join(work, f"logdir{n}")
    t0 = time.perf_counter()
    build(DLRM, logdir, real, n, store_url)
    t1 = time.perf_counter()
    index_logdir(open_store(store_url), logdir, discover(logdir))
    return {"logdir": logdir, "copy_s": t1 - t0, "index_s": time.perf_counter() - t1}


def serve_and_time(logdir: str, store: str, n: int, old: bool, env: Dict[str, str]) -> Dict:
    """One fresh server process: its timings, peak RSS and answers (JSON on its last stdout line)."""
    cmd = [sys.executable, __file__, "--child", logdir, store, str(n)] + (["--old"] if old else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, check=False)
    if out.returncode:
        raise SystemExit(f"server run failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(logdir: str, store: str, n: int, old: bool) -> None:
    """The server side: TensorBoard's app over the plugin on the store; times the first answers."""
    import logging
    import threading
    import urllib.error
    import urllib.parse
    import urllib.request

    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.serving import make_server

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.routes import kernels as kernels_route
    from tb_gpuinsight.routes import ranks as ranks_route
    from tb_gpuinsight.service import LogdirService

    if old:  # the path before the index: every rank's summary read (and, for kernels, analysed) on the request
        ranks_route.index_report = ranks_route.per_rank_report
        kernels_route.kernels_route = lambda plugin, req: kernels_route.kernels(
            plugin.analysis(req), req, ranks_route.span_ranks(plugin, req))
        kernels_route.devices_route = lambda plugin, req: kernels_route.devices(
            plugin.analysis(req), plugin.service.datasheet())
        kernels_route.roofline_route = lambda plugin, req: kernels_route.roofline(plugin.analysis(req), None)
    from tb_gpuinsight.estimate.flops import torch_available

    torch_available()  # torch's import (seconds, once per process, on either path) is not what is timed here
    service = LogdirService(logdir, store=store, workers=1, scan_interval=3600)
    t0 = time.perf_counter()
    service.scan()
    scan_s = time.perf_counter() - t0
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=logdir, flags=None), service=service)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, application.TensorBoardWSGI([plugin]), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/data/plugin/gpuinsight/"

    def get(route: str, **query) -> tuple:
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(base + route + "?" + urllib.parse.urlencode({"run": "job", **query})) as r:
                body = r.read()
        except urllib.error.HTTPError as exc:
            raise SystemExit(f"/{route} {query}: HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:300]}")
        return time.perf_counter() - t, json.loads(body)

    times, answers = {"scan": scan_s}, {}
    times["/ranks"], answers["ranks"] = get("ranks", instance_limit=0)  # as the tab asks
    times["/ranks_heatmap page"], answers["heatmap"] = get("ranks_heatmap", metric="comm_wait", page=n // 128, size=64)
    times["  top stragglers page"], answers["top"] = get("ranks_heatmap", order="straggler", size=64)
    times["  rank search"], answers["search"] = get("ranks_heatmap", q=str(n // 2))
    times["/ranks_compare"], answers["compare"] = get("ranks_compare", rank=n - 1)
    # The Kernel tab's "All ranks" table, as the tab asks for its first page.
    times["/kernels All ranks"], answers["kernels"] = get("kernels", worker="*", sort="total_us", limit=200)
    times["  by op, by rank max"], answers["by_op"] = get("kernels", worker="*", group="op", sort="rank_max_us")
    for route in ("devices", "roofline"):  # the Kernel tab's cards and roofline, from nothing kept in memory
        with service._lock:
            service._loaded.clear()
        ranks_route._REPORTS._items.clear()
        times[f"/{route} All ranks"], answers[route] = get(route, worker="*")
    with open("/proc/self/status", encoding="ascii") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    server.shutdown()
    print(json.dumps({"times": times, "rss_mb": hwm / 1024, "answers": answers}))


def differences(a, b, where: str = "") -> List[str]:
    """Where two answers differ: anything but a float exactly, floats beyond 1e-9 relative (the kernel table's
    sums are added per rank on one path and per call on the other, which may differ in the last bits)."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys differ"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 1024, 10000])
    ap.add_argument("--old-max", type=int, default=1024, help="time the old path up to this many ranks (local)")
    ap.add_argument("--old-max-s3", type=int, default=64, help="the same from the S3-compatible server")
    ap.add_argument("--stores", nargs="+", choices=("local", "s3"), default=["local"],
                    help="local directory, and/or an S3-compatible server on 127.0.0.1 (moto)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--old", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.old)
        return
    work = tempfile.mkdtemp(prefix="tb-gpuinsight-ranks-")
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        real = real_summaries(DLRM, work)
        s3 = _s3_store(stack) if "s3" in args.stores else None
        for n in args.ranks:
            local = os.path.join(work, f"store{n}")
            built = build_store(os.path.join(work, f"run{n}"), real, n, local)
            print(f"\n{n} ranks: copies stored in {built['copy_s']:.1f} s, rank index built in "
                  f"{built['index_s']:.1f} s (as `summarize` does once)")
            if "local" in args.stores:
                _serve("local", built["logdir"], local, n, {}, n <= args.old_max)
            if s3 is not None:
                url, env, upload = s3
                t0 = time.perf_counter()
                upload(local, url(n))
                print(f"  (the store uploaded to the S3-compatible server in {time.perf_counter() - t0:.1f} s)")
                _serve("s3", built["logdir"], url(n), n, env, n <= args.old_max_s3)
            shutil.rmtree(os.path.join(work, f"run{n}"), True)
            shutil.rmtree(local, True)


def _serve(where: str, logdir: str, url: str, n: int, env: Dict[str, str], old: bool) -> None:
    """Time the new path (and the old one) from one store and print them side by side."""
    new = serve_and_time(logdir, url, n, False, env)
    was = serve_and_time(logdir, url, n, True, env) if old else None
    print(f"{where} store, {n} ranks")
    print(f"  {'first answer':24s} {'old (per rank)':>15s} {'new (index)':>12s} {'old/new':>8s}")
    for route, t in new["times"].items():
        o = was["times"][route] if was else None
        print(f"  {route:24s} {(f'{o:.3f} s' if o is not None else '-'):>15s} {t:>10.3f} s "
              f"{(f'{o / t:.1f}x' if o is not None and t > 0 else '-'):>8s}")
    old_rss = f"{was['rss_mb']:.0f} MB" if was else "-"
    print(f"  {'server peak RSS':24s} {old_rss:>15s} {new['rss_mb']:>9.0f} MB")
    if was:
        diff = differences(was["answers"], new["answers"])
        print(f"  answers identical (floats to 1e-9 relative): {not diff}" + "".join(f"\n    {d}" for d in diff[:5]))


def _s3_store(stack: contextlib.ExitStack):
    """A moto S3 server on 127.0.0.1 kept until `stack` closes: (url of a store per N, env for children, upload
    (a local store's files, summaries and rank index, put as they are))."""
    from tests.s3server import s3_server

    server = stack.enter_context(s3_server())
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=server["endpoint"], key="testing", secret="testing")
    fs.mkdir("bench")

    def upload(local: str, url: str) -> None:
        from tb_gpuinsight.store import open_store

        store = open_store(url)
        for folder, _, files in os.walk(local):
            for name in files:
                rel = os.path.relpath(os.path.join(folder, name), local).replace(os.sep, "/")
                with open(os.path.join(folder, name), "rb") as f:
                    if not store._write(rel, f.read()):
                        raise RuntimeError(f"cannot write {rel} to {url}")

    return lambda n: f"s3://bench/store{n}", server["env"], upload


if __name__ == "__main__":
    main()
