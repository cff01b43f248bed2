"""Shapes from Execution Traces and inferred convolution parameters (analysis/enrich.py), end to end: Python API,
CLI, and the plugin's summaries (keyed on their ET)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace
from tb_gpuinsight.analysis.enrich import AMBIGUOUS, enrich, shape_sources, solve_conv_params
from tb_gpuinsight.cli import main as cli_main
from tb_gpuinsight.trace.et import load_et

from .corpus import corpus_path

ADD_TRACE, ADD_ET = "hta/benchmark_simple_add_trace.json.gz", "hta/benchmark_simple_add_et.json.gz"
DLRM = "param/dlrm_8ranks/worker{}_step_12.{}.{}.json.gz"
DLRM0 = [DLRM.format(0, 1694128201545, kind) for kind in ("pt.trace", "et")]
RESNET_2021 = "kineto/worker0.1623143089861.pt.trace.json.gz"


def _flop_share(eff) -> float:
    return eff.summary()[0]["summary"]["compute_flop_share"] or 0.0


def _sources(trace):
    return trace.ops.values("shape_source")


# ------------------------------------------------------------------------------------------------ ET shapes

def test_et_shapes_fill_a_trace_recorded_without_shapes():
    trace = tb_gpuinsight.load(corpus_path(ADD_TRACE))
    et_path = corpus_path(ADD_ET)
    assert (trace.ops["shape"] < 0).all()  # recorded without record_shapes
    report = enrich(trace, [et_path])
    assert report.execution_traces[0]["used"] and report.et_shapes == 28
    names, sources = trace.ops.values("name"), _sources(trace)
    adds = [r for r, n in enumerate(names) if n == "aten::add"]
    assert adds and all(sources[r] == "ET shapes" for r in adds)
    # The reader's own representation: Kineto's type names and Concrete Inputs strings.
    dims, types, concrete = trace.shape(int(trace.ops["shape"][adds[0]]))
    et = load_et(et_path)
    node = next(i for i, n in enumerate(et.names) if n == "aten::add")
    assert dims[:2] == et.inputs[node].shapes[:2]
    assert types[0] == "float" and all(t in ("float", "Scalar") for t in types)
    assert concrete[0] == "" and len(concrete) == len(dims)


def test_et_shapes_give_estimates_where_the_trace_had_none():
    path = corpus_path(ADD_TRACE)
    bare = analyze_trace(tb_gpuinsight.load(path))
    filled = tb_gpuinsight.analyze(path, execution_traces=[corpus_path(ADD_ET)])
    # without shapes only data movement is known (0 FLOPs whatever its shapes); no byte figure at all
    flops = bare.activities["flops"]
    assert np.nanmax(flops) == 0.0 and _flop_share(filled) > _flop_share(bare)
    assert bare.summary()[0]["summary"]["byte_time_share"] == 0.0
    assert filled.summary()[0]["summary"]["byte_time_share"] == pytest.approx(1.0)
    info = shape_sources(filled.trace, filled.activities)
    assert info["kernel_time_share"]["ET shapes"] == pytest.approx(1.0)


def test_et_values_fill_concrete_inputs_of_recorded_shapes_and_discovery_pairs_the_rank():
    trace = tb_gpuinsight.load(corpus_path(DLRM0[0]))
    corpus_path(DLRM0[1])
    assert tb_gpuinsight.companion_execution_traces(trace.meta.path)[0].endswith(DLRM0[1].split("/")[-1])
    eff = tb_gpuinsight.analyze(trace)  # discovers its own ET
    report = trace.enrichment
    used = [e for e in report.execution_traces if e["used"]]
    assert len(used) == 1 and used[0]["method"] == "external id" and used[0]["offset"] == 1
    assert report.et_concrete > 0 and report.et_shapes == 0
    sources = _sources(trace)
    assert "recorded + ET values" in sources and "recorded" in sources
    assert shape_sources(trace, eff.activities)["kernel_time_share"]["recorded + ET values"] > 0.5


def test_an_et_of_another_process_is_not_used():
    trace = tb_gpuinsight.load(corpus_path("hta/benchmark_result_2869224_1695835535_trace.json.gz"))
    before = trace.ops["shape"].copy()
    report = enrich(trace, [corpus_path(ADD_ET), corpus_path(DLRM0[1])])
    assert [e["used"] for e in report.execution_traces] == [False, False]
    assert "another process" in report.execution_traces[0]["reason"]
    assert np.array_equal(trace.ops["shape"], before)


def test_an_unreadable_et_is_reported_not_raised(tmp_path):
    trace = tb_gpuinsight.load(corpus_path(ADD_TRACE))
    bad = tmp_path / "w.et.json"
    bad.write_text('{"schema": "1.0.1", "nodes": [', encoding="utf-8")
    report = enrich(trace, [bad])
    assert report.execution_traces == [{"path": str(bad), "used": False, "reason": report.execution_traces[0]
                                        ["reason"]}]
    assert "truncated" in report.execution_traces[0]["reason"]


def test_enrich_runs_once_per_trace():
    trace = tb_gpuinsight.load(corpus_path(ADD_TRACE))
    first = enrich(trace, [corpus_path(ADD_ET)])
    assert enrich(trace, [corpus_path(ADD_ET)]) is first
    assert _sources(trace).count("ET shapes") == 28


# ----------------------------------------------------------------------------------- convolution parameters

@pytest.mark.parametrize("size,kernel,out,expected", [
    (224, 7, 112, (2, 3, 1)),  # ResNet stem
    (56, 3, 56, (1, 1, 1)),
    (56, 3, 28, (2, 1, 1)),
    (56, 1, 28, (2, 0, 1)),
    (7, 1, 7, (1, 0, 1)),
    (2, 1, 1, None),  # strides 2, 3 and 4 all fit: ambiguous
    (56, 3, 52, None),  # dilation 2 pad 0 or dilation 3 pad 1: ambiguous
    (56, 3, 80, None),  # no convolution gives this
])
def test_solve_conv_params(size, kernel, out, expected):
    assert solve_conv_params(size, kernel, out) == expected


def test_solutions_reproduce_torch_output_sizes():
    torch = pytest.importorskip("torch")
    for size in (7, 14, 17, 56, 224):
        for kernel in (1, 3, 5, 7):
            for stride in (1, 2, 4):
                for pad in range(kernel // 2 + 1):
                    x = torch.empty(1, 1, size, 1)
                    w = torch.empty(1, 1, kernel, 1)
                    out = torch.nn.functional.conv2d(x, w, stride=(stride, 1), padding=(pad, 0)).shape[2]
                    got = solve_conv_params(size, kernel, out)
                    if got is not None:  # whatever is accepted gives the observed output
                        s, p, d = got
                        assert (size + 2 * p - d * (kernel - 1) - 1) // s + 1 == out


def test_conv_parameters_inferred_on_a_2021_resnet():
    trace = tb_gpuinsight.load(corpus_path(RESNET_2021))
    bare = analyze_trace(trace)
    report = enrich(trace)
    assert report.inferred > 900 and report.ambiguous == 0
    eff = analyze_trace(trace)
    assert _flop_share(eff) > _flop_share(bare) + 0.3  # 22 % -> 68 % of kernel time
    names, sources = trace.ops.values("name"), _sources(trace)
    stem = next(r for r, n in enumerate(names) if n == "aten::cudnn_convolution")
    assert sources[stem] == "inferred"
    dims, _, concrete = trace.shape(int(trace.ops["shape"][stem]))
    assert dims[:2] == [[32, 3, 224, 224], [64, 3, 7, 7]]
    assert concrete[2:6] == ["[3, 3]", "[2, 2]", "[1, 1]", "1"]  # cudnn_convolution(x, w, padding, stride, ...)
    est = eff.op_estimates[stem]
    assert est.flops == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7  # 2 * N * Cout * Hout * Wout * Cin * kh * kw
    weight_grads = [r for r, n in enumerate(names) if n == "aten::cudnn_convolution_backward_weight"]
    assert all(eff.op_estimates[r].flops for r in weight_grads if r in eff.op_estimates)


def _profiled_conv_without_concrete_inputs(tmp_path, size, **conv_args):
    """A real torch CPU profile of conv -> relu, then Concrete Inputs removed as in a 2021-23 trace.
    Returns (trace, row of aten::convolution, its estimate from the recorded parameters)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from tb_gpuinsight.estimate.flops import estimate_op, freeze

    conv = torch.nn.Conv2d(8, 16, 3, **conv_args)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.relu(conv(torch.randn(2, 8, size, size)))
    path = tmp_path / "conv.pt.trace.json"
    prof.export_chrome_trace(str(path))
    trace = tb_gpuinsight.load(path)
    row = trace.ops.values("name").index("aten::convolution")
    recorded = estimate_op("aten::convolution", *(freeze(v) for v in trace.shape(int(trace.ops["shape"][row]))))
    for r in np.flatnonzero(trace.ops["shape"] >= 0).tolist():
        trace.shapes.append(trace.shapes[int(trace.ops["shape"][r])][:2] + (b"",))
        trace.ops["shape"][r] = len(trace.shapes) - 1
    return trace, row, recorded


