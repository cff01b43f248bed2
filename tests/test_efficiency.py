"""Efficiency analysis: correlation, FLOP/byte attribution, device rating, augmented traces, analyze/diff CLI."""
from __future__ import annotations

import csv
import gzip
import io
import json
import re

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.ranks.collectives import is_communication
from tb_gpuinsight.analysis.kernels.efficiency import busy_time, is_copy_event, kernel_name_dtype
from tb_gpuinsight.analysis.kernels.rows import group_rows
from tb_gpuinsight.cli import main
from tb_gpuinsight.errors import GpuInsightError

from .corpus import corpus_files, plain_json

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
KINETO_FILES = [p for p in corpus_files() if tb_gpuinsight.sniff(p).kind == "kineto"]
H100 = [p for p in KINETO_FILES if p.name.startswith("h100__")]
GEMM_OR_ATTENTION_OPS = re.compile(r"^aten::(addmm|mm|bmm|baddbmm|_scaled_mm|_flash_attention_(forward|backward)|"
                                   r"_efficient_attention_(forward|backward)|_scaled_dot_product_\w+attention\w*)$")


def test_golden_addmm_kernel_of_bert(corpus):
    """One addmm of the H100 BERT trace, computed by hand from its raw event."""
    path = corpus / BERT
    doc = plain_json(path)
    events = doc["traceEvents"]
    op = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"
              and e["args"]["Input Dims"] == [[512], [141, 512], [512, 512], [], []])
    kernels = [e for e in events if e.get("cat") == "kernel" and e["args"].get("External id") ==
               op["args"]["External id"]]
    assert len(kernels) == 1
    kernel = kernels[0]
    m, k, n = 141, 512, 512
    flops = 2 * m * k * n                                   # 73,924,608
    nbytes = 2 * (n + m * k + k * n + m * n)                # bias + A + B read, C written, bf16 = 814,080
    seconds = kernel["dur"] * 1e-6
    tflops = flops / seconds / 1e12
    pct_peak = tflops / 989.4                              # H100 SXM5 dense bf16
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    row = int(np.flatnonzero(acts["event"] == events.index(kernel))[0])
    assert acts["flops"][row] == flops == 73_924_608
    assert acts["bytes"][row] == nbytes == 814_080
    assert acts["tflops"][row] == pytest.approx(tflops, rel=1e-12)
    assert acts["pct_peak"][row] == pytest.approx(pct_peak, rel=1e-12)
    assert acts.strings["rate_dtype"][acts["rate_dtype"][row]] == "bf16"
    assert eff.devices[0].match.spec.name == "NVIDIA H100 SXM5 80GB"


@pytest.mark.parametrize("path", KINETO_FILES, ids=[p.name for p in KINETO_FILES])
def test_every_corpus_trace_analyzes(path):
    if path.stat().st_size > 200e6:
        pytest.skip("GB-scale trace: left to benchmarks")
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    trace = eff.trace
    assert len(acts) == len(trace.kernels) + len(trace.memops), "no activity may vanish"
    # An op's FLOPs go to its kernels exactly once (helpers and copies take 0; graph replays are not its work).
    kernel = ~is_copy_event(acts) & ~acts["graph"].astype(bool)
    for row, est in list(eff.op_estimates.items())[:300]:
        mine = (acts["op"] == row) & kernel
        if est.flops is not None and mine.any():
            assert np.nansum(acts["flops"][mine]) == pytest.approx(est.flops, rel=1e-9)
    # Nothing physically impossible unmarked; no summary above 100 %.
    over = acts["over_roof"]
    with np.errstate(invalid="ignore"):
        assert not ((acts["pct_peak"] > 1.0) & ~over).any()
        assert not ((acts["pct_dram"] > DRAM_MARGIN) & ~over).any()
        assert not ((acts["efficiency"] > 1.0) & ~over).any()
    assert (acts["reason"][over] == CODES.index("over_roof")).all()
    on_link = is_communication(acts) & np.isfinite(acts["efficiency"])  # rated on the interconnect instead
    no_estimate = ~is_copy_event(acts) & ~on_link & (np.isnan(acts["flops"]) | np.isnan(acts["bytes"]))
    assert (acts["reason"][no_estimate] > 0).all(), "every kernel without an estimate says why"
    for report in eff.devices.values():
        s = report.summary
        assert s["kernel_time_us"] >= 0 and (s["efficiency"] is None or 0 <= s["efficiency"] <= 1.0)
        assert sum(r["time_share"] for r in s["reasons"]) <= 1.0 + 1e-9
    by_name = eff.by_name()
    assert by_name["count"].sum() == len(acts)
    assert by_name["total_us"].sum() == pytest.approx(acts["dur"].sum())
    with np.errstate(invalid="ignore"):
        assert not ((by_name["efficiency"] > 1.0) & ~by_name["over_roof"]).any()


