"""Serving steps (analysis/overview/serving.py): vLLM's `execute_*` and SGLang's `step[...]` annotations are the
Overview's steps, with phase, batch and tokens, in the JSON, the CLI, the report and the timeline's step lane.

The SGLang trace here is synthetic (no SGLang trace is in the corpus): Kineto events laid out as torch.profiler
writes them for SGLang's scheduler (a CPU `user_annotation` per step and its `gpu_user_annotation` twin), an
extend step running eager kernels and a decode step replaying a HIP graph. The vLLM annotation is checked on the
corpus' real decode trace."""
from __future__ import annotations

import json
import os

import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.serving import parse

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "tracelens")
MI300 = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9,
         "computeMinor": 4, "numSms": 304}


@pytest.mark.parametrize("name, phase, batch, tokens, kv", [
    ("step[DECODE bs=32]", "decode", 32, 32, None),
    ("step[EXTEND bs=15 toks=15360]", "extend", 15, 15360, None),
    ("step[MIXED bs=2]", "mixed", 2, None, None),
    ("step[PREFILL bs=4 toks=512]", "prefill", 4, 512, None),
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)", "decode", 32, 32, 55086),
    ("execute_300_context_3(sq280sk280sqsq26200sqsk26200)_generation_20(sq20sk9000sqsq20sqsk9000)", "mixed", 23,
     300, 9280),
    ("execute_context_3(128)_generation_0(0)", "prefill", 3, 128, None),
])
def test_step_annotations_are_parsed(name, phase, batch, tokens, kv):
    meta = parse(name)
    assert (meta["phase"], meta["batch"], meta["tokens"], meta["kv_tokens"]) == (phase, batch, tokens, kv)


@pytest.mark.parametrize("name", ["ProfilerStep#3", "step", "step[decode]", "execute_model", "executor"])
def test_other_names_are_not_serving_steps(name):
    assert parse(name) is None


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def sglang_trace(tmp_path):
    """An extend step (15 requests, 15360 tokens; two eager kernels of 300 us) then a decode step (32 requests; a
    graph launch replaying three kernels of 100 us), each 1 ms of wall time."""
    events = []
    for ts, name in ((1000, "step[EXTEND bs=15 toks=15360]"), (2000, "step[DECODE bs=32]")):
        events += [_x("user_annotation", name, ts, 400), _x("gpu_user_annotation", name, ts + 50, 700, pid=0, tid=7)]
    for i, kernel in enumerate(("Cijk_Alik_Bljk_BBS_BH_MT128x128x64", "fmha_fwd_kernel")):
        corr = 10 + i
        events += [_x("cpu_op", "aten::mm", 1100 + 100 * i, 50, **{"External id": corr}),
                   _x("cuda_runtime", "hipLaunchKernel", 1110 + 100 * i, 5, correlation=corr, **{"External id": corr}),
                   _x("kernel", kernel, 1200 + 300 * i, 300, pid=0, tid=7, correlation=corr, device=0, stream=7,
                      grid=[64, 1, 1], block=[256, 1, 1])]
    events.append(_x("cuda_runtime", "hipGraphLaunch", 2100, 10, correlation=900, **{"External id": 90}))
    for i in range(3):
        events.append(_x("kernel", f"decode_kernel_{i}", 2200 + 100 * i, 100, pid=0, tid=7, correlation=900,
                         device=0, stream=7, grid=[32, 1, 1], block=[256, 1, 1]))
    events.append(_x("cuda_runtime", "hipDeviceSynchronize", 2900, 100))
    path = tmp_path / "sglang_worker.1700000000000.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [MI300], "traceEvents": events}))
    return path


def test_sglang_steps_have_phase_batch_tokens_and_their_own_gpu_busy(tmp_path):
    result = tb_gpuinsight.overview(sglang_trace(tmp_path), capture=[])
    assert result.source == "serving"
    extend, decode = result.steps
    assert (extend["phase"], extend["batch"], extend["tokens"]) == ("extend", 15, 15360)
    assert (decode["phase"], decode["batch"], decode["tokens"]) == ("decode", 32, 32)
    assert extend["step"] == "step 0 extend bs=15 toks=15360" and decode["step"] == "step 1 decode bs=32 toks=32"
    assert extend["wall_us"] == 1000 and extend["gpu_busy_us"] == 600 and extend["gpu_busy_pct"] == 0.6
    assert decode["gpu_busy_us"] == 300 and decode["kernel_count"] == 3
    phases = result.headline["phases"]
    assert phases["decode"]["steps"] == 1 and phases["decode"]["batch_mean"] == 32
    assert phases["extend"]["gpu_busy_pct"] == 0.6


