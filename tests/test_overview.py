"""Overview: the per-step time split (exact, every idle cause on a hand-made trace), headline figures, the
recommendation rules on real corpus traces (one where each fires, one where it must not), route, CLI and API."""
from __future__ import annotations

import gzip
import json
import os

import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.overview import CATEGORIES, build_overview
from tb_gpuinsight.analysis.kernels.names import display_name
from tb_gpuinsight.analysis.overview.rules import RULES
from tb_gpuinsight.cli import main

from .corpus import CORPUS, corpus_files, corpus_path
from .test_plugin import BERT, _client, _get, logdir  # noqa: F401 (fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")


# ------------------------------------------------------------------------------------------ hand-made trace

def _x(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr}}


def _launch(ts, corr, name="cudaLaunchKernel", dur=5):
    return _x("cuda_runtime", name, ts, dur, correlation=corr)


# One 1000 us step. Expected split (us), each interval chosen to exercise one rule:
#   GEMM K1 [0,100) + K3 [610,700) = 190; elementwise K2 [300,400) + K4 [720,760) = 140; memcpy [410,415) = 5
#   NCCL [650,710): 50 under K3 (overlapped), [700,710) exposed = 10
#   data loading: DataLoader __next__ [100,280) = 180
#   host-bound: aten::add [280,298) (gap 200 us >= 50) = 18, aten::relu [760,900) = 140 -> 158
#   other: [298,300) K2 already launched (queued) = 2, [600,610) no host activity = 10, [900,1000) = 100 -> 112
#   synchronisation: cudaStreamSynchronize [410,420) then no launch until 600 -> [415,600) idle = 185
#   launch-bound: [400,410) gap of 10 us + [710,720) gap of 10 us (K4's launch [714,719) ends inside it) = 20
EXPECTED = {"gemm": 190, "elementwise": 140, "memcpy": 5, "communication": 10, "data_loading": 180,
            "host_bound": 158, "idle_other": 112, "sync": 185, "launch_bound": 20}


def _hand_made_events():
    return [
        _x("user_annotation", "ProfilerStep#1", 0, 1000),
        _launch(-20, 1), _kernel("ampere_sgemm_128x64_nn", 0, 100, 1),
        _x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180),
        _x("cpu_op", "aten::add", 280, 18), _launch(290, 2),
        _kernel("void at::native::vectorized_elementwise_kernel<4, add>", 300, 100, 2),
        _x("cpu_op", "aten::item", 400, 120), _launch(405, 3, "cudaMemcpyAsync"),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 410,
         "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 3, "bytes": 4}},
        _launch(410, 0, "cudaStreamSynchronize", 10),
        _launch(600, 4), _kernel("ampere_sgemm_128x64_nn", 610, 90, 4),
        _launch(640, 5), _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 650, 60, 5, stream=20),
        _x("cpu_op", "aten::mul", 700, 20), _launch(714, 6),
        _kernel("void at::native::vectorized_elementwise_kernel<4, mul>", 720, 40, 6),
        _x("cpu_op", "aten::relu", 760, 140),
    ]


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory):
    path = tmp_path_factory.mktemp("hand") / "w.1.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": _hand_made_events()}))
    return tb_gpuinsight.overview(str(path))


def test_every_idle_cause_on_known_intervals(hand_made):
    (step,) = hand_made.steps
    assert step["wall_us"] == pytest.approx(1000)
    got = {k: round(step[f"{k}_us"], 6) for k in CATEGORIES if step[f"{k}_us"]}
    assert got == EXPECTED
    assert step["comm_overlapped_us"] == pytest.approx(50)
    assert step["gpu_busy_us"] == pytest.approx(190 + 140 + 5 + 10)
    assert step["kernel_count"] == 5 and step["sync_calls"] == 1


def test_breakdown_frame_sums_to_wall(hand_made):
    frame = hand_made.breakdown_frame()
    parts = frame.drop(columns=["span", "step", "wall_us"]).sum(axis=1)
    assert parts.iloc[0] == pytest.approx(frame["wall_us"].iloc[0])


def test_overlapping_streams_counted_once_by_precedence(tmp_path):
    events = [_x("user_annotation", "ProfilerStep#3", 0, 100),
              _kernel("ampere_sgemm_128x64_nn", 0, 60, 1), _kernel("vectorized_elementwise_kernel", 40, 50, 2, 9)]
    path = tmp_path / "w.2.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (step,) = tb_gpuinsight.overview(str(path)).steps
    assert step["gemm_us"] == 60 and step["elementwise_us"] == 30  # [40,60) overlap goes to GEMM, once
    assert step["gpu_busy_us"] == 90 and step["step"] == "step 3"


# ------------------------------------------------------------------------------------------ corpus