@pytest.mark.parametrize("path", H100, ids=[p.name for p in H100])
def test_h100_gemm_and_attention_kernels_have_flops(path):
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    assert len(eff.by_name()) > 0
    op_names = acts.strings["op_name"]
    gemm = np.array([c >= 0 and bool(GEMM_OR_ATTENTION_OPS.match(op_names[c])) for c in acts["op_name"]])
    roles = np.array(acts.strings["role"], dtype=object)[acts["role"]]
    gemm &= roles == "compute"  # the GEMM kernels, not the workspace memsets or epilogues these ops also launch
    assert gemm.any()
    assert not np.isnan(acts["flops"][gemm]).any()
    assert (acts["pct_peak"][gemm] > 0).all()


def test_orphan_kernels_stay_and_inherit_from_twins(corpus):
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    acts = eff.activities
    orphans = acts["op"] < 0
    assert orphans.sum() >= 436  # launched before the profiling window: no External id, no launch event
    reasons = acts.strings["flops_reason"]
    inferred = np.array([reasons[c].startswith("no launching op: FLOPs") for c in acts["flops_reason"]])
    assert (inferred & orphans).sum() > 0 and not np.isnan(acts["flops"][inferred]).any()


def test_2022_traces_link_by_launch_time(corpus):
    eff = tb_gpuinsight.analyze(corpus / "hta" / "trace_diff__control.json.gz")
    links = eff.activities["link"]
    assert (links == 3).mean() > 0.95  # External id there is the correlation id: linked by time on the thread
    names = eff.activities.strings["op_name"]
    top = {names[c] for c in eff.activities["op_name"][:500] if c >= 0}
    assert "aten::mm" in top or "aten::addmm" in top


def test_unknown_device_is_unknown_not_zero(corpus, tmp_path):
    """The vLLM replay names no device (an empty name): its Tensile kernels (ISA942) suggest the MI300X row, which
    rates it, saying so; a trace naming no device whose kernel names suggest none stays unknown, never zero."""
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "vllm_decode_full__graph_execution.json.gz")
    report = next(iter(eff.devices.values()))
    assert report.match.spec.name == "AMD Instinct MI300X" and report.match.how.startswith("suggested by")
    path = _write_trace(tmp_path, {"id": 0, "name": ""}, [
        ("aten::mm", [[64, 64], [64, 64]], ["float", "float"], [("kernel", "my_gemm_kernel", 10.0, {})])])
    eff = tb_gpuinsight.analyze(path, execution_traces=[])
    report = next(iter(eff.devices.values()))
    assert report.match.spec is None and "unknown" in report.match.how
    assert report.summary["efficiency"] is None
    assert np.isnan(eff.activities["pct_peak"]).all()


def test_dtype_and_device_overrides(corpus, tmp_path):
    path = corpus / BERT
    auto = tb_gpuinsight.analyze(path)
    tf32 = tb_gpuinsight.analyze(path, dtype="tf32")
    gemm = auto.activities["flops"] > 0  # (data movement has 0 FLOPs: 0 % of any peak)
    ratio = tf32.activities["pct_peak"][gemm] / auto.activities["pct_peak"][gemm]
    assert ratio == pytest.approx(989.4 / 494.7)
    a100 = tb_gpuinsight.analyze(path, device="NVIDIA A100-SXM4-80GB")
    assert a100.devices[0].match.spec.name.startswith("NVIDIA A100") and "forced" in a100.devices[0].match.how
    custom = tmp_path / "devices.json"
    custom.write_text(json.dumps([{"name": "NVIDIA H100 SXM5 80GB", "vendor": "nvidia", "match": ["h100"],
                                   "peak_tflops": {"bf16": 100.0}, "dram_gbps": 1000.0,
                                   "source": "https://example.com/lab-measurement"}]))
    mine = tb_gpuinsight.analyze(path, devices_file=custom)
    assert mine.devices[0].match.peak_tflops("bf16") == 100.0
    with pytest.raises(GpuInsightError):
        tb_gpuinsight.analyze(path, dtype="fp7")