def test_the_timeline_step_lane_and_the_report_show_serving_steps(tmp_path):
    path = sglang_trace(tmp_path)
    index = tb_gpuinsight.timeline_index(path)
    assert index.steps == ["step[EXTEND bs=15 toks=15360]", "step[DECODE bs=32]"]
    report = json.loads(tb_gpuinsight.report(path, format="json"))
    rows = {r["phase"]: r for r in report["step"]["phases"]["rows"]}
    assert rows["decode"]["batch"] == 32 and rows["extend"]["tokens"] == 15360
    assert "| decode |" in tb_gpuinsight.report(path, format="md")


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="corpus traces (../shared/traces) not present")
def test_the_corpus_vllm_decode_replay_is_one_decode_step_of_32():
    result = tb_gpuinsight.overview(os.path.join(CORPUS, "vllm_decode_full__graph_execution.json.gz"))
    (step,) = result.steps
    assert (step["phase"], step["batch"], step["tokens"], step["kv_tokens"]) == ("decode", 32, 32, 55086)
    assert step["kernel_count"] == 425 and 0 < step["gpu_busy_pct"] < 1
    # its unified attention is sized from the step's 55086 KV tokens: FLOPs known for 96% of compute time (90%
    # before: attention hid its KV cache); the rest is Inductor code without its figures
    eff = tb_gpuinsight.analyze(os.path.join(CORPUS, "vllm_decode_full__graph_execution.json.gz"))
    assert eff.summary()[0]["summary"]["compute_flop_share"] > 0.95


def vllm_attention_trace(tmp_path, annotation):
    """One vLLM step (its execute_* annotation) running one unified_attention_with_output call: query [T, 64, 64],
    key / value [T, 8, 64] (the step's new tokens), one attention kernel of 50 us."""
    tokens = int(annotation.split("_")[1])
    dims = [[tokens, 64, 64], [tokens, 8, 64], [tokens, 8, 64], [tokens, 64, 64], [], [], [], [0]]
    bf16 = "c10::BFloat16"
    events = [_x("user_annotation", annotation, 1000, 500),
              _x("cpu_op", "vllm::unified_attention_with_output", 1100, 100, **{
                  "External id": 5, "Input Dims": dims, "Input type": [bf16] * 4 + ["", "", "", bf16],
                  "Concrete Inputs": [""] * 8}),
              _x("cuda_runtime", "hipLaunchKernel", 1150, 5, correlation=5, **{"External id": 5}),
              _x("kernel", "kernel_unified_attention_2d", 1200, 50, pid=0, tid=7, correlation=5, device=0,
                 stream=7, grid=[8, 1, 1], block=[128, 1, 1])]
    path = tmp_path / "vllm.1700000000000.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [MI300], "traceEvents": events}))
    return path


def test_vllm_decode_attention_is_charged_q_the_kv_it_reads_and_out(tmp_path):
    """8 decode requests with 8000 KV tokens in all: 4 x Hq x D FLOPs per (query, key) pair; the query read, the
    output written, K and V of the 8000 tokens read (not the cache)."""
    path = vllm_attention_trace(tmp_path, "execute_8_context_0(sq0sk0sqsq0sqsk0)_generation_8(sq8sk8000sqsq8sqsk8000)")
    eff = tb_gpuinsight.analyze(path, model_config="")
    acts = eff.activities
    assert acts["flops"][0] == 4 * 64 * 64 * 8000
    assert acts["bytes"][0] == 2 * (8 * 64 * 64 * 2) + 8000 * 2 * 8 * 64 * 2
    reason = acts.strings["flops_reason"][acts["flops_reason"][0]]
    assert reason.startswith("upper bound: step annotation (vLLM sq 8, sk 8000)") and "model config" in reason


