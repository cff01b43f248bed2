"""The model's config as an input (estimate/model_config.py, estimate/model_sized.py): ops that find their expert
weights or KV cache by layer name are sized from the served model's Hugging Face config.json.

The first-principles check is a gated expert MLP MoE layer of known sizes: 2 x tokens x top-k x 3 x hidden x
intermediate FLOPs. Traces here are synthetic Kineto files written with the fields torch.profiler records for a
vLLM `moe_forward` launch (shapes as in the corpus' vLLM decode capture); the corpus trace is checked as well."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.errors import ConfigError
from tb_gpuinsight.estimate.model_config import load_model_config
from tb_gpuinsight.estimate.model_sized import size_from_config

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "data", "model_configs")
GPT_OSS_120B = os.path.join(CONFIGS, "gpt-oss-120b.config.json")
GPT_OSS_20B = os.path.join(CONFIGS, "gpt-oss-20b.config.json")
CORPUS = os.path.join(HERE, "..", "..", "shared", "traces", "tracelens")
B200 = {"id": 0, "name": "NVIDIA B200", "totalGlobalMem": 191_000_000_000, "computeMajor": 10, "computeMinor": 0,
        "numSms": 148}
BF16 = "c10::BFloat16"
MX_GEMM = ("bmm_MxE2m1_MxE4m3_Bfloat16_t128x8x256u2_s6_et128x8_m128x8x32_cga1x1x1_16dp256b_rM_TN_transOut_"
           "schedS_biasFp32_bN_swiGlu_dynBatch_sm100f")
T, H, I, TOPK, EXPERTS = 888, 2880, 2880, 4, 128  # tokens of the step, gpt-oss-120b's sizes
KERNEL_US = 80_000  # 177 TFLOP of experts in 80 ms: 2.2 PFLOP/s, under a B200's peak


def moe_trace(tmp_path, width=H, experts=EXPERTS, name="vllm::moe_forward", kernels=(MX_GEMM,), config=None):
    """A vLLM step's MoE layer as torch.profiler records it: moe_forward(hidden[T, width], router_logits[T, E],
    layer_name) launching its expert kernels (cudaLaunchKernel -> kernel by correlation id)."""
    op = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 100, "dur": 200,
          "args": {"External id": 7, "Input Dims": [[T, width], [T, experts], []],
                   "Input type": [BF16, BF16, "std::string"], "Concrete Inputs": ["", "", "model.layers.0.mlp"]}}
    events = [op]
    for i, kernel in enumerate(kernels):
        corr = 10 + i
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 120 + 50 * i, "dur": 5, "args": {"correlation": corr, "External id": 7}})
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 200 + KERNEL_US * i,
                       "dur": KERNEL_US, "args": {"correlation": corr, "External id": 7, "device": 0, "stream": 7,
                                           "grid": [148, 1, 1], "block": [128, 1, 1]}})
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "rank0.1700000000000.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [B200], "traceEvents": events}))
    if config is not None:
        (tmp_path / "model_config.json").write_text(json.dumps(config))
    return path


def _col(eff, col):
    acts = eff.activities
    return [acts.strings[col][c] if c >= 0 else "" for c in acts[col].tolist()]


def test_a_gated_moe_layer_is_2_tokens_topk_3_hidden_intermediate(tmp_path):
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path), model_config=GPT_OSS_120B)
    acts = eff.activities
    assert acts["flops"].sum() == 2 * T * TOPK * (3 * H * I)
    reason = _col(eff, "flops_reason")[0]
    assert reason.startswith("model config (hidden_size, intermediate_size, num_local_experts, num_experts_per_tok)")
    assert "top-4" in reason and _col(eff, "source")[0] == "model config" and _col(eff, "gap")[0] == ""
    # bytes: every expert the 3552 routed rows can reach (all 128) read once as MXFP4 (+ scales), the tokens read
    # and written, the intermediates (2I gate+up, I activation) written and read, the router logits read
    weights = EXPERTS * 3 * H * I * (0.5 + 1 / 32)
    expected = weights + 2 * T * TOPK * 3 * I * 2 + 2 * T * H * 2 + T * EXPERTS * 2
    assert acts["bytes"][0] == pytest.approx(expected)
    assert "mxfp4 weights" in _col(eff, "bytes_reason")[0]


def test_the_layer_flops_split_among_its_kernels_by_time(tmp_path):
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path, kernels=(MX_GEMM, MX_GEMM.replace("swiGlu", "none"))),
                                model_config=GPT_OSS_120B)
    assert eff.activities["flops"].sum() == pytest.approx(2 * T * TOPK * 3 * H * I)
    assert len(eff.activities) == 2


def test_a_hidden_size_padded_by_the_kernel_is_read_from_the_recorded_activation(tmp_path):
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path, width=3072), model_config=GPT_OSS_120B)
    assert eff.activities["flops"][0] == 2 * T * TOPK * 3 * 3072 * I
    assert "hidden_size 2880 padded to 3072 by the kernel (recorded activation)" in _col(eff, "flops_reason")[0]


def test_without_a_config_the_reason_names_the_keys_that_would_rate_it(tmp_path):
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path), model_config="")
    assert np.isnan(eff.activities["flops"][0]) and _col(eff, "gap")[0] == "hidden_size"
    reason = _col(eff, "flops_reason")[0]
    for key in ("--model-config", "hidden_size", "moe_intermediate_size", "num_local_experts", "num_experts_per_tok"):
        assert key in reason


def test_a_config_of_another_model_is_refused_with_its_reason(tmp_path):
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path, experts=32), model_config=GPT_OSS_120B)
    assert np.isnan(eff.activities["flops"][0])
    assert "the router scores 32 experts but num_local_experts is 128" in _col(eff, "flops_reason")[0]
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path, width=1024), model_config=GPT_OSS_120B)
    assert "1024 wide but hidden_size is 2880" in _col(eff, "flops_reason")[0]


def test_a_config_missing_a_key_says_which(tmp_path):
    partial = {"hidden_size": H, "intermediate_size": I, "num_local_experts": EXPERTS}
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path), model_config=partial)
    assert "the config lacks num_experts_per_tok" in _col(eff, "flops_reason")[0]


def test_tensor_and_expert_parallel_sizes_give_the_ranks_share(tmp_path):
    config = dict(json.load(open(GPT_OSS_120B)), tensor_parallel_size=4)
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path), model_config=config)
    assert eff.activities["flops"][0] == 2 * T * TOPK * 3 * H * (I // 4)
    config = dict(json.load(open(GPT_OSS_120B)), expert_parallel_size=8)
    eff = tb_gpuinsight.analyze(moe_trace(tmp_path), model_config=config)
    assert eff.activities["flops"][0] == 2 * T * TOPK * 3 * H * I / 8
    assert "balanced routing" in _col(eff, "flops_reason")[0]


def test_model_config_json_in_the_run_directory_is_used_by_default(tmp_path):
    path = moe_trace(tmp_path, config=json.load(open(GPT_OSS_120B)))
    assert tb_gpuinsight.analyze(path).activities["flops"][0] == 2 * T * TOPK * 3 * H * I
    assert np.isnan(tb_gpuinsight.analyze(path, model_config="").activities["flops"][0])


def test_sliding_window_bounds_attention_only_when_every_layer_slides():
    dims = ((32, 64, 64), (32, 8, 64), (32, 8, 64), (32, 64, 64), (), (), (), (0,))
    types = (BF16,) * 4 + ("", "", "", BF16)
    concrete = ("",) * 8
    mixed = load_model_config(GPT_OSS_20B)
    est = size_from_config("vllm::unified_attention_with_output", dims, types, concrete, mixed)
    assert est.flops is None and "12 of 24 layers attend the full context" in est.flops_reason
    sliding = dict(json.load(open(GPT_OSS_20B)), layer_types=["sliding_attention"] * 24)
    est = size_from_config("vllm::unified_attention_with_output", dims, types, concrete, load_model_config(sliding))
    assert est.flops == 4 * 32 * 128 * 64 * 64  # each query token against at most the 128-token window
    assert est.bytes == 2 * 32 * 64 * 64 * 2 + 32 * 128 * 2 * 8 * 64 * 2
    assert est.flops_reason.startswith("upper bound: model config (sliding_window 128)")


@pytest.mark.parametrize("text, words", [
    ("not json", "not JSON"),
    ("[1, 2]", "a model config is a JSON object"),
    ('{"vocab_size": 10}', "not a model's config.json"),
    ('{"hidden_size": -4}', "hidden_size must be a positive integer"),
    ('{"hidden_size": 2880, "num_experts_per_tok": true}', "num_experts_per_tok must be a positive integer"),
])
def test_a_bad_config_is_refused_in_one_line(tmp_path, text, words):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_model_config(path)


def test_the_cli_takes_model_config_and_refuses_a_bad_one(tmp_path):
    trace = moe_trace(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    cmd = [sys.executable, "-m", "tb_gpuinsight.cli"]
    out = subprocess.run(cmd + ["analyze", str(trace), "--format", "json", "--model-config", GPT_OSS_120B],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert sum(r["flops"] for r in rows) == 2 * T * TOPK * 3 * H * I
    for command in ("analyze", "overview", "report"):
        bad = subprocess.run(cmd + [command, str(trace), "--model-config", str(tmp_path / "missing.json")],
                             capture_output=True, text=True, env=env)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert "cannot read the model config" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    bad = subprocess.run(cmd + ["diff", str(trace), str(trace), "--model-config", str(tmp_path)],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_the_overview_and_report_take_the_config(tmp_path):
    trace = moe_trace(tmp_path)
    with_config = tb_gpuinsight.overview(trace, model_config=GPT_OSS_120B)
    without = tb_gpuinsight.overview(trace, model_config="")
    assert with_config.steps[0]["flops"] == 2 * T * TOPK * 3 * H * I
    assert not without.steps[0].get("flops")


def test_the_run_directory_config_changes_the_summary_key_and_sizes_the_summary(tmp_path):
    from tb_gpuinsight.logdir import discover
    from tb_gpuinsight.store.envelope import load_summary
    from tb_gpuinsight.store.jobs import span_job
    from tb_gpuinsight.store.worker import summarize_job

    moe_trace(tmp_path / "run")
    (run,) = discover(tmp_path)
    before = span_job(str(tmp_path), run, run.spans()[0])
    assert run.model_config is None and before.model_config is None
    (tmp_path / "run" / "model_config.json").write_text(open(GPT_OSS_120B).read())
    (run,) = discover(tmp_path)
    job = span_job(str(tmp_path), run, run.spans()[0])
    assert run.model_config is not None and job.model_config.endswith("model_config.json")
    assert job.key != before.key
    kind, payload, _ = summarize_job(job)
    assert kind == "ok"
    acts = load_summary(payload, job.identity).eff.activities
    assert acts["flops"].sum() == 2 * T * TOPK * 3 * H * I
    (tmp_path / "run" / "model_config.json").write_text("{}")
    (run,) = discover(tmp_path)
    kind, reason, _ = summarize_job(span_job(str(tmp_path), run, run.spans()[0]))
    assert kind == "error" and "not a model's config.json" in reason


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="corpus traces (../shared/traces) not present")
def test_the_corpus_vllm_decode_moe_is_sized_with_its_padded_hidden_size():
    """gpt-oss-20b served by vLLM on an MI300X: moe_forward records hidden states [32, 3072] (2880 padded for
    MXFP4) and router logits [32, 32]; the kernels' own sub-ops still size the expert GEMMs (they record more)."""
    config = load_model_config(GPT_OSS_20B)
    dims = ((32, 3072), (32, 32), (), ())
    est = size_from_config("vllm::moe_forward", dims, (BF16, BF16, "", ""), ("",) * 4, config)
    assert est.flops == 2 * 32 * 4 * 3 * 3072 * 2880 and "padded to 3072" in est.flops_reason
    trace = os.path.join(CORPUS, "vllm_decode_full__graph_execution.json.gz")
    plain = tb_gpuinsight.analyze(trace, model_config="")
    sized = tb_gpuinsight.analyze(trace, model_config=config)
    for eff in (plain, sized):
        names = eff.activities.strings["name"]
        ogs = np.isin(eff.activities["name"], [i for i, n in enumerate(names) if n.startswith("_matmul_ogs")])
        assert set(np.array(_col(eff, "flops_reason"))[ogs].tolist()) and \
            all(r.startswith("from graph capture: sub-op shapes") for r in np.array(_col(eff, "flops_reason"))[ogs])
    assert sized.summary()[0]["summary"]["compute_flop_share"] >= plain.summary()[0]["summary"]["compute_flop_share"]