def test_kernel_name_dtypes():
    assert kernel_name_dtype("volta_sgemm_128x32_nt") == "fp32"
    assert kernel_name_dtype("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n") == "bf16"
    assert kernel_name_dtype("volta_h884gemm_64x64_ldg8_nn") == "fp16"
    assert kernel_name_dtype("cutlass_80_tensorop_s1688gemm_128x64") == "tf32"
    assert kernel_name_dtype("void at::native::vectorized_elementwise_kernel<4, float>") == ""


def test_busy_time_merges_overlaps():
    ts = np.array([0.0, 5.0, 20.0, 21.0])
    dur = np.array([10.0, 10.0, 1.0, 0.5])
    assert busy_time(ts, dur) == 16.5  # [0, 15) + [20, 21.5)


def test_augment_adds_args_and_keeps_the_rest(corpus, tmp_path):
    src = corpus / BERT
    before = src.read_bytes()
    out = tmp_path / "bert.aug.json.gz"
    assert main(["augment", str(src), str(out)]) == 0
    assert src.read_bytes() == before
    doc = json.load(gzip.open(out))
    orig = plain_json(src)
    assert len(doc["traceEvents"]) == len(orig["traceEvents"])
    assert [k for k in doc if k != "traceEvents"] == [k for k in orig if k != "traceEvents"]
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert all("rated as" in e["args"] for e in kernels)
    rated = [e for e in kernels if "kernel_flop" in e["args"]]
    assert rated and all(e["args"]["kernel_flop"] >= 0 for e in rated)
    assert all("% of peak" in e["args"] for e in rated if e["args"]["kernel_flop"] > 0)
    assert all(e["args"]["kernel_flop"] > 0 for e in rated if "gemm" in e["name"].lower())
    addmm = [e for e in doc["traceEvents"] if e.get("name") == "aten::addmm"]
    assert all(e["args"]["kernel_flop"] > 0 for e in addmm)
    untouched = [e for e in doc["traceEvents"] if e.get("cat") == "python_function"]
    assert untouched == [e for e in orig["traceEvents"] if e.get("cat") == "python_function"]
    plain = tmp_path / "bert.aug.json"
    assert main(["augment", str(src), str(plain)]) == 0
    assert json.loads(plain.read_text())["traceEvents"]