def test_vllm_prefill_attention_counts_causal_pairs(tmp_path):
    """One prefill of 100 tokens: 100 x 101 / 2 causal pairs (sqsk - (sqsq - sq) / 2)."""
    path = vllm_attention_trace(tmp_path, "execute_100_context_1(sq100sk100sqsq10000sqsk10000)_generation_0("
                                          "sq0sk0sqsq0sqsk0)")
    assert tb_gpuinsight.analyze(path, model_config="").activities["flops"][0] == 4 * 64 * 64 * (100 * 101 // 2)


def test_sliding_window_layers_are_bounded_by_the_window_with_the_config(tmp_path):
    config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "model_configs",
                          "gpt-oss-20b.config.json")
    path = vllm_attention_trace(tmp_path, "execute_8_context_0(sq0sk0sqsq0sqsk0)_generation_8(sq8sk8000sqsq8sqsk8000)")
    acts = tb_gpuinsight.analyze(path, model_config=config).activities
    # half the layers full (8000 pairs, 8000 KV tokens), half sliding (at most 128 per request: 1024 of each)
    assert acts["flops"][0] == 4 * 64 * 64 * (0.5 * 8000 + 0.5 * 1024)
    assert acts["bytes"][0] == 2 * (8 * 64 * 64 * 2) + (0.5 * 8000 + 0.5 * 1024) * 2 * 8 * 64 * 2


def test_each_step_has_its_mfu_against_the_selections_peak(tmp_path):
    from .test_model_config import GPT_OSS_120B, moe_trace

    path = moe_trace(tmp_path)
    result = tb_gpuinsight.overview(path, model_config=GPT_OSS_120B)
    (step,) = result.steps
    peak = result.headline["peak_tflops"]
    assert step["mfu"] == pytest.approx(step["flops"] / (step["wall_us"] * 1e-6) / 1e12 / peak)
    assert step["mfu"] == pytest.approx(result.headline["mfu"])


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="corpus traces (../shared/traces) not present")
def test_a_step_whose_host_time_dwarfs_its_gpu_time_names_the_profilers_stack_recording():
    """timesformer on an H100 (with_stack: 42,330 python_function events in the trace, 42,205 of them in its one
    383 ms step) idles the GPU 59 % of its step: the profiler's own Python recording is named, with the step's
    rate; Qwen (GPU busy 92 %) is not."""
    rec = {r["id"]: r for r in tb_gpuinsight.overview(
        os.path.join(CORPUS, "h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz")).recommendations}
    figures = rec["profiler_stack"]["figures"]
    assert figures["python_events"] == 42205 and figures["python_events_per_ms"] > 100
    assert (figures["steps_flagged"], figures["steps_judged"]) == (1, 1)
    assert figures["gpu_idle_share"] > 0.5
    qwen = tb_gpuinsight.overview(os.path.join(CORPUS, "h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    assert "profiler_stack" not in {r["id"] for r in qwen.recommendations}


def test_the_python_call_rate_is_judged_per_step(tmp_path):
    """Two steps of 1 ms with the same idle GPU: the first records 60 python_function events (60 per ms), the
    second none. Only the first is the profiler's doing; the trace's rate (30 per ms) would blame both."""
    events = []
    for i, ts in enumerate((1000, 2000)):
        events.append(_x("user_annotation", f"ProfilerStep#{i + 1}", ts, 1000))
        events += [_x("cpu_op", "aten::mm", ts + 100, 50, **{"External id": 10 + i}),
                   _x("cuda_runtime", "cudaLaunchKernel", ts + 110, 5, correlation=10 + i, **{"External id": 10 + i}),
                   _x("kernel", "ampere_sgemm_128x64_nn", ts + 200, 100, pid=0, tid=7, correlation=10 + i, device=0,
                      stream=7, grid=[64, 1, 1], block=[256, 1, 1])]
    events += [_x("python_function", f"model.py(12): f{j}", 1000 + 15 * j, 10) for j in range(60)]
    path = tmp_path / "worker.1700000000000.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [MI300], "traceEvents": events}))
    result = tb_gpuinsight.overview(path)
    assert [r["python_events"] for r in result.steps] == [60, 0]
    rec = {r["id"]: r for r in result.recommendations}["profiler_stack"]
    figures = rec["figures"]
    assert (figures["steps_flagged"], figures["steps_judged"], figures["python_events"]) == (1, 2, 60)
    assert figures["python_events_per_ms"] == pytest.approx(60) and rec["recoverable_us"] == pytest.approx(60 / 2)
