"""Timeline index build time and size per 100k events, and viewport query latency (p50 / p95), on real traces.

    python benchmarks/timeline.py [TRACE ...] [--scaled-times N] [--queries 200] [--width 1600]

By default: the corpus's biggest trace (hta/df_index_resolver.json.gz) and that trace repeated N times by
`scale_trace.py` into a temporary folder. A query is what the /timeline/view route does once the index is loaded:
the level-of-detail viewport of every lane (CPU depth <= 2, as the tab asks when zoomed in) plus its JSON text.
Viewports are random: start uniform over the trace, span log-uniform from 1 us to the whole trace.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tb_gpuinsight import analyze, load  # noqa: E402
from tb_gpuinsight.analysis.timeline import index as tl  # noqa: E402

CORPUS = os.environ.get("TB_GPUINSIGHT_CORPUS", os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared",
                                                             "traces"))
BIGGEST = "hta/df_index_resolver.json.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--scaled-times", type=int, default=10, help="copies of the biggest trace (0: skip)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--width", type=int, default=1600)
    args = ap.parse_args()
    traces = args.traces or [os.path.join(args.corpus, BIGGEST)]
    with tempfile.TemporaryDirectory() as tmp:
        if not args.traces and args.scaled_times > 0:
            scaled = os.path.join(tmp, f"scaled_x{args.scaled_times}.json")
            subprocess.run([sys.executable, os.path.join(HERE, "scale_trace.py"), traces[0], scaled, "--times",
                            str(args.scaled_times)], check=True)
            traces.append(scaled)
        for path in traces:
            report(path, args.queries, args.width)


def report(path: str, queries: int, width: int) -> None:
    t = time.perf_counter()
    trace = load(path)
    eff = analyze(trace)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    index = tl.build_index(trace, eff)
    build_s = time.perf_counter() - t
    raw = trace.meta.event_count
    stored = _stored_bytes(index)
    per = 1e5 / max(raw, 1)
    print(f"\n{os.path.basename(path)}: {os.path.getsize(path) / 1e6:,.0f} MB, {raw:,} trace events, "
          f"{index.event_count:,} timeline events in {len(index.lanes)} lanes (read + analyse {read_s:.1f} s)")
    print(f"  index build  {build_s:.2f} s = {build_s * per * 1e3:.0f} ms per 100k trace events")
    print(f"  index size   {index.nbytes() / 1e6:.1f} MB in memory = {index.nbytes() * per / 1e6:.2f} MB per 100k; "
          f"{stored / 1e6:.1f} MB compressed in the summary = {stored * per / 1e6:.2f} MB per 100k")
    del trace, eff
    lat, items = _latencies(index, queries, width)
    print(f"  viewport     p50 {np.percentile(lat, 50):.1f} ms, p95 {np.percentile(lat, 95):.1f} ms, "
          f"max {lat.max():.1f} ms over {queries} queries at {width} px; items p95 {np.percentile(items, 95):,.0f}, "
          f"max {items.max():,}")


def _stored_bytes(index: tl.TimelineIndex) -> int:
    out = io.BytesIO()
    np.savez_compressed(out, **index.arrays)
    return len(out.getvalue()) + len(json.dumps(index.to_section().info))


def _latencies(index: tl.TimelineIndex, queries: int, width: int):
    rng = np.random.default_rng(0)
    dur = index.duration_us
    lanes = tl.lane_ids(index, None, 2)
    lat, items = [], []
    for _ in range(queries):
        span = 10 ** rng.uniform(0, np.log10(dur))
        t0 = rng.uniform(0, max(dur - span, 1e-9))
        started = time.perf_counter()
        view = tl.viewport(index, t0, t0 + span, width, lanes)
        json.dumps(view, separators=(",", ":"))
        lat.append((time.perf_counter() - started) * 1e3)
        items.append(view["items"])
    return np.asarray(lat), np.asarray(items)


if __name__ == "__main__":
    main()