def test_recorded_conv_with_concrete_inputs_stripped_gets_the_same_flops(tmp_path):
    """Stride-2 conv followed by relu: the next op's input gives the output shape, and the inferred parameters
    give the FLOPs the recorded ones give."""
    from tb_gpuinsight.estimate.flops import estimate_op, freeze

    trace, row, recorded = _profiled_conv_without_concrete_inputs(tmp_path, 32, stride=2, padding=1)
    assert recorded.flops == 2 * 2 * 16 * 16 * 16 * 8 * 3 * 3
    report = enrich(trace)
    assert report.inferred >= 1 and trace.ops.values("shape_source")[row] == "inferred"
    inferred = estimate_op("aten::convolution", *(freeze(v) for v in trace.shape(int(trace.ops["shape"][row]))))
    assert inferred.flops == recorded.flops


def test_ambiguous_conv_is_left_unknown_with_the_reason(tmp_path):
    """Dilation 2 without padding maps 20 to 16, as dilation 3 with padding 1 does: no unique answer."""
    trace, row, recorded = _profiled_conv_without_concrete_inputs(tmp_path, 20, dilation=2)
    assert recorded.flops == 2 * 2 * 16 * 16 * 16 * 8 * 3 * 3
    report = enrich(trace)
    assert report.ambiguous >= 1 and report.inferred == 0
    assert trace.ops.values("shape_note")[row] == AMBIGUOUS
    assert trace.ops.values("shape_source")[row] == "recorded"