def test_augment_refuses_to_overwrite_input(tmp_path, corpus, capsys):
    copy = tmp_path / "t.json.gz"
    copy.write_bytes((corpus / BERT).read_bytes())
    assert main(["augment", str(copy), str(copy)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert copy.read_bytes() == (corpus / BERT).read_bytes()


def test_analyze_cli_formats(corpus, capsys):
    path = str(corpus / BERT)
    assert main(["analyze", path, "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 SXM5 80GB" in out and "TFLOP/s" in out
    assert main(["analyze", path, "--format", "json", "--by", "op", "--top", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][0]["summary"]["kernel_count"] == 60
    assert sum(r["count"] for r in data["rows"]) == 61  # 60 kernels + 1 memcpy
    assert any(r["op"] == "aten::addmm" and r["flops"] for r in data["rows"])
    assert main(["analyze", path, "--format", "csv", "--top", "3"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3 and "pct_peak" in rows[0]


def test_group_rows_are_json_safe(corpus):
    eff = tb_gpuinsight.analyze(corpus / "hta" / "df_index_resolver.json.gz")
    text = json.dumps(group_rows(eff.by_op()), allow_nan=False)
    assert "NaN" not in text


# ------------------------------------------------------------------ attribution by kernel role, roof, reasons

from tb_gpuinsight.analysis.kernels.efficiency import DRAM_MARGIN, aggregate  # noqa: E402
from tb_gpuinsight.analysis.kernels.helper_bytes import cudnn_transpose_grid  # noqa: E402
from tb_gpuinsight.analysis.kernels.roles import kernel_role  # noqa: E402
from tb_gpuinsight.analysis.kernels.reasons import CODES  # noqa: E402

H100_PROPS = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045460992, "computeMajor": 9,
              "computeMinor": 0, "numSms": 132}
MI300_PROPS = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9,
               "computeMinor": 4, "numSms": 304}


def _write_trace(tmp_path, props, ops):
    """A small Kineto trace: each op is (name, input dims, input types, [(cat, kernel name, dur us, args)])."""
    events, ts, corr = [], 1000.0, 1
    for ext, (name, dims, types, launched) in enumerate(ops, start=1):
        span = sum(d for _, _, d, _ in launched) + 50
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": span,
                       "args": {"External id": ext, "Input Dims": dims, "Input type": types}})
        gpu_ts = ts + 10
        for cat, kname, dur, extra in launched:
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1,
                           "ts": ts + 1, "dur": 1, "args": {"correlation": corr, "External id": ext}})
            events.append({"ph": "X", "cat": cat, "name": kname, "pid": 0, "tid": 7, "ts": gpu_ts, "dur": dur,
                           "args": {"External id": ext, "correlation": corr, "device": 0, "stream": 7,
                                    **({"grid": [1, 1, 1], "block": [256, 1, 1]} if cat == "kernel" else {}),
                                    **extra}})
            gpu_ts += dur + 1
            corr += 1
        ts += span + 10
    path = tmp_path / "hand.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [props], "traceEvents": events}))
    return path


def _op_rows(eff, op_name):
    acts = eff.activities
    code = acts.strings["op_name"].index(op_name)
    return np.flatnonzero(acts["op_name"] == code)


def test_rocm_memset_and_fill_kernel_take_no_flops(tmp_path):
    """A GEMM op on ROCm that also launched a memset without a bytes arg and a runtime fill kernel: the GEMM kernel
    takes all of the op's FLOPs and bytes; the memset (recognised by its event kind) and the fill none."""
    dims, types = [[64], [128, 256], [256, 64], [], []], ["float", "float", "float", "Scalar", "Scalar"]
    path = _write_trace(tmp_path, MI300_PROPS, [("aten::addmm", dims, types, [
        ("gpu_memset", "Memset (Device)", 2.0, {}),
        ("kernel", "__amd_rocclr_fillBufferAligned", 3.0, {}),
        ("kernel", "Cijk_Alik_Bljk_SB_Bias_MT64x16x32", 20.0, {})])])
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    rows = _op_rows(eff, "aten::addmm")
    names = [acts.strings["name"][acts["name"][r]] for r in rows]
    est = eff.op_estimates[int(acts["op"][rows[0]])]
    assert est.flops == 2 * 128 * 256 * 64
    by_name = dict(zip(names, rows.tolist()))
    gemm, memset, fill = by_name["Cijk_Alik_Bljk_SB_Bias_MT64x16x32"], by_name["Memset (Device)"], \
        by_name["__amd_rocclr_fillBufferAligned"]
    assert acts["flops"][gemm] == est.flops and acts["bytes"][gemm] == est.bytes
    assert acts["flops"][memset] == 0 and acts["flops"][fill] == 0
    assert np.isnan(acts["bytes"][memset]) and np.isnan(acts["bytes"][fill])  # unknown, with a reason
    roles = acts.strings["role"]
    assert [roles[acts["role"][r]] for r in (gemm, memset, fill)] == ["compute", "memset", "memset"]
    assert acts.strings["reason"][acts["reason"][fill]] == "helper"
    assert np.nansum(acts["flops"][rows]) == est.flops


def test_cudnn_conv_flops_only_on_the_conv_kernel(corpus):
    """The ViT patch-embedding convolution of the H100 Falconsai trace (X [4, 3, 224, 224], W [768, 3, 16, 16],
    stride 16, bf16): cuDNN launched nchwToNhwc transposes of X and W before its CUTLASS fprop kernel and an
    nhwcToNchw of the output after it. Only the fprop kernel carries the convolution's FLOPs (exactly the op's
    estimate); each transpose reads and writes the tensor it converts, identified by its launch grid."""
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "h100__Falconsai_nsfw_image_detection__1016002.json.gz")
    acts = eff.activities
    rows = _op_rows(eff, "aten::cudnn_convolution")
    rows = rows[np.argsort(acts["ts"][rows])]
    names = [acts.strings["name"][acts["name"][r]] for r in rows]
    conv = [r for r, n in zip(rows, names) if "fprop" in n]
    layout = [r for r, n in zip(rows, names) if "ToNhwcKernel" in n or "ToNchwKernel" in n]
    assert len(conv) == 1 and len(layout) == 3
    op = int(acts["op"][conv[0]])
    est = eff.op_estimates[op]
    assert est.flops > 0
    assert acts["flops"][conv[0]] == est.flops and acts["bytes"][conv[0]] == est.bytes
    x_bytes = 4 * 3 * 224 * 224 * 2                    # 1,204,224
    w_bytes = 768 * 3 * 16 * 16 * 2                    # 1,179,648
    y_bytes = 4 * 768 * (224 // 16) * (224 // 16) * 2  # 1,204,224: [4, 768, 14, 14]
    assert [acts["bytes"][r] for r in layout] == [2 * x_bytes, 2 * w_bytes, 2 * y_bytes] == \
        [2_408_448, 2_359_296, 2_408_448]
    reasons = [acts.strings["bytes_reason"][acts["bytes_reason"][r]] for r in layout]
    assert [t.split(":")[0] for t in reasons] == ["layout transform of input X", "layout transform of weight W",
                                                  "layout transform of output Y"]
    assert all("matched by its launch grid" in t for t in reasons)
    assert all(acts["flops"][r] == 0 for r in layout)
    assert all(np.isnan(acts["tflops"][r]) or acts["tflops"][r] == 0 for r in layout)
    assert all(acts["pct_dram"][r] == pytest.approx(acts["bytes"][r] / (acts["dur"][r] * 1e-6) / 1e9 / 3350.0)
               for r in layout)  # rated on DRAM: H100 SXM5 3,350 GB/s
    assert {acts.strings["role"][acts["role"][r]] for r in layout} == {"layout"}
    assert np.nansum(acts["flops"][rows]) == est.flops
    row = next(r for r in group_rows(eff.by_name()) if "nchwToNhwcKernel" in r["name"])
    assert row["tflops"] is None and row["intensity"] is None and row["bound"] == "memory"


def test_cudnn_transpose_grid_matches_recorded_launches():
    # (ceil(H*W / 32), ceil(C / 32), N): the V100 ResNet-50 and H100 traces' recorded grids
    assert cudnn_transpose_grid((32, 256, 28, 28)) == (25, 8, 32)
    assert cudnn_transpose_grid((256, 256, 3, 3)) == (1, 8, 256)
    assert cudnn_transpose_grid((4, 768, 14, 14)) == (7, 24, 4)


def test_layout_transform_among_inputs_of_different_sizes_stays_unknown(tmp_path):
    """A transform before the conv kernel whose grid matches neither X nor W (a padded copy?): the trace does not
    say which input it converts; an output transform after it is the output (inferred from order)."""
    dims = [[8, 64, 32, 32], [128, 64, 3, 3], [], [], [], [], []]
    types = ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar"]
    path = _write_trace(tmp_path, H100_PROPS, [("aten::cudnn_convolution", dims, types, [
        ("kernel", "void nchwToNhwcKernel<float, float, float, true, false>", 5.0, {"grid": [9, 9, 9]}),
        ("kernel", "volta_scudnn_128x64_relu_interior_nn_v1", 50.0, {}),
        ("kernel", "void nhwcToNchwKernel<float, float, float, true, false>", 5.0, {})])])
    acts = tb_gpuinsight.analyze(path).activities
    reasons = [acts.strings["bytes_reason"][c] for c in acts["bytes_reason"]]
    assert np.isnan(acts["bytes"][0]) and "input X, weight W" in reasons[0] and "does not say" in reasons[0]
    assert acts["reason"][0] == CODES.index("helper")
    assert np.isnan(acts["bytes"][2])  # the output shape needs stride/padding: not recorded here
    assert "output" in reasons[2]


def test_split_k_gemm_reduction_and_zeroing_bytes(corpus):
    """V100 ResNet-50's fc layer: mm [32, 1000] x [1000, 2048] ran as volta_sgemm with grid z = 5 (K in 5 slices)
    and a splitKreduce_kernel: it reads 5 fp32 partial [32, 2048] outputs and writes the output."""
    eff = tb_gpuinsight.analyze(corpus / "kineto" / "worker0.1623143089861.pt.trace.json.gz")
    acts = eff.activities
    names = acts.strings["name"]
    rows = _op_rows(eff, "aten::mm")
    reduce_rows = [r for r in rows if names[acts["name"][r]].startswith("void splitKreduce_kernel")]
    assert reduce_rows
    r = reduce_rows[0]
    op = int(acts["op"][r])
    assert eff.trace.shape(int(eff.trace.ops["shape"][op]))[0] == [[32, 1000], [1000, 2048]]
    numel = 32 * 2048
    assert acts["bytes"][r] == 5 * numel * 4 + numel * 4 == 1_572_864
    assert acts["flops"][r] == 0
    assert "grid z" in acts.strings["bytes_reason"][acts["bytes_reason"][r]]
    mine = acts["op"] == op
    assert np.nansum(acts["flops"][mine]) == eff.op_estimates[op].flops  # the GEMM kernel keeps all FLOPs
    # cuDNN zeroes grad_input (beta = 0) before a dgrad: dY [32, 2048, 7, 7], W [2048, 512, 1, 1] -> dX
    # [32, 512, 7, 7] fp32 written once; its size (no Concrete Inputs in 2021) from the launch, 3136 x 256 threads.
    scale = [i for i in _op_rows(eff, "aten::cudnn_convolution_backward_input")
             if "scalePackedTensor" in names[acts["name"][i]]]
    dims = {i: eff.trace.shape(int(eff.trace.ops["shape"][acts["op"][i]]))[0][1:3] for i in scale}
    first = next(i for i in scale if dims[i] == [[32, 2048, 7, 7], [2048, 512, 1, 1]])
    assert acts["bytes"][first] == 32 * 512 * 7 * 7 * 4 == 3_211_264 and acts["flops"][first] == 0
    assert "inferred from its launch" in acts.strings["bytes_reason"][acts["bytes_reason"][first]]
    assert not acts["over_roof"][scale].any()


def test_split_k_without_a_split_count_is_a_lower_bound(tmp_path):
    """A bf16 GEMM [256, 4096] x [4096, 1024] whose kernel grid does not say the split count: the reduction reads
    at least 2 fp32 partial outputs and writes the bf16 output (lower bound, said so); the bias copy before the
    GEMM of an addmm reads the bias and writes the output."""
    dims = [[1024], [256, 4096], [4096, 1024], [], []]
    types = ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]
    path = _write_trace(tmp_path, H100_PROPS, [("aten::addmm", dims, types, [
        ("kernel", "void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_device>", 4.0, {}),
        ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 40.0, {}),
        ("kernel", "void splitKreduce_kernel<float, __nv_bfloat16, float, float>", 6.0, {})])])
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    numel = 256 * 1024
    assert acts["bytes"][0] == 1024 * 2 + numel * 2            # bias read, output written
    assert acts["bytes"][2] == 2 * numel * 4 + numel * 2       # 2 fp32 partials read, bf16 output written
    assert acts.strings["bytes_reason"][acts["bytes_reason"][2]].startswith("lower bound:")
    assert acts["flops"][0] == acts["flops"][2] == 0 and acts["flops"][1] == 2 * 256 * 4096 * 1024
    assert [acts.strings["role"][c] for c in acts["role"]] == ["epilogue", "compute", "splitk"]