def _kineto_corpus():
    from tb_gpuinsight.logdir import KINETO, sniff

    return [str(p.relative_to(CORPUS)) for p in corpus_files() if sniff(str(p)).kind == KINETO]


_CACHE: dict = {}


def _overview(rel: str):
    if rel not in _CACHE:
        path = corpus_path(rel) if not rel.startswith("samples/") else _sample(rel)
        _CACHE[rel] = tb_gpuinsight.overview(str(path))
    return _CACHE[rel]


def _sample(rel: str) -> str:
    folder = os.path.join(ROOT, rel)
    return os.path.join(folder, sorted(os.listdir(folder))[0])


@pytest.mark.parametrize("rel", _kineto_corpus() or ["(corpus absent)"])
def test_breakdown_sums_to_step_wall_time_on_corpus(rel):
    ov = _overview(rel)
    assert ov.steps or ov.missing
    for row in ov.steps:
        total = sum(row[f"{k}_us"] for k in ov.categories)  # a CPU-only trace's split is CPU time
        assert abs(total - row["wall_us"]) <= 1e-3 * row["wall_us"], (row["step"], total, row["wall_us"])
        assert row["gpu_busy_us"] <= row["wall_us"] * (1 + 1e-9)


def _rule(ov, rule_id):
    return next((r for r in ov.recommendations if r["id"] == rule_id), None)


