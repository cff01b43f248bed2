"""Execution graph: time to the first rendered view's data (read ET, link, build, collapse, lay out, JSON), then
the cached routes' latency (expand a node, node details, search).

    python benchmarks/graph.py [ET] [--trace KINETO] [--repeat N]
Defaults to ../shared/traces/param/hf_GPT2_et.json.gz (27k nodes). Target: first view under 2 s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tb_gpuinsight.analysis.graph import view as gv  # noqa: E402
from tb_gpuinsight.analysis.graph.build import build_graph  # noqa: E402
from tb_gpuinsight.trace.et import load_et  # noqa: E402

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces", "param", "hf_GPT2_et.json.gz")


def first_view(et_path: str, kineto_path: str | None) -> dict:
    """Stage timings (s) of one cold first view, as the /graph/view route computes it."""
    t = [time.perf_counter()]
    et = load_et(et_path)
    t.append(time.perf_counter())
    trace = eff = None
    if kineto_path:
        import tb_gpuinsight

        trace = tb_gpuinsight.load(kineto_path)
        eff = tb_gpuinsight.analyze(trace)
    t.append(time.perf_counter())
    graph = build_graph(et, trace, eff)
    t.append(time.perf_counter())
    tree = gv.build_tree(graph)
    figs = gv.figures(tree, graph)
    t.append(time.perf_counter())
    body = json.dumps(gv.view_json(tree, graph, figs, gv.default_expanded(tree, graph)))
    t.append(time.perf_counter())
    names = ("read ET", "read+analyse Kineto", "link+graph+critical path", "display tree+figures", "view+JSON")
    out = {n: t[i + 1] - t[i] for i, n in enumerate(names)}
    out["total"] = t[-1] - t[0]
    out["_state"] = (graph, tree, figs, len(body))
    return out


def warm(graph, tree, figs) -> dict:
    """Latency (ms) of what a user does next: expand the biggest visible group, open a node, search."""
    expanded = gv.default_expanded(tree, graph)
    view = gv.view_json(tree, graph, figs, expanded)
    biggest = max((n for n in view["nodes"] if n["expandable"]), key=lambda n: n["size"])
    cases = {
        "expand a group": lambda: gv.view_json(tree, graph, figs, expanded | {biggest["id"]}),
        "search 'addmm'": lambda: gv.search(tree, graph, figs, "addmm"),
        "node figures": lambda: gv.node_json(tree, graph, figs, biggest["id"]),
    }
    out = {}
    for name, fn in cases.items():
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(runs)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("et", nargs="?", default=DEFAULT)
    ap.add_argument("--trace", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = [first_view(args.et, args.trace) for _ in range(args.repeat)]
    graph, tree, figs, size = runs[-1]["_state"]
    print(f"{args.et}: {len(graph.et):,} nodes, {len(graph.units):,} top-level ops, {len(graph.data_edges):,} data "
          f"edges; link {graph.link.rate:.1%} ({graph.link.method})")
    for stage in runs[0]:
        if not stage.startswith("_"):
            vals = [r[stage] for r in runs]
            print(f"  {stage:<28} median {statistics.median(vals):7.3f} s   (min {min(vals):.3f})")
    print(f"  first view JSON: {size / 1024:.0f} KiB")
    for name, ms in warm(graph, tree, figs).items():
        print(f"  warm: {name:<22} {ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