def test_kernel_roles_registry():
    assert kernel_role("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, 0>") == "layout"
    assert kernel_role("batched_transpose_16x64_pack_1x4_ediv_1x2_half") == "layout"
    assert kernel_role("void splitKreduce_kernel<float, float, float, float, true, false>") == "splitk"
    assert kernel_role("volta_scudnn_128x128_stridedB_splitK_small_nn_v1") == "compute"  # conv, not a reduction
    assert kernel_role("Memset (Device)", "memset") == "memset"
    assert kernel_role("__amd_rocclr_copyBuffer") == "memcpy"
    assert kernel_role("SubTensorOpWithScalar1d") == "epilogue"  # MIOpen helper, though "TensorOp" says GEMM
    assert kernel_role("triton_poi_fused_add_0") == "compute"
    assert kernel_role("void fbgemm_gpu::permute_2D_data_kernel<int, float>(int, int)") == "work"
    assert kernel_role("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>") == "work"


def test_over_the_roof_is_marked_and_kept_out(tmp_path):
    """A 4096^3 fp16 GEMM in 10 us would be 13.7 PFLOP/s on an H100 (peak 989 TFLOP/s): marked over the roof with
    its cause, left out of the device's efficiency; a plausible GEMM beside it stays rated."""
    big = ([[4096, 4096], [4096, 4096]], ["c10::Half", "c10::Half"])
    small = ([[1024, 1024], [1024, 1024]], ["c10::Half", "c10::Half"])
    path = _write_trace(tmp_path, H100_PROPS, [
        ("aten::mm", *big, [("kernel", "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", 10.0, {})]),
        ("aten::mm", *small, [("kernel", "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64", 100.0, {})])])
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    over = acts["over_roof"]
    assert over.tolist() == [True, False]
    assert acts["pct_peak"][0] > 10
    cause = acts.strings["roof_cause"][acts["roof_cause"][0]]
    assert cause.startswith("FLOPs of a fused op")
    assert acts.strings["reason"][acts["reason"][0]] == "over_roof"
    summary = eff.devices[0].summary
    assert summary["over_roof_count"] == 1
    assert summary["efficiency"] == pytest.approx(acts["efficiency"][1])
    assert summary["flops"] == acts["flops"][1]
    rows = {r["name"].rsplit("tilesize", 1)[1]: r for r in group_rows(eff.by_name())}
    assert rows["128x128x64"]["over_roof"] is True and rows["128x128x64"]["roof_cause"] == cause
    assert rows["64x64x64"]["over_roof"] is False and rows["64x64x64"]["efficiency"] <= 1