# rule id -> (trace where it fires, trace where it must not)
RULE_CASES = {
    # BERT's small GEMMs and flash attention reach a few % of their roof (the A100 rank's slow GEMMs are CUDA-graph
    # replays whose figures are unknown, not low)
    "low_efficiency": ("samples/bert_h100", "hta/df_index_resolver.json.gz"),
    "fp32_matmul": ("kineto/worker0.1623143089861.pt.trace.json.gz", "samples/bert_h100"),
    "host_launch_bound": ("samples/vit_h100", "kineto/worker0.1623143089861.pt.trace.json.gz"),
    "tiny_elementwise": ("kineto/worker0.1623143089861.pt.trace.json.gz", "samples/bert_h100"),
    "pageable_memcpy": ("kineto/worker0.1623143089861.pt.trace.json.gz", "samples/bert_h100"),
    "sync_in_step": ("param/dlrm_8ranks/worker0_step_12.1694128201545.pt.trace.json.gz",
                     "kineto/worker0.1623143089861.pt.trace.json.gz"),
    "dataloader_stall": ("kineto/worker0.1623143089861.pt.trace.json.gz", "samples/bert_h100"),
    "exposed_comm": ("param/dlrm_8ranks/worker0_step_12.1694128201545.pt.trace.json.gz",
                     "kineto/worker0.1623143089861.pt.trace.json.gz"),
    "profiler_stack": ("tracelens/h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz",
                       "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
}


def test_every_rule_has_a_case():
    assert set(RULE_CASES) == {r.id for r in RULES}


@pytest.mark.parametrize("rule_id", sorted(RULE_CASES))
def test_rule_fires_and_stays_quiet(rule_id):
    fires, quiet = RULE_CASES[rule_id]
    hit = _rule(_overview(fires), rule_id)
    assert hit is not None, f"{rule_id} should fire on {fires}"
    assert hit["recoverable_us"] > 0 and hit["threshold"] and hit["advice"] and hit["figures"]
    assert _rule(_overview(quiet), rule_id) is None, f"{rule_id} must not fire on {quiet}"


def test_rule_evidence_figures():
    resnet = _overview("kineto/worker0.1623143089861.pt.trace.json.gz")
    dl = _rule(resnet, "dataloader_stall")
    assert dl["figures"]["idle_share"] > 0.25  # ~33 % of each ResNet50 step waits on the DataLoader
    fp32 = _rule(resnet, "fp32_matmul")
    assert fp32["figures"]["target_dtype"] == "fp16"  # V100: no TF32, autocast fp16
    assert fp32["links"] and fp32["links"][0]["tab"] == "kernels"
    pageable = _rule(resnet, "pageable_memcpy")
    assert pageable["figures"]["bytes_per_step"] > 1e6
    dlrm = _overview("param/dlrm_8ranks/worker0_step_12.1694128201545.pt.trace.json.gz")
    comm = _rule(dlrm, "exposed_comm")
    assert comm["figures"]["exposed_share"] > 0.3 and "nccl" in comm["items"][0]["name"].lower()
    sync = _rule(dlrm, "sync_in_step")
    assert sync["items"][0]["call"] == "cudaStreamSynchronize" and sync["items"][0]["op"] == "aten::copy_"
    shares = [r["recoverable_us"] for r in dlrm.recommendations]
    assert shares == sorted(shares, reverse=True)


def test_headline_figures_bert():
    ov = _overview("samples/bert_h100")
    h = ov.headline
    assert h["steps"] == 1 and h["mfu_dtype"] == "bf16" and h["peak_tflops"] == pytest.approx(989.4)
    # MFU = FLOPs / wall / peak, from the step row itself
    flops, wall = ov.steps[0]["flops"], ov.steps[0]["wall_us"]
    assert h["mfu"] == pytest.approx(flops / (wall * 1e-6) / 1e12 / 989.4)
    assert 0 < h["compute_flop_share"] <= 1 and 0 < h["tensor_core_share"] <= 1
    assert h["kernels_per_step"] == 60


def test_cpu_only_run_reports_what_is_missing():
    ov = tb_gpuinsight.overview(os.path.join(SAMPLES, "cpu_mlp"))
    assert len(ov.spans) == 2 and len(ov.steps) == 2
    assert not ov.recommendations
    assert any("no GPU activities" in m for m in ov.missing)


# ------------------------------------------------------------------------------------------ CLI, route

def test_cli_formats(capsys):
    run = os.path.join(SAMPLES, "bert_h100")
    assert main(["overview", run]) == 0
    out = capsys.readouterr().out
    assert "= wall time" in out and "MFU" in out
    assert main(["overview", run, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"] and data["headline"]["steps"] == 1
    assert main(["overview", run, "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("span,step,")
    assert main(["overview", run, "--worker", "nope"]) == 2


def test_overview_route_and_step_window(logdir, tmp_path):
    client, _ = _client(logdir, tmp_path)
    status, data = _get(client, "overview", **BERT)
    assert status == 200, data
    (step,) = data["steps"]
    assert sum(step[f"{c['key']}_us"] for c in data["categories"]) == pytest.approx(step["wall_us"], rel=1e-3)
    assert data["headline"]["mfu_dtype"] == "bf16" and data["recommendations"]
    # the step's time window scopes the kernel table to the kernels that started in it
    window = {"t0": step["start_us"], "t1": step["end_us"]}
    status, scoped = _get(client, "kernels", **BERT, **window)
    assert status == 200 and sum(r["count"] for r in scoped["rows"]) == step["kernel_count"] + 1  # + 1 memcpy
    status, empty = _get(client, "kernels", **BERT, t0=0, t1=1)
    assert status == 200 and empty["total"] == 0
    assert _get(client, "kernels", **BERT, t0="x", t1=2)[0] == 400
    assert _get(client, "kernels", **BERT, t0=5, t1=2)[0] == 400
    status, cpu = _get(client, "overview", run="cpu_mlp", worker="cpu-worker")
    assert status == 200 and len(cpu["spans"]) == 2 and cpu["missing"] and not cpu["recommendations"]
    assert _get(client, "overview", run="nope", worker="x")[0] == 404


def test_tensor_core_classification():
    from tb_gpuinsight.analysis.kernels.names import uses_tensor_cores

    assert uses_tensor_cores("volta_h884gemm_64x64_ldg8_nn", "", "GEMM")
    assert uses_tensor_cores("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", "", "GEMM")
    assert uses_tensor_cores("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", "fp32", "GEMM")
    assert uses_tensor_cores("flash_fwd_kernel", "bf16", "attention")  # matrix work in a Tensor Core dtype
    assert not uses_tensor_cores("volta_sgemm_128x64_nn", "fp32", "GEMM")
    assert not uses_tensor_cores("vectorized_elementwise_kernel", "bf16", "elementwise")


def test_api_frames(hand_made):
    spans = hand_made.spans_frame()
    assert list(spans["span"]) == ["w.1.pt.trace.json"] and spans["steps"].iloc[0] == 1
    steps = hand_made.steps_frame()
    assert {"wall_us", "gemm_us", "sync_us", "comm_overlapped_us", "kernel_count"} <= set(steps.columns)
    assert hand_made.headline["gpu_busy_pct"] == pytest.approx(0.345)


def test_recommendation_items_name_kernels_readably(capsys):
    """A recommendation's kernels carry their display name beside the raw one (links look the raw one up); the CLI
    prints the display name, never a raw template name."""
    result = tb_gpuinsight.overview(os.path.join(SAMPLES, "bert_h100"))
    items = [it for rec in result.recommendations for it in rec["items"] if it.get("name", "").startswith("void ")]
    assert items and all(it["display_name"] and not it["display_name"].startswith("void ") for it in items)
    assert main(["overview", os.path.join(SAMPLES, "bert_h100")]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("   - ")]
    assert printed and not [line for line in printed if "void " in line or "<(" in line]
    links = [link for rec in result.recommendations for link in rec["links"] if link["filter"].startswith("void ")]
    assert links and all(link["label"] == display_name(link["filter"]) for link in links)  # buttons read short
