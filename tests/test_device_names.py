"""Devices by the names people use: `--device` takes "B200", "NVIDIA B200", "MI300X", "h100 sxm" (case, spaces,
dashes and vendor words aside), refuses a name that fits several rows by listing them, suggests rows by model number
for one that fits none; `tb-gpuinsight devices` lists the datasheet's rows."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.cli import main
from tb_gpuinsight.estimate.device_names import resolve_device, words
from tb_gpuinsight.estimate.devices import load_datasheet

from .corpus import corpus_path

H100_TRACE = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
B200 = "NVIDIA B200 (HGX, 1000 W)"
GB200 = "NVIDIA GB200 (NVL72, per GPU)"


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue().strip().splitlines()


@pytest.mark.parametrize("typed,row", [
    ("B200", B200), ("NVIDIA B200", B200), ("nvidia  b200", B200), ("b-200", None),
    ("MI300X", "AMD Instinct MI300X"), ("amd instinct mi300x", "AMD Instinct MI300X"),
    ("h100 sxm", "NVIDIA H100 SXM5 80GB"), ("H100-SXM5", "NVIDIA H100 SXM5 80GB"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),  # the name torch reports: the row's own pattern
    ("A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"), ("A10", "NVIDIA A10"), ("4090", "NVIDIA GeForce RTX 4090"),
    ("nvidia h100 sxm5 80gb", "NVIDIA H100 SXM5 80GB"), ("L40", None), ("mi300", None)])
def test_common_names_name_their_row(typed, row):
    found = resolve_device(typed, load_datasheet())
    assert (found.spec.name if found.spec else None) == row


def test_a_name_fitting_several_rows_lists_them():
    found = resolve_device("a100 80gb", load_datasheet())
    assert found.spec is None and found.fits == ("NVIDIA A100 SXM4 80GB", "NVIDIA A100 PCIe 80GB")
    assert found.refusal("a100 80gb") == ("'a100 80gb' fits 2 datasheet rows: 'NVIDIA A100 SXM4 80GB', "
                                          "'NVIDIA A100 PCIe 80GB'; name one")


def test_a_name_fitting_none_is_answered_by_model_number():
    rows = load_datasheet()
    assert resolve_device("L40", rows).suggestions[0] == "NVIDIA L40S"  # a model beginning with it: not the same GPU
    assert resolve_device("mi300", rows).suggestions[0] == "AMD Instinct MI300X"
    assert set(resolve_device("GH200", rows).suggestions[:3]) == {B200, GB200, "NVIDIA H200 SXM 141GB"}  # the same number
    assert resolve_device("B100", rows).suggestions[0] == B200  # the same letters
    assert resolve_device("xyz", rows).suggestions == ()
    assert words("NVIDIA GeForce RTX-4090") == ("rtx", "4090")


def test_analyze_rates_as_the_row_a_common_name_gives():
    trace = str(corpus_path(H100_TRACE))
    code, out, err = _cli(["analyze", trace, "--device", "NVIDIA B200", "--top", "1"])
    assert code == 0 and f"-> {B200}" in out, err
    code, _, err = _cli(["analyze", trace, "--device", "H100"])
    assert code == 2 and len(err) == 1 and "fits 3 datasheet rows" in err[0] and "NVIDIA H100 PCIe 80GB" in err[0]
    code, _, err = _cli(["analyze", trace, "--device", "GH200"])
    assert code == 2 and len(err) == 1 and "did you mean 'NVIDIA H200 SXM 141GB'" in err[0] and B200 in err[0]
    code, out, err = _cli(["analyze", trace, "--device", "GB200", "--top", "1"])  # a row of its own
    assert code == 0 and f"-> {GB200}" in out, err
    eff = tb_gpuinsight.analyze(trace, device="b200")  # the API takes the same names
    assert {d.match.spec.name for d in eff.devices.values()} == {B200}


def test_devices_lists_the_datasheet():
    rows = load_datasheet()
    code, out, _ = _cli(["devices"])
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:8] == ["device", "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]
    b200 = next(line for line in lines if line.startswith(B200))
    # dense peaks from the row, its HBM bandwidth, its NVLink and its source
    assert b200.split()[5:12] == ["37", "75", "1,100", "2,250", "2,250", "4,500", "4,500"], b200
    assert "7,700" in b200 and "NVLink 5.0 1,800 GB/s" in b200 and "https://www.nvidia.com/" in b200
    assert f"{len(rows)} row(s)" in lines[-1]
    code, out, _ = _cli(["devices", "--format", "json"])
    listed = json.loads(out)["devices"]
    assert code == 0 and [r["name"] for r in listed] == [r.name for r in rows]
    assert next(r for r in listed if r["name"] == B200)["peak_tflops"]["bf16"] == 2250
    code, out, _ = _cli(["devices", "h100"])
    assert code == 0 and out.count("NVIDIA H100") == 3
    code, _, err = _cli(["devices", "GH200"])
    assert code == 2 and len(err) == 1 and B200 in err[0]


def test_the_api_lists_the_same_rows():
    rows = tb_gpuinsight.devices()
    assert [r["name"] for r in rows] == [r.name for r in load_datasheet()]
    assert [r["name"] for r in tb_gpuinsight.devices("NVIDIA B200")] == [B200]
    assert len(tb_gpuinsight.devices("h100")) == 3
    with pytest.raises(tb_gpuinsight.ConfigError, match="did you mean"):
        tb_gpuinsight.devices("GH200")