def test_row_rates_are_over_the_same_calls(tmp_path):
    """Two calls of one kernel name: one with FLOPs and bytes, one with FLOPs only (no byte rule). The row's
    TFLOP/s, GB/s and FLOP/byte all describe the first call; the covered share is its share of the time."""
    path = _write_trace(tmp_path, H100_PROPS, [
        ("aten::mm", [[512, 512], [512, 512]], ["float", "float"], [("kernel", "gemm_k", 30.0, {})]),
        ("aten::mm", [[256, 256], [256, 256]], ["float", "float"], [("kernel", "gemm_k", 10.0, {})])])
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    acts.columns["bytes"] = acts["bytes"].copy()
    acts.columns["bytes"][1] = np.nan  # the second call without a byte estimate
    table = aggregate(acts, ("device", "kind", "name"))
    row = group_rows(table)[0]
    assert row["flops"] == acts["flops"][0] and row["bytes"] == acts["bytes"][0]
    assert row["tflops"] == pytest.approx(acts["flops"][0] / 30e-6 / 1e12)
    assert row["gbps"] == pytest.approx(acts["bytes"][0] / 30e-6 / 1e9)
    assert row["intensity"] == pytest.approx(acts["flops"][0] / acts["bytes"][0])
    assert row["covered_share"] == pytest.approx(30 / 40)


