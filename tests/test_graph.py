"""Execution graph: counts on every corpus ET, link rates of both pairs, a critical path checked by hand, the
collapsed view, the CLI and the plugin routes."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tb_gpuinsight.analysis.graph import view as gv
from tb_gpuinsight.analysis.graph.op_path import OpTimes, critical_path
from tb_gpuinsight.analysis.graph.build import build_graph, load_graph
from tb_gpuinsight.cli import main
from tb_gpuinsight.trace.et import load_et

from .corpus import corpus_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# file -> (top-level ops, data edges, backward nodes matched to their forward op)
COUNTS = {
    "hta/benchmark_simple_add_et.json.gz": (10, 8, 0),
    "param/linear_et.json.gz": (320, 338, 66),
    "chakra/1.0.2-chakra.0.0.4.json": (90, 90, 0),
    "param/resnet_1gpu_et.1.0.3-chakra.0.0.4.json.gz": (3711, 4742, 543),
    "param/hf_GPT2_et.json.gz": (8581, 10716, 1923),
    "param/pt2_et.json": (4, 2, 0),
}


@pytest.mark.parametrize("rel", sorted(COUNTS))
def test_graph_counts(rel):
    g = load_graph(corpus_path(rel))
    assert (len(g.units), len(g.data_edges), int((g.forward >= 0).sum())) == COUNTS[rel]
    assert all(p < c for p, c in g.data_edges)  # producers come first: a DAG
    assert g.link.method == "none" and not g.critical.timed and len(g.critical.ops()) > 0


def test_simple_add_links_fully():
    g = load_graph(corpus_path("hta/benchmark_simple_add_et.json.gz"),
                   corpus_path("hta/benchmark_simple_add_trace.json.gz"))
    assert (g.link.linked, g.link.linkable, g.link.offset) == (36, 36, 0)
    assert g.kernels.gpu_us.sum() > 0 and g.critical.timed
    for row in np.flatnonzero(g.link.op >= 0):  # every link joins same-named events
        assert g.cpu_dur[row] >= 0


def test_linear_links_with_offset():
    g = load_graph(corpus_path("param/linear_et.json.gz"), corpus_path("param/linear_kineto.json.gz"))
    assert g.link.method == "external id" and g.link.offset == 227
    assert 0.78 <= g.link.rate <= 0.9, g.link.to_dict()
    cp = g.critical
    assert 0 < cp.length_us <= cp.step_us * 1.05
    assert abs(sum(cp.by_cause.values()) - cp.length_us) < 1e-6


def _times(cpu, gpu, thread=None, stream=None):
    """Ops back to back on one thread (starting at 0); each GPU part starts when its op ends or its stream frees."""
    n = len(cpu)
    cpu_ts, t = np.zeros(n), 0.0
    gpu_ts, gpu_end = np.full(n, np.nan), np.full(n, np.nan)
    free = 0.0
    for i in range(n):
        cpu_ts[i] = t
        t += cpu[i]
        if gpu[i]:
            gpu_ts[i] = max(t, free)
            gpu_end[i] = free = gpu_ts[i] + gpu[i]
    return OpTimes(cpu_ts, np.array(cpu, float), np.array(thread or [1] * n), gpu_ts, gpu_end,
                   np.array(gpu, float), np.array(stream or [7] * n))


def test_critical_path_by_hand():
    # A (cpu 10, gpu 100) -> C (cpu 5, gpu 50) by data; B (cpu 10) runs between them on the CPU.
    # CPU chain: 10 + 10 + 5 = 25. GPU: A's kernel runs 10..110, C's 110..160. Path: A cpu, A gpu, C gpu = 160.
    cp = critical_path(_times([10, 10, 5], [100, 0, 50]), [(0, 2)])
    assert cp.length_us == 160 and cp.step_us == 160
    assert [(s.op, s.cause, s.us) for s in cp.steps] == [(0, "cpu_op", 10), (0, "gpu_kernel", 100),
                                                         (2, "gpu_kernel", 50)]
    assert cp.summary()["causes"]["gpu_kernel"]["share"] == pytest.approx(150 / 160)


def test_critical_path_cpu_bound_with_launch_gap():
    # Tiny kernels behind long CPU ops: the GPU idles waiting for launches. Path: all CPU, then C's launch gap? No:
    # C's kernel starts when C's op ends (gap 0); A's kernel ran long before. Path = 10 + 30 + 20 + C's kernel 1.
    cp = critical_path(_times([10, 30, 20], [1, 0, 1]), [])
    assert cp.length_us == 61 and cp.by_cause == {"cpu_op": 60, "gpu_kernel": 1}
    times = _times([10, 30], [1, 1])
    times.gpu_ts[1] += 5  # the kernel starts 5 us after its op returned on an idle stream
    times.gpu_end[1] += 5
    cp = critical_path(times, [])
    assert cp.by_cause == {"cpu_op": 40, "launch_gap": 5, "gpu_kernel": 1}


def test_critical_path_untimed_counts_ops():
    times = _times([1, 1, 1], [0, 0, 0], thread=[1, 2, 1])
    times.timed = False
    cp = critical_path(times, [(0, 1)])
    assert cp.length_us == 3 and cp.ops() == [0, 1, 2] or cp.length_us == 2


def test_backward_folds_under_forward_parent():
    g = load_graph(corpus_path("param/hf_GPT2_et.json.gz"))
    et = g.et
    bwd = int(np.flatnonzero(g.forward >= 0)[0])
    fwd = int(g.forward[bwd])
    assert et.cols["seq_id"][bwd] == et.cols["seq_id"][fwd] and et.cols["fw_tid"][bwd] == et.cols["tid"][fwd]
    tree = gv.build_tree(g)
    container = gv.forward_container(g, bwd)
    assert container >= 0 and not g.is_op[container] and container in gv.ancestors(tree, bwd)


def test_view_of_big_graph_is_capped_and_laid_out():
    g = load_graph(corpus_path("param/hf_GPT2_et.json.gz"))
    tree = gv.build_tree(g)
    figs = gv.figures(tree, g)
    assert all(len(c) <= gv.MAX_CHILDREN for c in tree.children) and len(tree.roots) <= gv.MAX_CHILDREN
    view = gv.view_json(tree, g, figs, gv.default_expanded(tree, g))
    assert 20 <= len(view["nodes"]) <= gv.DEFAULT_VISIBLE and not view["capped"]
    # The cut covers every node once: the visible subtrees plus the opened ET nodes (an opened node shows its
    # children instead of itself).
    opened = [n["id"] for n in view["expanded"] if n["id"] < tree.n_rows]
    assert sum(n["size"] for n in view["nodes"]) + len(opened) == len(g.et)
    everything = gv.view_json(tree, g, figs, set(range(len(tree.parent))))
    assert everything["capped"] and len(everything["nodes"]) <= gv.MAX_VISIBLE
    assert any(n["critical_ops"] for n in view["nodes"]) and any(e["critical"] for e in view["edges"])
    # Outlined: the path's own ops only, never a group for holding one (the outline was on nearly every node).
    shown = everything["nodes"]
    assert any(n["critical"] for n in shown) and all(n["kind"] != "group" for n in shown if n["critical"])
    assert sum(n["critical"] for n in shown) < sum(n["critical_ops"] > 0 for n in shown)
    # Every visible node's parent is an opened node (the browser draws it as the compound box around it).
    boxes = {e["id"]: e for e in view["expanded"]}
    assert all(n["parent"] is None or n["parent"] in boxes for n in view["nodes"])
    assert all(e["parent"] is None or e["parent"] in boxes for e in view["expanded"])


def test_first_view_opens_single_child_chains():
    # Depth 2 shows one "ProfilerStep (+n)" node on the DLRM step; the first view opens down to its regions.
    dlrm = corpus_path("param/dlrm_8ranks")
    g = load_graph(next(dlrm.glob("worker0_*.et.json.gz")))
    tree = gv.build_tree(g)
    view = gv.view_json(tree, g, gv.figures(tree, g), gv.default_expanded(tree, g))
    assert 20 <= len(view["nodes"]) <= gv.DEFAULT_VISIBLE
    labels = {n["label"] for n in view["nodes"]} | {e["label"] for e in view["expanded"]}
    assert {"## forward ##", "## backward ##", "## optimizer ##"} <= labels, labels
    assert not any(n["label"].startswith("ProfilerStep") for n in view["nodes"])


def test_cli_graph(tmp_path, capsys):
    et = corpus_path("hta/benchmark_simple_add_et.json.gz")
    trace = corpus_path("hta/benchmark_simple_add_trace.json.gz")
    dot, out = tmp_path / "g.dot", tmp_path / "g.json"
    assert main(["graph", str(et), "--trace", str(trace), "--dot", str(dot), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "36 of 36 nodes (100.0%) by external id" in text
    # With a Kineto trace, the joint CPU + GPU path (as `critical-path` reports it): its causes tile the wall time.
    shares = [float(line.split()[-1].rstrip("%")) for line in text.splitlines() if line.startswith("  ")]
    assert "cpu op" in text and abs(sum(shares) - 100.0) < 0.5, text
    assert dot.read_text().startswith("digraph") and "color=red" in dot.read_text()
    data = json.loads(out.read_text())
    assert data["link"]["rate"] == 1.0 and len(data["nodes"]) == 10 and data["critical_path"]["ops"]
    assert main(["graph", str(trace)]) == 2
    assert "not an Execution Trace" in capsys.readouterr().err


def test_sample_cpu_run_spans_link_fully():
    run = os.path.join(ROOT, "samples", "cpu_mlp")
    spans = sorted(f for f in os.listdir(run) if f.endswith(".pt.trace.json"))
    assert len(spans) == 2
    for span in spans:  # each span has the Execution Trace of its own window (tb_gpuinsight.profile)
        g = build_graph(load_et(os.path.join(run, span.replace(".pt.trace.json", ".et.json"))),
                        *_loaded(os.path.join(run, span)))
        assert g.link.rate == 1.0 and g.critical.timed and g.critical.by_cause.get("cpu_op", 0) > 0


def _loaded(path):
    import tb_gpuinsight

    trace = tb_gpuinsight.load(path)
    return trace, tb_gpuinsight.analyze(trace)


# ------------------------------------------------------------------------------------------------- routes

@pytest.fixture
def client(tmp_path):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    root = tmp_path / "logdir"
    shutil.copytree(os.path.join(ROOT, "samples"), root, ignore=shutil.ignore_patterns("*.md", "*.py"))
    service = LogdirService(str(root), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(root), flags=None), service=service)
    _wait(lambda: any(r["run"] == "cpu_mlp" for r in service.runs_json()["runs"]))
    yield Client(application.TensorBoardWSGI([plugin])), service
    service.stop()


def _wait(pred, timeout=30.0):
    import time

    end = time.time() + timeout
    while time.time() < end and not pred():
        time.sleep(0.05)


def _get(client, route, **params):
    r = client.get(f"/data/plugin/gpuinsight/{route}", query_string=params)
    return r.status_code, json.loads(r.get_data(as_text=True))


def _selection(service, run):
    worker = next(r for r in service.runs_json()["runs"] if r["run"] == run)["workers"][0]
    return {"run": run, "worker": worker["worker"], "span": worker["spans"][-1]["span"]}


def test_routes_view_node_search(client):
    c, service = client
    sel = _selection(service, "cpu_mlp")
    code, view = _get(c, "graph/view", **sel)
    assert code == 200, view
    assert view["nodes"] and view["link"]["linked"] > 0 and view["critical_path"]["timed"]
    details = [_get(c, "graph/node", **sel, id=n["id"]) for n in view["nodes"] if n["kind"] == "op"]
    assert all(code == 200 and "types" in d["et"]["inputs"] for code, d in details)
    assert any(d["et"]["op_schema"] for _, d in details)
    detail = next(d for _, d in details if d["kineto"])
    assert detail["kineto"]["dur"] >= 0
    assert "types" in detail["et"]["inputs"]
    group = next(n for n in view["nodes"] if n["expandable"])
    code, opened = _get(c, "graph/view", **sel, open=str(group["id"]))
    assert code == 200 and group["id"] not in {n["id"] for n in opened["nodes"]}
    code, found = _get(c, "graph/search", **sel, q="linear")
    assert code == 200 and found["matches"][0]["name"] == "aten::linear"
    code, focused = _get(c, "graph/view", **sel, focus=found["matches"][0]["id"])
    assert found["matches"][0]["id"] in {n["id"] for n in focused["nodes"]}
    # The critical path names ops by ET id: focus_et reveals that op's node and says which it is.
    code, by_et = _get(c, "graph/view", **sel, focus_et=found["matches"][0]["et_id"])
    assert code == 200 and by_et["focus"] == found["matches"][0]["id"]
    assert by_et["focus"] in {n["id"] for n in by_et["nodes"]}
    assert _get(c, "graph/view", **sel, focus_et=-5)[1]["focus"] is None


def test_routes_errors(client):
    c, service = client
    sel = _selection(service, "cpu_mlp")
    assert _get(c, "graph/view", **sel, open="x,y")[0] == 400
    assert _get(c, "graph/node", **sel, id=10 ** 8)[0] == 400
    _wait(lambda: any(r["run"] == "bert_h100" for r in service.runs_json()["runs"]))
    code, body = _get(c, "graph/view", **_selection(service, "bert_h100"))  # no ET is data, not an error
    assert code == 200 and not body["available"] and "ExecutionTraceObserver" in body["reason"]
    assert _get(c, "graph/view", **sel, focus_et="x")[0] == 400


def test_critical_path_and_timeline_share_a_time_base(client):
    # The Timeline overlay draws /critical_path segments on the /timeline axis: their steps must line up.
    c, service = client
    sel = _selection(service, "cpu_mlp")
    _wait(lambda: _get(c, "critical_path", **sel)[0] == 200, timeout=60)
    code, path = _get(c, "critical_path", **sel)
    assert code == 200 and path["available"] and path["segments"], path
    code, meta = _get(c, "timeline/meta", **sel, tspan=sel["span"])
    assert code == 200, meta
    code, view = _get(c, "timeline/view", **sel, tspan=sel["span"], t0="0", t1=repr(meta["duration_us"]), width=800)
    assert code == 200 and view["steps"], view
    starts = sorted(s["start"] for s in view["steps"])
    for step in path["steps"]:
        assert min(abs(step["start_us"] - s) for s in starts) <= 1.0, (step, starts)
    assert all(0 <= s["start_us"] <= meta["duration_us"] for s in path["segments"])


def test_graph_marks_the_same_critical_path_as_the_list(client):
    # The graph's red marks and the critical-path list are one path: the ops the list names by ET id.
    c, service = client
    sel = _selection(service, "cpu_mlp")
    _wait(lambda: _get(c, "critical_path", **sel)[0] == 200, timeout=60)
    path = _get(c, "critical_path", **sel)[1]
    on_path = {s["et_id"] for s in path["segments"] if s["et_id"] is not None}
    assert on_path
    code, view = _get(c, "graph/view", **sel)
    assert code == 200
    ops = [n for n in view["nodes"] if n["kind"] == "op" and n.get("et_id") is not None]
    marked = {n["et_id"] for n in ops if n["critical"]}
    assert marked and marked == {n["et_id"] for n in ops} & on_path, (marked, on_path)


def test_graph_marks_the_joint_cpu_gpu_path_on_a_communication_bound_rank():
    # DLRM rank 1 waits 47 % of its step in NCCL: the ET-only op path and the joint CPU + GPU path differ there, and
    # the graph must mark the joint one, op by op in path order.
    from tb_gpuinsight import load
    from tb_gpuinsight.analysis.graph.critical_path import path as cpath
    from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace

    et_path = corpus_path("param/dlrm_8ranks/worker1_step_12.1694128201556.et.json.gz")
    trace = load(corpus_path("param/dlrm_8ranks/worker1_step_12.1694128201556.pt.trace.json.gz"))
    eff = analyze_trace(trace)
    g = build_graph(load_et(et_path), trace, eff)
    et_only = g.critical_rows()
    path = cpath.compute(trace, eff.activities, [et_path])
    g.use_path(path.seg["et_id"])
    expected = []
    for et_id in path.seg["et_id"].tolist():
        row = g.et.row_of.get(et_id, -1)
        if row >= 0 and g.unit[row] >= 0 and int(g.unit[row]) not in expected:
            expected.append(int(g.unit[row]))
    assert g.critical_rows() == expected and len(expected) > 100
    assert set(expected) != set(et_only)