# --------------------------------------------------------------------------------------------- CLI and plugin

def test_cli_analyze_says_where_shapes_came_from(capsys):
    trace, et = corpus_path(ADD_TRACE), corpus_path(ADD_ET)
    assert cli_main(["analyze", str(trace), "--et", str(et)]) == 0
    out = capsys.readouterr().out
    assert "shapes of kernel time: ET shapes 100.0%" in out
    assert "benchmark_simple_add_et.json.gz: used, 28 ops linked by external id" in out
    assert cli_main(["analyze", str(trace), "--et", "", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)["shape_sources"]
    assert info["execution_traces"] == [] and info["kernel_time_share"]["no shapes"] == pytest.approx(1.0)


def test_summary_is_redone_when_an_et_appears(tmp_path):
    from tb_gpuinsight.service import LogdirService

    run = tmp_path / "logdir" / "add"
    run.mkdir(parents=True)
    shutil.copy(corpus_path(ADD_TRACE), run / "w.1700000000000.pt.trace.json.gz")
    service = LogdirService(str(tmp_path / "logdir"), cache_dir=str(tmp_path / "cache"), workers=0)
    try:
        service.scan()
        (span,) = service.runs["add"].spans.values()
        first_key = span.key
        (state, section), = service.sections("add", span.worker, span.span, "shape_sources")
        assert section.check().info["execution_traces"] == []
        shutil.copy(corpus_path(ADD_ET), run / "w.1700000000000.et.json.gz")
        service.scan()
        (span,) = service.runs["add"].spans.values()
        assert span.key != first_key and span.status == "ready"
        (state, section), = service.sections("add", span.worker, span.span, "shape_sources")
        info = section.check().info
        assert info["execution_traces"][0]["used"] and info["kernel_time_share"]["ET shapes"] == pytest.approx(1.0)
    finally:
        service.stop()


# ------------------------------------------------------------------------------- shapes across iterations

LINEAR = ("param/linear_kineto.json.gz", "param/linear_et.json.gz")  # 2023: 40 iterations, the ET covers one


@pytest.fixture(scope="module")
def linear():
    """The linear pair loaded and analysed with its ET once for the tests below (they only read it)."""
    trace = tb_gpuinsight.load(corpus_path(LINEAR[0]))
    return trace, tb_gpuinsight.analyze(trace, execution_traces=[corpus_path(LINEAR[1])])


def test_et_of_one_iteration_fills_every_iteration_that_repeats_it(linear):
    """The 2023 linear pair: without propagation only the ET's own iteration has shapes (about 2 % of kernel
    time); every other iteration whose op sequence repeats it takes them, marked "ET shapes, propagated"."""
    trace, eff = linear
    info = shape_sources(trace, eff.activities)
    share = info["kernel_time_share"]
    assert share["ET shapes"] < 0.05
    assert share["ET shapes, propagated"] > 0.8
    assert info["et_iterations"] >= 2 * 38  # forward and autograd threads, of 39 other iterations each
    assert _flop_share(eff) > 0.75


def test_propagated_shapes_agree_with_the_kernels_they_launched(linear):
    """An independent check: kernels of one name and launch configuration do one problem size, so the ops that
    launched them (ET-filled or propagated) must carry one FLOP count per (kernel, grid, block)."""
    trace, eff = linear
    acts = eff.activities
    source = np.array(_sources(trace), dtype=object)
    rows = np.flatnonzero((acts["op"] >= 0) & ~np.isnan(acts["flops"]))
    flops_by_launch = {}
    propagated = 0
    for r in rows.tolist():
        op = int(acts["op"][r])
        if source[op] not in ("ET shapes", "ET shapes, propagated"):
            continue
        propagated += source[op] == "ET shapes, propagated"
        est = eff.op_estimates[op]
        key = (int(acts["name"][r]), int(acts["grid"][r]), int(acts["block"][r]))
        flops_by_launch.setdefault(key, set()).add(est.flops)
    assert propagated > 5000  # kernels rated through propagated shapes
    assert all(len(v) == 1 for v in flops_by_launch.values())


def test_iterations_pair_exact_and_near_repeats():
    from tb_gpuinsight.analysis.enrich import _iterations

    body = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    names = np.array(body + body + [1, 2, 3, 99, 4, 5, 6, 7, 8, 9, 10] + [50] * 5)  # then something else
    found = _iterations(names, 10, 20)  # the template is the second copy
    spans = sorted((int(t[0]), int(t[-1])) for _, t in found)
    assert spans == [(0, 9), (20, 30)]  # before it exactly; after it with one op inserted (99 left out)
    assert all((names[m] == names[t]).all() for m, t in found)
    assert _iterations(np.array(body + [60, 61, 62, 63, 64, 65, 66, 67, 68, 69]), 0, 10) == []


def test_ops_the_iterations_could_not_match_are_sized_by_call_stack_or_named(linear):
    """Ops no repeated op sequence reached take the one shape their call stack (name, rank among same-named
    siblings, enclosing ops; in a backward node also its forward op's shapes) had in the ET-sized iterations:
    about 10 % of kernel time without shapes before, under 7 % after. Ops of a kind the ET sized that are still without shapes (their iteration's op sequence did not repeat the
    ET's) are listed by name with their count, so the gap is visible, not silent."""
    trace, eff = linear
    info = shape_sources(trace, eff.activities)
    unmatched = info["et_unmatched"]
    assert "aten::mm" not in unmatched  # the backward mm of every layer: by call stack, rank and forward op
    assert info["et_by_call_stack"] > 500 and info["kernel_time_share"]["no shapes"] < 0.07
    names = trace.ops.values("name")
    for name, count in unmatched.items():
        rows = [i for i, n in enumerate(names) if n == name]
        assert count == sum(int(trace.ops["shape"][i]) < 0 for i in rows) > 0
    assert list(unmatched.values()) == sorted(unmatched.values(), reverse=True)