def test_reason_codes_for_graph_replay_and_compiled_regions(corpus):
    """vLLM decode replayed from one hipGraphLaunch: its kernels say "graph_replay" unless a twin launch gave
    them figures (without its capture: capture=[]); the MI300X torch.compile trace says why a compiled kernel has
    no estimate."""
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "vllm_decode_full__graph_execution.json.gz", capture=[])
    acts = eff.activities
    graph = acts["graph"].astype(bool)
    assert graph.sum() >= 400
    reasons = np.array(acts.strings["reason"], dtype=object)[acts["reason"]]
    assert set(reasons[graph]) <= {"graph_replay", "", "over_roof", "no_peak", "unknown_device", "helper"}
    assert (reasons[graph] == "graph_replay").sum() > 300
    rows = eff.devices[next(iter(eff.devices))].summary["reasons"]
    assert rows[0]["code"] == "graph_replay" and rows[0]["hint"]
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "torch_compile_triton__trace.json.gz")
    acts = eff.activities
    kernel = ~np.isin(acts["kind"], [i for i, k in enumerate(acts.strings["kind"]) if k != "kernel"])
    no_estimate = kernel & (np.isnan(acts["flops"]) | np.isnan(acts["bytes"]))
    assert (acts["reason"][no_estimate] > 0).all()  # every kernel without an estimate says why
    assert set(CODES[0:1]) == {""}


