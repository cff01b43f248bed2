"""Graph capture merged into replay (analysis/kernels/graph_capture.py): alignment, the H200 pairs recorded with
`tb_gpuinsight.profile()` (tests/data/graph_capture, benchmarks/record_graph_capture.py), vLLM's capture_traces/
layout from the corpus, discovery, the CLI and bad captures."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.efficiency import SOURCES
from tb_gpuinsight.analysis.kernels.graph_capture import FROM_CAPTURE, align, capture_launches
from tb_gpuinsight.cli import main
from tb_gpuinsight.logdir import capture_companions

DATA = Path(__file__).parent / "data" / "graph_capture"
REDUCE = DATA / "reduce_overhead"  # span 1: capture + 3 replays; span 2: 3 replays only
CAPTURE_SPAN, REPLAY_SPAN = sorted(REDUCE.glob("*.pt.trace.json.gz"))
CUDA_GRAPH = sorted((DATA / "cuda_graph").glob("*.pt.trace.json.gz"))


def _graph(eff):
    """Graph-replayed kernels (memsets replayed with them are rated on their size either way)."""
    acts = eff.activities
    return acts["graph"].astype(bool) & (acts["kind"] == acts.strings["kind"].index("kernel"))


def _share(eff, col: str, rows) -> float:
    acts = eff.activities
    return float(acts["dur"][rows & ~np.isnan(acts[col])].sum() / acts["dur"][rows].sum())


# ------------------------------------------------------------------------------------------------ alignment

def test_align_pairs_names_in_order_and_tolerates_an_extra_kernel():
    capture = ["a", "b", "c", "d"]
    replay = ["a", "b", "x", "c", "d"]  # one kernel the capture does not have
    assert align(capture, replay) == [(0, 0), (1, 1), (2, 3), (3, 4)]


def test_align_fills_unnamed_launches_by_position_between_matches():
    # CUDA launch calls name no kernel: None pairs with a kernel (never a memset) where the gap lengths agree
    capture = [None, "memset", None, None]
    assert align(capture, ["k1", "memset", "k2", "k3"]) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert align([None, None], ["memset", "k"]) == [(1, 1)]
    assert align([None, None, None], ["k1", "k2"]) == []  # nothing says which two of three


# -------------------------------------------------------------------------------------- recorded H200 pairs

def test_reduce_overhead_replay_span_takes_the_capture_span_of_its_run():
    """torch.compile(mode="reduce-overhead") on an H200: the second span only replays; discovery pairs it with
    the first span of the same worker, which holds the launches recorded while capturing."""
    before = tb_gpuinsight.analyze(REPLAY_SPAN, capture=[])
    graph = _graph(before)
    assert graph.sum() == 51 and _share(before, "flops", graph) == 0.0
    assert set(np.array(CODES_OF(before))[graph]) == {"graph_replay"}
    after = tb_gpuinsight.analyze(REPLAY_SPAN)
    acts = after.activities
    assert (acts["source"][graph] == SOURCES.index("capture")).all()
    assert _share(after, "bytes", graph) == 1.0
    assert _share(after, "flops", graph) > 0.6  # the Triton kernels carry no Inductor figures: FLOPs unknown
    reasons = np.array(acts.strings["flops_reason"], dtype=object)[acts["flops_reason"][graph]]
    assert all(r.startswith(FROM_CAPTURE) for r in reasons)
    report = after.trace.enrichment.graph_capture
    assert report["merged"] == 57  # 51 kernels and 6 memsets and [c["used"] for c in report["captures"]][-1] is True


def CODES_OF(eff):
    return [eff.activities.strings["gap"][g] for g in eff.activities["gap"].tolist()]


def test_replayed_gemm_gets_first_principles_flops_from_its_captured_shapes():
    eff = tb_gpuinsight.analyze(REPLAY_SPAN)
    acts = eff.activities
    names = acts.strings["op_name"]
    rows = [r for r in np.flatnonzero(_graph(eff)).tolist()
            if acts["op_name"][r] >= 0 and names[acts["op_name"][r]] == "aten::addmm"]
    assert len(rows) == 24  # 4 linears x 2 blocks x 3 replays
    for r in rows:
        bias, x, w = eff.shapes[int(acts["op_shape"][r])][0][:3]
        m, k, n = x[0], x[1], w[1]
        assert acts["flops"][r] == 2 * m * n * k  # the GEMM; the bias add is not counted
        assert tuple(bias) == (n,)


def test_capture_in_the_same_span_rates_that_span_replays():
    eff = tb_gpuinsight.analyze(CAPTURE_SPAN, capture=None)
    graph = _graph(eff)
    assert graph.sum() > 0 and (eff.activities["source"][graph] == SOURCES.index("capture")).all()


def test_hand_captured_cuda_graph_is_fully_rated():
    capture, replay = CUDA_GRAPH
    eff = tb_gpuinsight.analyze(replay, capture=[capture])
    graph = _graph(eff)
    assert graph.sum() == 60
    assert _share(eff, "flops", graph) == 1.0 and _share(eff, "bytes", graph) == 1.0


def test_same_kernels_per_replay_each_get_the_whole_op():
    """Each graph launch gets its own copy of the captured ops: an op's figures are split among its kernels of
    one replay, so the three replays of one op carry equal FLOPs (not a third each)."""
    eff = tb_gpuinsight.analyze(REPLAY_SPAN)
    acts = eff.activities
    rows = np.flatnonzero(_graph(eff) & ~np.isnan(acts["flops"]))
    by_key = {}
    for r in rows.tolist():
        by_key.setdefault((int(acts["name"][r]), int(acts["op_shape"][r])), set()).add(float(acts["flops"][r]))
    assert all(len(v) == 1 for v in by_key.values())


# ---------------------------------------------------------------------------------------- vLLM (corpus)

def test_vllm_capture_traces_folder_is_discovered_and_merged(corpus):
    replay = corpus / "tracelens" / "vllm_decode_full__graph_execution.json.gz"
    found = capture_companions(replay)
    assert found and found[0].endswith(".pt.trace.json.gz") and "capture_traces" in found[0]
    eff = tb_gpuinsight.analyze(replay)
    graph = _graph(eff)
    assert graph.sum() == 421 and (eff.activities["source"][graph] == SOURCES.index("capture")).all()
    acts = eff.activities
    assert (acts["op_name"][graph] >= 0).all() and (acts["op_shape"][graph] >= 0).mean() > 0.95  # the captured ops
    reasons = np.array(acts.strings["bytes_reason"], dtype=object)[acts["bytes_reason"][graph]]
    assert all(r.startswith(FROM_CAPTURE) for r in reasons)
    for r in np.flatnonzero(graph).tolist():  # every captured GEMM: 2*M*N*K
        if acts.strings["op_name"][acts["op_name"][r]] == "aten::addmm":
            _, x, w = eff.shapes[int(acts["op_shape"][r])][0][:3]
            assert acts["flops"][r] == 2 * x[0] * x[1] * w[1]


# -------------------------------------------------------------------------------- discovery, CLI, bad input

def test_capture_companions_reads_execution_details_then_the_runs_spans(tmp_path):
    run = tmp_path / "run"
    (run / "capture_traces").mkdir(parents=True)
    shutil.copy(CAPTURE_SPAN, run / "capture_traces" / "graph_capture_rank_0.1.pt.trace.json.gz")
    (run / "capture_traces" / "execution_details.json").write_text(json.dumps(
        [{"file": "graph_capture_rank_0.1.pt.trace.json.gz", "batch_size": 8, "mode": "FULL"},
         {"file": "missing.pt.trace.json.gz", "batch_size": 4, "mode": "PIECEWISE"}]))
    for src in (CAPTURE_SPAN, REPLAY_SPAN):
        shutil.copy(src, run / src.name)
    replay = run / REPLAY_SPAN.name
    assert capture_companions(replay) == [str(run / "capture_traces" / "graph_capture_rank_0.1.pt.trace.json.gz"),
                                          str(run / CAPTURE_SPAN.name)]
    for bad in ("{not json", '{"file": "x"}', "[]"):  # then every Kineto trace of the folder
        (run / "capture_traces" / "execution_details.json").write_text(bad)
        assert capture_companions(replay)[0].endswith("graph_capture_rank_0.1.pt.trace.json.gz")


def test_cli_capture_option_by_hand_and_none(tmp_path, capsys):
    lone = tmp_path / REPLAY_SPAN.name  # alone in its folder: nothing to discover
    shutil.copy(REPLAY_SPAN, lone)
    assert main(["analyze", str(lone), "--format", "json", "--top", "0"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(lone), "--capture", str(CAPTURE_SPAN), "--format", "json", "--top", "0"]) == 0
    merged = json.loads(capsys.readouterr().out)
    flops = lambda out: sum(r.get("flops") or 0 for r in out["rows"])  # noqa: E731
    assert flops(without) == 0 < flops(merged)


def test_bad_or_unrelated_capture_is_reported_not_raised(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text("{\"traceEvents\": [")
    capture, _ = CUDA_GRAPH  # a capture of another graph: its launches do not pair
    eff = tb_gpuinsight.analyze(REPLAY_SPAN, capture=[bad, capture, CAPTURE_SPAN])
    tried = eff.trace.enrichment.graph_capture["captures"]
    assert [c["used"] for c in tried] == [False, False, True]
    assert tried[0]["reason"] and "pair fewer" in tried[1]["reason"]
    assert capture_launches(tb_gpuinsight.load(REPLAY_SPAN)).tokens == []  # a replay-only span captured nothing


def test_plugin_summary_of_a_replay_span_is_rated_from_its_capture():
    """The service's worker entry (what the TensorBoard tabs read) merges the run's capture span too."""
    from tb_gpuinsight.store import envelope as cache
    from tb_gpuinsight import service

    status, data, _ = service.summarize_file(str(REPLAY_SPAN), ())
    assert status == "ok"
    summary = cache.load_summary(data)
    acts = summary.eff.activities
    graph = acts["graph"].astype(bool)
    assert (acts["source"][graph] == SOURCES.index("capture")).all()
    info = summary.sections["shape_sources"].info
    assert info["kernel_time_share"]["graph capture"] > 0.9 and info["graph_capture"]["merged"] == 57


def test_capture_with_the_replays_launch_grids_wins_a_tie():
    """Two captures of the same kernels (one per batch size): the one whose launch grids are the replay's is taken,
    whatever the order they are given in."""
    from tb_gpuinsight.analysis.kernels.graph_capture import CaptureLaunches, _best_segment

    sig = (("k1", "k2"), ((4, 1, 1), (8, 1, 1)))
    trace = tb_gpuinsight.load(REPLAY_SPAN)

    def capture(grids):
        return CaptureLaunches(trace, np.array([0, 1]), ["k1", "k2"], np.zeros(2, np.int64), grids)
    small = _best_segment(sig, capture([(2, 1, 1), (4, 1, 1)]), 0)
    right = _best_segment(sig, capture([(4, 1, 1), (8, 1, 1)]), 1)
    assert right.score > small.score and right.whole(2) and not small.whole(2)
    unknown = _best_segment(sig, capture([None, None]), 2)  # CUDA: no grids on launch calls
    assert unknown.score == (2, 0) and unknown.whole(2)


def test_augmented_replay_carries_the_captured_figures(tmp_path):
    """The augmented download (service worker and API) writes the merged FLOPs onto the replayed kernel events."""
    import gzip

    from tb_gpuinsight import service

    out = tmp_path / "aug.json.gz"
    assert service.augment_file(str(REPLAY_SPAN), str(out), (), None) == ("ok", str(out))
    events = json.load(gzip.open(out))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert sum("kernel_flop" in e["args"] for e in kernels) >= 24  # every replayed GEMM and attention kernel


# ------------------------------------------------------------------------------------------ execution graph

@pytest.mark.parametrize("folder, nodes", [
    ("cuda_graph", {"aten::addmm": 24, "aten::_cudnn_attention_forward": 12, "aten::native_layer_norm": 12,
                    "aten::add": 12, "aten::gelu": 6}),
    ("reduce_overhead", {"aten::addmm": 24, "aten::_cudnn_attention_forward": 12, "triton_poi_fused_gelu_view_2": 6}),
])
def test_the_execution_graph_counts_replayed_kernels_at_their_captured_ops(folder, nodes):
    """The capture span of each H200 pair (its ET beside it) captures the graph and replays it 3 times: each
    replayed kernel counts at the ET node of the op that captured it (eager: nowhere, or the whole compiled
    region), marked "graph capture" as Kernel efficiency and Tensor shapes mark it."""
    from tb_gpuinsight.analysis.graph import view as gv
    from tb_gpuinsight.analysis.graph.build import load_graph

    kineto = sorted((DATA / folder).glob("*.pt.trace.json.gz"))[0]
    graph = load_graph(str(kineto).replace(".pt.trace.json.gz", ".et.json.gz"), kineto)
    acts = graph.efficiency.activities
    replayed = acts["graph"].astype(bool)
    at = {}
    for row, rows in graph.kernels.rows.items():
        n = int(replayed[rows].sum())
        if n:
            at[graph.et.names[row]] = at.get(graph.et.names[row], 0) + n
    assert all(at.get(name) == n for name, n in nodes.items())
    assert "Torch-Compiled Region: 0/0" not in at and sum(at.values()) == int(replayed.sum())
    assert graph.kernels.captured_us.sum() == pytest.approx(acts["dur"][replayed].sum())
    tree = gv.build_tree(graph)
    figs = gv.figures(tree, graph)
    mm = next(r for r in graph.kernels.rows if graph.et.names[r] == "aten::addmm")
    node = gv.node_json(tree, graph, figs, mm)
    assert node["source"] == "graph capture" and node["captured_us"] > 0 and node["kernels"] == 3  # 3 replays
