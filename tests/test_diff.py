"""Run diffs: matching by normalised names or ops, per-span averaging, noise from spans, classes, CLI and route."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.kernels.names import kernel_class, normalize
from tb_gpuinsight.cli import main

CONTROL = "hta/trace_diff__control.json.gz"
TEST = "hta/trace_diff__test.json.gz"
BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"


def test_normalized_names():
    assert normalize("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
                     ) == "at::native::vectorized_elementwise_kernel<at::native::FillFunctor, at::detail::Array>"
    assert normalize("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, 2, -2, "
                     "true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, long)") == \
        "at::native::indexSelectLargeIndex"
    assert normalize("triton_poi_fused_add_cos_sin_0") == normalize("triton_poi_fused_add_cos_sin_3")
    assert normalize("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert normalize("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas") == \
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


@pytest.mark.parametrize("name,kind,op,expected", [
    ("volta_sgemm_128x32_nt", "kernel", None, "GEMM"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>(Flash_fwd_params)", "kernel", None,
     "attention"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float>(...)", "kernel", "aten::cudnn_convolution",
     "conv"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel", None, "communication"),
    ("Memcpy HtoD (Pageable -> Device)", "memcpy", None, "memcpy"),
    ("void at::native::reduce_kernel<512, 1>(...)", "kernel", "aten::sum", "reduction"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(...)", "kernel",
     "aten::add", "elementwise"),
    ("some_custom_kernel", "kernel", "aten::addmm", "GEMM"),
])
def test_kernel_classes(name, kind, op, expected):
    assert kernel_class(name, kind, op) == expected


def test_control_vs_test_totals_and_sides(corpus):
    a, b = corpus / CONTROL, corpus / TEST
    result = tb_gpuinsight.diff(a, b, names=("A100", "V100"))
    ea, eb = tb_gpuinsight.analyze(a), tb_gpuinsight.analyze(b)
    assert result.summary["time_us_a"] == pytest.approx(ea.activities["dur"].sum())
    assert result.summary["time_us_b"] == pytest.approx(eb.activities["dur"].sum())
    assert sum(r["time_us_a"] or 0 for r in result.rows) == pytest.approx(ea.activities["dur"].sum())
    assert sum(c["time_us_b"] for c in result.classes) == pytest.approx(eb.activities["dur"].sum())
    assert sum(c["share_of_change"] for c in result.classes) == pytest.approx(1.0)
    statuses = {r["status"] for r in result.rows}
    assert {"added", "removed", "both"} <= statuses
    added = next(r for r in result.rows if r["status"] == "added")
    assert added["time_us_a"] is None and added["time_us_b"] > 0 and added["delta_us"] == added["time_us_b"]
    assert result.summary["devices_a"] == ["NVIDIA A100-PG509-200"]
    assert result.summary["devices_b"] == ["Tesla V100-SXM2-16GB"]
    deltas = [abs(r["delta_us"]) for r in result.rows]
    assert deltas == sorted(deltas, reverse=True)
    exact = tb_gpuinsight.diff(a, b, match="exact")
    assert len(exact.rows) > len(result.rows)  # normalising merges template variants
    df = result.to_pandas()
    assert len(df) == len(result.rows) and {"time_min_a", "delta_us", "class"} <= set(df.columns)


def test_self_diff_is_all_zero(corpus):
    result = tb_gpuinsight.diff(corpus / BERT, corpus / BERT, by="op")
    assert result.rows and all(r["delta_us"] == 0 and r["status"] == "both" for r in result.rows)
    assert result.summary["delta_us"] == 0 and not result.summary["added"] and not result.summary["removed"]
    assert any(r["name"].startswith("aten::addmm [[512]") for r in result.rows)


def _two_span_run(corpus, tmp_path, slow: float):
    """A run of two spans of the BERT trace, the second with every kernel `slow` times longer."""
    run = tmp_path / "two_spans"
    run.mkdir()
    src = corpus / BERT
    shutil.copy(src, run / "w.1700000000000000001.pt.trace.json.gz")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = e["dur"] * slow
    (run / "w.1700000000000000002.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return run


def test_spans_are_averaged_and_noise_flagged(corpus, tmp_path):
    run = _two_span_run(corpus, tmp_path, slow=1.5)
    result = tb_gpuinsight.diff(run, corpus / BERT)
    single = tb_gpuinsight.analyze(corpus / BERT).activities
    kernels = np.isnan(single["memop_bytes"])
    expected_a = (single["dur"][kernels].sum() * 2.5 + single["dur"][~kernels].sum() * 2) / 2
    assert result.summary["spans_a"] == 2 and result.summary["spans_b"] == 1
    assert result.summary["time_us_a"] == pytest.approx(expected_a)
    top = result.rows[0]
    assert top["spread_a"]["max"] == pytest.approx(1.5 * top["spread_a"]["min"])
    assert top["within_noise"] is True  # B equals A's faster span: inside A's spread
    assert result.summary["within_noise"] >= 1


SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SAMPLE_BERT = str(SAMPLES / "bert_h100" / "h100-node.1751410836000000000.pt.trace.json.gz")
SAMPLE_VIT = str(SAMPLES / "vit_h100" / "h100-node.1751410837000000000.pt.trace.json.gz")


def test_cli_diff_formats(corpus, capsys):
    a, b = str(corpus / CONTROL), str(corpus / TEST)
    assert main(["diff", a, b, "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "by class" in out and "GEMM" in out and "share of change" in out
    a, b = SAMPLE_BERT, SAMPLE_VIT  # the other formats on the small sample traces (the output is what is checked)
    assert main(["diff", a, b, "--format", "json", "--top", "0", "--by", "op"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["by"] == "op" and data["rows"] and data["classes"]
    assert main(["diff", a, b, "--format", "csv", "--top", "3"]) == 0
    assert capsys.readouterr().out.count("\n") == 4


QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
VLLM_MI300 = "tracelens/vllm_decode_full__graph_execution.json.gz"


ALEXNET = "hta/benchmark_result_2869224_1695835535_trace.json.gz"


def test_op_mode_counts_op_calls_and_launches_apart(corpus):
    result = tb_gpuinsight.diff(corpus / ALEXNET, corpus / BERT, by="op")
    eff = tb_gpuinsight.analyze(corpus / ALEXNET)
    acts = eff.activities
    for row in result.rows:
        if row["status"] == "removed" or row["count_a"] is None:
            continue
        assert row["launches_a"] >= row["count_a"] > 0
    # the A side's launches add up to every activity that has a launching op; op calls to the distinct ops
    with_op = acts["op"] >= 0
    assert sum(r["launches_a"] or 0 for r in result.rows if r["count_a"] is not None) == int(with_op.sum())
    assert sum(r["count_a"] or 0 for r in result.rows) == len(np.unique(acts["op"][with_op]))
    assert any(r["launches_a"] > r["count_a"] for r in result.rows if r["count_a"])  # ops launching several kernels
    kernel_mode = tb_gpuinsight.diff(corpus / ALEXNET, corpus / BERT)
    assert all(r["count_a"] == r["launches_a"] for r in kernel_mode.rows)
    assert all({"display_name", "demangled", "kernel_class"} <= set(r) for r in kernel_mode.rows)


def test_cross_vendor_kernel_diff_suggests_ops(corpus):
    result = tb_gpuinsight.diff(corpus / QWEN_H100, corpus / VLLM_MI300)
    assert result.summary["matched_share"] < 0.3
    assert result.summary["suggest"]["by"] == "op" and "barely match" in result.summary["suggest"]["why"]
    same = tb_gpuinsight.diff(corpus / BERT, corpus / BERT)
    assert same.summary["matched_share"] == pytest.approx(1.0) and same.summary["suggest"] is None


def test_most_comparable_prefers_the_same_workers_spans_then_same_device_and_ops():
    from tb_gpuinsight.analysis.diff.compare import most_comparable

    spans = {("r1", "w"): ["s1", "s2"], ("r2", "w"): ["t1"], ("r3", "w"): ["u1"], ("r4", "x"): ["v1"]}
    facts = {("r1", "w", "all"): ({"H100"}, {"aten::mm", "aten::add", "aten::relu"}),
             ("r2", "w", "t1"): ({"V100"}, {"aten::mm", "aten::add", "aten::relu"}),
             ("r3", "w", "u1"): ({"H100"}, {"aten::mm", "aten::add", "aten::relu", "aten::gelu"}),
             ("r4", "x", "v1"): ({"H100"}, {"aten::conv2d"})}
    describe = lambda sel: tuple(map(frozenset, facts[sel])) if sel in facts else None  # noqa: E731
    assert most_comparable(("r1", "w", "s2"), spans, describe)["b"] == {"run": "r1", "worker": "w", "span": "s1"}
    first = most_comparable(("r1", "w", "s1"), spans, describe)
    assert first["b"]["span"] == "s2" and "next span" in first["why"]
    pick = most_comparable(("r1", "w", "all"), spans, describe)
    assert pick["b"] == {"run": "r3", "worker": "w", "span": "u1"} and "75%" in pick["why"]
    none = most_comparable(("r4", "x", "v1"), spans, describe)
    assert none["b"] is None and "pick B" in none["why"]


def test_suggest_and_device_override_routes(tmp_path):
    """Through TensorBoard's WSGI app on the sample logdir: the suggested B, the device picker's facts and a
    validated `device_name` override that re-rates the selection."""
    import os
    import time

    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    samples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")
    logdir = tmp_path / "logdir"
    shutil.copytree(samples, logdir, ignore=shutil.ignore_patterns("*.md", "*.py"))
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    client = Client(application.TensorBoardWSGI([plugin]))

    def get(route, **query):
        response = client.get(f"/data/plugin/gpuinsight/{route}", query_string=query)
        return response.status_code, json.loads(response.get_data(as_text=True))

    end = time.time() + 60
    while time.time() < end and not (len(service.runs_json()["runs"]) >= 4 and
                                     all(r["status"] == "ready" for r in service.runs_json()["runs"])):
        time.sleep(0.1)
    runs = {r["run"]: r for r in service.runs_json()["runs"]}
    cpu = runs["cpu_mlp"]["workers"][0]
    first, second = (s["span"] for s in cpu["spans"])
    code, body = get("diff/suggest", run="cpu_mlp", worker=cpu["worker"], span=second)
    assert code == 200 and body["b"]["span"] == first and "previous span" in body["why"]
    mi250 = runs["minitoy_mi250"]["workers"][0]
    sel = {"run": "minitoy_mi250", "worker": mi250["worker"], "span": mi250["spans"][0]["span"]}
    code, body = get("diff/suggest", **sel)
    assert code == 200 and body["b"] is None and "pick B" in body["why"]
    code, dev = get("devices", **sel)
    assert code == 200 and "AMD Instinct MI300X" in dev["datasheet"] and "torch" not in dev
    # matched from its properties to MI250, which is of the architecture its Tensile names give away: kept
    assert dev["hint"]["name"] == "AMD Instinct MI250 (one GCD)" and "gfx90a" in dev["hint"]["why"]
    code, forced = get("devices", device_name="AMD Instinct MI300X", **sel)
    assert code == 200 and forced["devices"][0]["spec"]["name"] == "AMD Instinct MI300X"
    code, bad = get("devices", device_name="../etc/passwd", **sel)
    assert code == 400 and "not a datasheet device" in bad["error"]


def test_class_split_does_not_depend_on_the_grouping(corpus):
    """The same work split by kernel class whether rows are kernels or ops (+ shapes), names matched exactly or
    normalised: an op row holds kernels of several classes, and each keeps its own class in the split."""
    from tb_gpuinsight.analysis.diff.compare import diff

    a, b = corpus / CONTROL, corpus / TEST
    by_kernel = {c["class"]: (c["time_us_a"], c["time_us_b"]) for c in tb_gpuinsight.diff(a, b).classes}
    ea, eb = tb_gpuinsight.analyze(a), tb_gpuinsight.analyze(b)  # what tb_gpuinsight.diff compares, once
    for by, match in (("op", "normalized"), ("op", "exact"), ("kernel", "exact")):
        result = diff(ea, eb, by=by, match=match)
        other = {c["class"]: (c["time_us_a"], c["time_us_b"]) for c in result.classes}
        assert other.keys() == by_kernel.keys(), by
        for name, (ta, tb) in by_kernel.items():
            assert other[name] == (pytest.approx(ta), pytest.approx(tb)), (by, name)