def test_above_dram_peak_is_cache_resident_only_when_it_fits_the_cache(tmp_path):
    """H100 (3.35 TB/s, 50 MB L2): an add moving 12 MB at 1.5x the DRAM peak can be L2-resident (not marked); one
    moving 1.2 GB at 1.5x cannot, and is marked over the roof with the bytes cause."""
    def add(n, name):
        nbytes = 3 * n * 4  # two fp32 inputs read, one written
        dur = nbytes / (1.5 * 3350e9) * 1e6
        return (name, [[n], [n], []], ["float", "float", "Scalar"],
                [("kernel", f"vectorized_elementwise_kernel<{name}>", dur, {})])
    eff = tb_gpuinsight.analyze(_write_trace(tmp_path, H100_PROPS, [add(1_000_000, "aten::add"),
                                                                     add(100_000_000, "aten::sub")]),
                                execution_traces=[])
    acts = eff.activities
    small, big = _op_rows(eff, "aten::add")[0], _op_rows(eff, "aten::sub")[0]
    assert acts["pct_dram"][small] == pytest.approx(1.5, rel=0.01) and not acts["over_roof"][small]
    assert acts["pct_dram"][big] == pytest.approx(1.5, rel=0.01) and acts["over_roof"][big]
    causes = eff.activities.strings["roof_cause"]
    assert "L2 / Infinity Cache" in causes[acts["roof_cause"][big]]


def test_twins_need_a_recorded_launch_configuration(tmp_path):
    """Kernels without an op take an identical launch's figures only when grid and block were recorded: a kernel
    name alone says nothing about the problem size."""
    events = json.loads(_write_trace(tmp_path, H100_PROPS, [
        ("aten::mm", [[64, 64], [64, 64]], ["float", "float"], [("kernel", "sgemm_64x64", 10.0, {})])]).read_text())
    kernel = next(e for e in events["traceEvents"] if e.get("cat") == "kernel")
    orphan = dict(kernel, ts=kernel["ts"] + 100, args={"device": 0, "stream": 7, "grid": [1, 1, 1],
                                                        "block": [256, 1, 1]})
    blind = dict(kernel, ts=kernel["ts"] + 200, args={"device": 0, "stream": 7})
    events["traceEvents"] += [orphan, blind]
    path = tmp_path / "twins.pt.trace.json"
    path.write_text(json.dumps(events))
    acts = tb_gpuinsight.analyze(path, execution_traces=[]).activities
    order = np.argsort(acts["ts"])
    linked, twin, nameonly = order[0], order[1], order[2]
    assert acts["flops"][linked] == 2 * 64 ** 3 and acts["flops"][twin] == 2 * 64 ** 3
    assert np.isnan(acts["flops"][nameonly])


def test_expert_parallel_kernels_are_communication_with_their_reason(tmp_path):
    """DeepEP's dispatch / combine kernels are communication (not compute without FLOPs): rated on the link when a
    size is recorded, else their reason says the size is missing, and that internode traffic has no NIC figure."""
    path = _write_trace(tmp_path, H100_PROPS, [
        ("aten::mm", [[64, 64], [64, 64]], ["float", "float"], [("kernel", "sgemm_64x64", 10.0, {})]),
        ("deep_ep::dispatch", [[64, 64]], ["float"],
         [("kernel", "void deep_ep::internode::dispatch<4, 8>(int*, int*)", 30.0, {}),
          ("kernel", "void deep_ep::intranode::combine<bf16>(int*)", 20.0, {})])])
    eff = tb_gpuinsight.analyze(path, execution_traces=[])
    acts = eff.activities
    reasons = dict(zip(acts.values("name"), (acts.strings["reason"][r] for r in acts["reason"])))
    assert reasons["void deep_ep::internode::dispatch<4, 8>(int*, int*)"] == "comm_internode"
    assert reasons["void deep_ep::intranode::combine<bf16>(int*)"] == "comm_unsized"
    assert is_communication(acts).sum() == 2
    assert eff.summary()[0]["summary"]["compute_flop_share"] == 1.0  # the GEMM is all the compute time


def test_zero_duration_kernels_have_no_rate(tmp_path):
    """A kernel recorded with no duration (or one whose absurd duration was dropped at read time) has no rate, in
    its row and in its group: never an infinite TFLOP/s or % of peak."""
    eff = tb_gpuinsight.analyze(_write_trace(tmp_path, H100_PROPS, [
        ("aten::mm", [[64, 64], [64, 64]], ["float", "float"], [("kernel", "sgemm_64x64", 0.0, {})])]),
        execution_traces=[])
    assert np.isnan(eff.activities["tflops"]).all()
    rows = eff.by_name().to_pandas()
    assert rows["tflops"].isna().all() and rows["pct_peak"].isna().all()
