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
from tb_gpuinsight.analysis.efficiency import busy_time, kernel_name_dtype
from tb_gpuinsight.analysis.rows import group_rows
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
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    trace = eff.trace
    assert len(acts) == len(trace.kernels) + len(trace.memops), "no activity may vanish"
    # FLOPs are split among an op's activities without double counting.
    for row, est in list(eff.op_estimates.items())[:200]:
        mine = acts["op"] == row
        if est.flops is not None and mine.any() and np.isnan(acts["memop_bytes"][mine]).all():
            assert np.nansum(acts["flops"][mine]) == pytest.approx(est.flops, rel=1e-9)
    for report in eff.devices.values():
        s = report.summary
        assert s["kernel_time_us"] >= 0 and (s["efficiency"] is None or s["efficiency"] >= 0)
    by_name = eff.by_name()
    assert by_name["count"].sum() == len(acts)
    assert by_name["total_us"].sum() == pytest.approx(acts["dur"].sum())


@pytest.mark.parametrize("path", H100, ids=[p.name for p in H100])
def test_h100_gemm_and_attention_kernels_have_flops(path):
    eff = tb_gpuinsight.analyze(path)
    acts = eff.activities
    assert len(eff.by_name()) > 0
    op_names = acts.strings["op_name"]
    gemm = np.array([c >= 0 and bool(GEMM_OR_ATTENTION_OPS.match(op_names[c])) for c in acts["op_name"]])
    gemm &= np.isnan(acts["memop_bytes"])  # the kernels, not the workspace memsets these ops also launch
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


def test_unknown_device_is_unknown_not_zero(corpus):
    eff = tb_gpuinsight.analyze(corpus / "tracelens" / "vllm_decode_full__graph_execution.json.gz")
    report = next(iter(eff.devices.values()))
    assert report.match.spec is None and "unknown" in report.match.how
    assert report.summary["efficiency"] is None
    assert np.isnan(eff.activities["pct_peak"]).all()


def test_dtype_and_device_overrides(corpus, tmp_path):
    path = corpus / BERT
    auto = tb_gpuinsight.analyze(path)
    tf32 = tb_gpuinsight.analyze(path, dtype="tf32")
    gemm = ~np.isnan(auto.activities["pct_peak"])
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
    gemm = [e for e in kernels if "kernel_flop" in e["args"]]
    assert gemm and all(e["args"]["kernel_flop"] > 0 and "% of peak" in e["args"] for e in gemm)
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
