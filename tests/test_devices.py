"""Tests for the device datasheet and the matching of trace devices to it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from tb_gpuinsight.errors import ConfigError
from tb_gpuinsight.estimate.devices import (
    DTYPES, ENV_VAR, DeviceMatch, DeviceSpec, load_datasheet, match_device, normalize_dtype,
)

MIB = 2**20
GIB = 2**30


def props(name: str, sms: Optional[int] = None, major: Optional[int] = None,
          mem: Optional[int] = None) -> Dict[str, Any]:
    """A Kineto deviceProperties entry with only the keys given."""
    p: Dict[str, Any] = {"id": 0, "name": name}
    if sms is not None:
        p["numSms"] = sms
    if major is not None:
        p["computeMajor"] = major
    if mem is not None:
        p["totalGlobalMem"] = mem
    return p


@pytest.fixture(autouse=True)
def no_env_file(monkeypatch):
    """The env var must not leak in from the developer's shell."""
    monkeypatch.delenv(ENV_VAR, raising=False)


# Names as real traces carry them, with the properties those devices report.
REAL_DEVICES = [
    (props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB), "NVIDIA H100 SXM5 80GB"),
    (props("NVIDIA A100-SXM4-80GB", 108, 8, 85198045184), "NVIDIA A100 SXM4 80GB"),
    (props("NVIDIA A100-SXM4-40GB", 108, 8, 42314694656), "NVIDIA A100 SXM4 40GB"),
    (props("NVIDIA A100-PCIE-40GB", 108, 8, 42314694656), "NVIDIA A100 PCIe 40GB"),
    (props("NVIDIA A100 80GB PCIe", 108, 8, 85198045184), "NVIDIA A100 PCIe 80GB"),
    (props("NVIDIA A100-PG509-200", 108, 8, 42314694656), "NVIDIA A100-PG509-200 (SXM4 40GB class)"),
    (props("Tesla V100-SXM2-16GB", 80, 7, 16945709056), "NVIDIA Tesla V100 SXM2 16GB"),
    (props("Tesla V100-SXM2-32GB", 80, 7, 34089730048), "NVIDIA Tesla V100 SXM2 32GB"),
    (props("Tesla V100-DGXS-32GB", 80, 7, 34089730048), "NVIDIA Tesla V100 DGXS 32GB"),
    (props("Tesla V100-PCIE-16GB", 80, 7, 16945709056), "NVIDIA Tesla V100 PCIe"),
    (props("NVIDIA GeForce RTX 2080 Ti", 68, 7, 11554848768), "NVIDIA GeForce RTX 2080 Ti"),
    (props("NVIDIA B200", 148, 10, int(178.35 * GIB)), "NVIDIA B200 (HGX, 1000 W)"),
    (props("NVIDIA H800", 132, 9, 81559 * MIB), "NVIDIA H800 SXM5 80GB"),
    (props("AMD Instinct MI300X", 304, 9, 205822885888), "AMD Instinct MI300X"),
    (props("AMD Instinct MI300X VF", 304, 9, 205822885888), "AMD Instinct MI300X"),
    (props("AMD Instinct MI210", 104, 9, 68702699520), "AMD Instinct MI210"),
    (props("AMD Radeon Graphics", 104, 9, 68702699520), "AMD Instinct MI250 (one GCD)"),
    (props("AMD Radeon Graphics", 110, 9, 68702699520), "AMD Instinct MI250X (one GCD)"),
    (props("AMD Instinct MI250X", 110, 9, 68702699520), "AMD Instinct MI250X (one GCD)"),
    (props("AMD Instinct MI250", 104, 9, 68702699520), "AMD Instinct MI250 (one GCD)"),
    (props("AMD Instinct MI325X", 304, 9, 256 * GIB), "AMD Instinct MI325X"),
    (props("AMD Instinct MI355X", 256, 9, 288 * GIB), "AMD Instinct MI355X"),
    (props("NVIDIA H100 PCIe", 114, 9, 81559 * MIB), "NVIDIA H100 PCIe 80GB"),
    (props("NVIDIA H100 NVL", 132, 9, 95830 * MIB), "NVIDIA H100 NVL 94GB"),
    (props("NVIDIA H200", 132, 9, 143771 * MIB), "NVIDIA H200 SXM 141GB"),
    (props("NVIDIA H200 NVL", 132, 9, 143771 * MIB), "NVIDIA H200 NVL 141GB"),
    (props("NVIDIA L4", 58, 8, 23034 * MIB), "NVIDIA L4"),
    (props("NVIDIA A10G", 80, 8, 23028 * MIB), "NVIDIA A10G"),
    (props("NVIDIA A10", 72, 8, 23028 * MIB), "NVIDIA A10"),
    (props("Tesla T4", 40, 7, 15109 * MIB), "NVIDIA T4"),
    (props("NVIDIA L40S", 142, 8, 45589 * MIB), "NVIDIA L40S"),
    (props("NVIDIA GeForce RTX 4090", 128, 8, 24217 * MIB), "NVIDIA GeForce RTX 4090"),
    (props("NVIDIA GeForce RTX 3090", 82, 8, 24268 * MIB), "NVIDIA GeForce RTX 3090"),
    (props("NVIDIA A800-SXM4-80GB", 108, 8, 85198045184), "NVIDIA A800 SXM4 80GB"),
]


@pytest.mark.parametrize("p,expected", REAL_DEVICES, ids=[f"{p['name']}-{p.get('numSms')}" for p, _ in REAL_DEVICES])
def test_real_trace_names_match_expected_row(p, expected):
    m = match_device(p)
    assert m.spec is not None, m.how
    assert m.spec.name == expected, m.how
    assert m.trace_name == p["name"]
    assert "\n" not in m.how


@pytest.mark.parametrize("p,expected", REAL_DEVICES, ids=[f"{p['name']}-{p.get('numSms')}-noprops"
                                                           for p, _ in REAL_DEVICES])
def test_names_alone_match_when_name_is_specific(p, expected):
    """Without properties every specific name still lands on the row (ties go to the first, commonest row)."""
    m = match_device({"name": p["name"]})
    if p["name"] == "AMD Radeon Graphics":
        assert m.spec is None and "unknown" in m.how
    elif p.get("numSms") == 104 and "MI250" in expected:
        assert m.spec.name == expected
    else:
        assert m.spec is not None and m.spec.name == expected, m.how


def test_names_alone_pick_exact_rows_for_specific_names():
    assert match_device({"name": "NVIDIA H100 80GB HBM3"}).spec.name == "NVIDIA H100 SXM5 80GB"
    assert match_device({"name": "NVIDIA H100 PCIe"}).spec.name == "NVIDIA H100 PCIe 80GB"
    assert match_device({"name": "NVIDIA L40S"}).spec.name == "NVIDIA L40S"
    assert match_device({"name": "NVIDIA L4"}).spec.name == "NVIDIA L4"
    assert match_device({"name": "NVIDIA A10"}).spec.name == "NVIDIA A10"


# ------------------------------------------------------------------------------------------ tie breaks

def test_h100_sxm_vs_pcie_broken_by_sm_count():
    sxm = match_device(props("NVIDIA H100", 132, 9, 81559 * MIB))
    pcie = match_device(props("NVIDIA H100", 114, 9, 81559 * MIB))
    assert sxm.spec.name == "NVIDIA H100 SXM5 80GB"
    assert pcie.spec.name == "NVIDIA H100 PCIe 80GB"
    assert "ruled out" in pcie.how and "132" in pcie.how


def test_h800_sxm_vs_pcie_broken_by_sm_count():
    assert match_device(props("NVIDIA H800", 114, 9, 81559 * MIB)).spec.name == "NVIDIA H800 PCIe 80GB"
    assert match_device(props("NVIDIA H800", 132, 9, 81559 * MIB)).spec.name == "NVIDIA H800 SXM5 80GB"


def test_h100_80_vs_94_gb_broken_by_memory():
    assert match_device(props("NVIDIA H100", 132, 9, 95830 * MIB)).spec.name == "NVIDIA H100 NVL 94GB"
    assert match_device(props("NVIDIA H100", 132, 9, 81559 * MIB)).spec.name == "NVIDIA H100 SXM5 80GB"


def test_a100_40_vs_80_gb_broken_by_memory():
    assert match_device(props("NVIDIA A100", 108, 8, 42314694656)).spec.name == "NVIDIA A100 SXM4 40GB"
    m = match_device(props("NVIDIA A100", 108, 8, 85198045184))
    assert m.spec.name == "NVIDIA A100 SXM4 80GB"
    assert "79.3 GiB" in m.how


def test_mi250_vs_mi250x_shared_name_broken_by_cu_count():
    name = "AMD Instinct MI250X / MI250"
    assert match_device(props(name, 104, 9, 64 * GIB)).spec.name == "AMD Instinct MI250 (one GCD)"
    assert match_device(props(name, 110, 9, 64 * GIB)).spec.name == "AMD Instinct MI250X (one GCD)"


def test_unresolved_tie_says_so():
    m = match_device({"name": "NVIDIA A100"})
    assert m.spec.name == "NVIDIA A100 SXM4 40GB"
    assert "cannot tell them apart" in m.how


def test_specific_name_beats_generic_pattern():
    m = match_device(props("NVIDIA H100 NVL", 132, 9, 95830 * MIB))
    assert m.spec.name == "NVIDIA H100 NVL 94GB"
    assert "by substring 'h100 nvl'" in m.how


def test_how_for_h100_reads_like_the_example():
    m = match_device(props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB))
    assert m.how.startswith("name 'NVIDIA H100 80GB HBM3' matched NVIDIA H100 SXM5 80GB by substring "
                            "'h100 80gb hbm3'")
    assert "132 SMs" in m.how
    assert m.method == "name"


def test_short_names_do_not_match_longer_model_numbers():
    assert match_device({"name": "NVIDIA A100-SXM4-80GB"}).spec.name != "NVIDIA A10"
    assert match_device({"name": "NVIDIA L40S"}).spec.name != "NVIDIA L4"
    assert match_device({"name": "NVIDIA GeForce RTX 3090 Ti"}).spec is None
    assert match_device({"name": "NVIDIA GB200"}).spec.name == "NVIDIA GB200 (NVL72, per GPU)"  # not the B200 row
    assert match_device({"name": "NVIDIA L40"}).spec is None


def test_mig_slice_keeps_name_match_and_warns():
    m = match_device(props("NVIDIA A100-PG509-200 MIG 1g.5gb", 14, 8, 5 * GIB))
    assert m.spec.name == "NVIDIA A100-PG509-200 (SXM4 40GB class)"
    assert "warning" in m.how and "MIG" in m.how


# ------------------------------------------------------------------------------------------ properties

def test_generic_amd_name_matched_by_properties_says_so_and_is_per_gcd():
    m = match_device(props("AMD Radeon Graphics", 104, 9, 68702699520))
    assert m.method == "properties"
    assert "by properties" in m.how
    assert "GCD" in m.how and "half" in m.how
    card_fp16 = 362.1  # MI250 card datasheet
    assert m.peak_tflops("fp16") == pytest.approx(card_fp16 / 2, rel=0.01)
    assert m.dram_gbps == pytest.approx(3276.8 / 2)


def test_generic_amd_name_with_other_properties_is_unknown():
    # An RDNA integrated GPU reports the same generic name.
    m = match_device(props("AMD Radeon Graphics", 12, 10, 16302784512))
    assert m.spec is None
    assert "unknown" in m.how


def test_generic_name_without_properties_is_unknown():
    assert match_device({"name": "AMD Radeon Graphics"}).spec is None


def test_properties_alone_never_match_a_name_without_vendor():
    m = match_device(props("Foo GPU", 304, 9, 205822885888))
    assert m.spec is None and "unknown" in m.how


# ------------------------------------------------------------------------------------------ unknowns

def test_unknown_device_gives_none_and_reason():
    m = match_device(props("Foo GPU"))
    assert m.spec is None
    assert m.how.startswith("unknown:")
    assert "Foo GPU" in m.how and ENV_VAR in m.how and "--devices" in m.how
    assert m.peak_tflops("bf16") is None
    assert m.dram_gbps is None
    assert m.ridge_point("bf16") is None
    assert m.to_dict()["matched"] is False


@pytest.mark.parametrize("p", [{}, {"name": ""}, {"name": "   "}, {"name": None}, {"name": 7},
                               {"numSms": 132}, {"name": "\x00"}])
def test_empty_or_odd_name_never_crashes(p):
    m = match_device(p)
    assert m.spec is None
    assert "unknown" in m.how


def test_odd_property_values_are_ignored():
    m = match_device({"name": "NVIDIA H100 80GB HBM3", "numSms": "lots", "computeMajor": None,
                      "totalGlobalMem": -1})
    assert m.spec.name == "NVIDIA H100 SXM5 80GB"


# ------------------------------------------------------------------------------------------ arithmetic

def test_ridge_point_arithmetic():
    m = match_device(props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB))
    assert m.ridge_point("bf16") == pytest.approx(989.4e12 / 3350e9)
    assert m.ridge_point("c10::BFloat16") == pytest.approx(m.ridge_point("bf16"))
    spec = DeviceSpec(name="X", vendor="nvidia", peak_tflops={"fp32": 10.0}, dram_gbps=500.0, source="u")
    dm = DeviceMatch("X", spec, "test")
    assert dm.ridge_point("fp32") == pytest.approx(20.0)  # 10e12 FLOP/s / 500e9 B/s
    assert dm.ridge_point("fp8") is None
    no_bw = DeviceMatch("X", DeviceSpec("X", "nvidia", {"fp32": 1.0}, None, "u"), "test")
    assert no_bw.ridge_point("fp32") is None


def test_peak_lookup_by_trace_dtype_and_missing_dtype():
    a100 = match_device(props("NVIDIA A100-SXM4-80GB", 108, 8, 85198045184))
    assert a100.peak_tflops("c10::BFloat16") == 312
    assert a100.peak_tflops("float") == 19.5
    assert a100.peak_tflops("fp8") is None  # Ampere has no FP8
    assert a100.peak_tflops("long int") is None


def test_to_dict_is_json_ready():
    m = match_device(props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB))
    d = json.loads(json.dumps(m.to_dict()))
    assert d["name"] == "NVIDIA H100 SXM5 80GB"
    assert d["matched"] is True and d["method"] == "name"
    assert d["source"].startswith("https://")
    assert set(d["ridge_points"]) == set(d["peak_tflops"])


# ------------------------------------------------------------------------------------------ datasheet

def test_h100_sxm_headline_figures():
    spec = {s.name: s for s in load_datasheet()}["NVIDIA H100 SXM5 80GB"]
    assert spec.peak_tflops["bf16"] == pytest.approx(989.4, rel=0.01)
    assert spec.peak_tflops["fp8"] == pytest.approx(1978.9, rel=0.01)
    assert spec.dram_gbps == 3350


def test_other_reference_figures():
    rows = {s.name: s for s in load_datasheet()}
    assert rows["NVIDIA Tesla V100 SXM2 16GB"].peak_tflops["fp16"] == 125
    assert rows["NVIDIA A100 SXM4 80GB"].peak_tflops["bf16"] == 312
    # Pre-Ampere parts have no TF32: fp32 matmuls run at the plain fp32 rate.
    for name in ("NVIDIA Tesla V100 SXM2 16GB", "NVIDIA T4", "NVIDIA GeForce RTX 2080 Ti"):
        assert "tf32" not in rows[name].peak_tflops


REQUIRED = [
    "NVIDIA Tesla V100 SXM2 16GB", "NVIDIA Tesla V100 SXM2 32GB", "NVIDIA Tesla V100 PCIe",
    "NVIDIA Tesla V100 DGXS 32GB", "NVIDIA A100 PCIe 40GB", "NVIDIA A100 PCIe 80GB", "NVIDIA A100 SXM4 40GB",
    "NVIDIA A100 SXM4 80GB", "NVIDIA A100-PG509-200 (SXM4 40GB class)", "NVIDIA A10", "NVIDIA A10G", "NVIDIA L4",
    "NVIDIA L40S", "NVIDIA T4", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090",
    "NVIDIA A800 SXM4 80GB", "NVIDIA H800 SXM5 80GB", "NVIDIA H100 SXM5 80GB", "NVIDIA H100 PCIe 80GB",
    "NVIDIA H100 NVL 94GB", "NVIDIA H200 SXM 141GB", "NVIDIA B200 (HGX, 1000 W)", "AMD Instinct MI210",
    "AMD Instinct MI250 (one GCD)", "AMD Instinct MI250X (one GCD)", "AMD Instinct MI300X", "AMD Instinct MI325X",
    "AMD Instinct MI355X",
]


def test_required_rows_present():
    names = {s.name for s in load_datasheet()}
    assert not [n for n in REQUIRED if n not in names]


def test_every_row_is_sourced_and_positive():
    rows = load_datasheet()
    assert len({r.name for r in rows}) == len(rows)
    for r in rows:
        assert r.source.startswith("https://"), r.name
        assert r.note, r.name
        assert r.vendor in ("nvidia", "amd"), r.name
        assert r.match, r.name
        assert r.peak_tflops and set(r.peak_tflops) <= set(DTYPES), r.name
        assert all(v > 0 for v in r.peak_tflops.values()), r.name
        assert r.dram_gbps and r.dram_gbps > 0, r.name
        assert "fp32" in r.peak_tflops, r.name


def test_peaks_are_ordered_sensibly():
    """Dense figures: fp16 and bf16 never below fp32; fp8 at most 2x fp16 (catches sparse values slipping in)."""
    for r in load_datasheet():
        p = r.peak_tflops
        for low in ("fp16", "bf16"):
            if low in p:
                assert p[low] >= p["fp32"], r.name
        if "fp8" in p:
            # 3%: datasheets round (L4) or mix clocks (L40S: 362.05 fp16 vs 733 fp8) in the figures used
            assert p["fp8"] <= 2.06 * p["fp16"], r.name
        if "tf32" in p:
            assert p["tf32"] <= p["fp16"], r.name


def test_mi250_rows_are_half_the_card():
    rows = {s.name: s for s in load_datasheet()}
    assert rows["AMD Instinct MI250X (one GCD)"].peak_tflops["fp16"] == pytest.approx(383.0 / 2)
    assert rows["AMD Instinct MI250X (one GCD)"].dram_gbps == pytest.approx(3276.8 / 2)


# ------------------------------------------------------------------------------------------ user files

def write(tmp_path: Path, data: Any, name: str = "devices.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


NEW_ROW = {"name": "Foo Accelerator 9000", "vendor": "nvidia", "match": ["foo gpu"],
           "peak_tflops": {"fp32": 50, "bf16": 400}, "dram_gbps": 2000,
           "source": {"url": "https://example.com/foo", "note": "vendor page"}}


def test_user_file_adds_a_device(tmp_path):
    path = write(tmp_path, {"devices": [NEW_ROW]})
    rows = load_datasheet(path)
    assert rows[0].name == "Foo Accelerator 9000"
    assert rows[0].origin == str(path)
    m = match_device({"name": "Foo GPU"}, rows)
    assert m.spec is not None and m.peak_tflops("bf16") == 400
    assert m.ridge_point("bf16") == pytest.approx(200.0)


def test_user_file_as_plain_list_and_without_source(tmp_path):
    row = {k: v for k, v in NEW_ROW.items() if k != "source"}
    rows = load_datasheet(write(tmp_path, [row]))
    assert rows[0].source.startswith("user file ")


def test_user_file_overrides_builtin_row_by_name(tmp_path):
    path = write(tmp_path, [{"name": "NVIDIA H100 SXM5 80GB", "peak_tflops": {"bf16": 800}, "dram_gbps": 3000}])
    rows = load_datasheet(path)
    assert [r.name for r in rows].count("NVIDIA H100 SXM5 80GB") == 1
    m = match_device(props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB), rows)
    assert m.peak_tflops("bf16") == 800
    assert m.peak_tflops("fp8") == pytest.approx(1978.9)  # merged, not dropped
    assert m.dram_gbps == 3000
    assert m.spec.origin == str(path)
    assert len(rows) == len(load_datasheet())


def test_user_rows_win_ties_with_builtin_rows(tmp_path):
    row = dict(NEW_ROW, name="My capped H100", match=["h100 80gb hbm3"], num_sms=132, compute_major=9,
               memory_gb=80)
    rows = load_datasheet(write(tmp_path, [row]))
    assert match_device(props("NVIDIA H100 80GB HBM3", 132, 9, 81559 * MIB), rows).spec.name == "My capped H100"


def test_env_var_names_the_user_file(tmp_path, monkeypatch):
    path = write(tmp_path, [NEW_ROW])
    monkeypatch.setenv(ENV_VAR, str(path))
    assert load_datasheet()[0].name == "Foo Accelerator 9000"
    assert match_device({"name": "Foo GPU"}).spec.name == "Foo Accelerator 9000"


def test_explicit_file_wins_over_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(write(tmp_path, [NEW_ROW], "env.json")))
    other = dict(NEW_ROW, name="Bar", match=["bar gpu"])
    names = [r.name for r in load_datasheet(write(tmp_path, [other], "cli.json"))]
    assert "Bar" in names and "Foo Accelerator 9000" not in names


def test_env_var_missing_file_is_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError) as e:
        load_datasheet()
    assert ENV_VAR in str(e.value) and "no such file" in str(e.value)


BAD_FILES = [
    ("{not json", "invalid JSON at line 1"),
    ({"rows": []}, "expected a JSON list"),
    ([{"vendor": "nvidia"}], "non-empty \"name\""),
    ([NEW_ROW, NEW_ROW], "appears twice"),
    ([dict(NEW_ROW, peak_tflops={"bf16": -1})], "peak_tflops.bf16 must be a positive number"),
    ([dict(NEW_ROW, peak_tflops={"fp2": 10})], "unknown dtype 'fp2'"),
    ([dict(NEW_ROW, peak_tflops={})], "peak_tflops must be an object"),
    ([dict(NEW_ROW, dram_gbps="fast")], "dram_gbps must be a positive number"),
    ([dict(NEW_ROW, match="foo")], "match must be a list"),
    ([dict(NEW_ROW, match=["re:(unclosed"])], "not a valid regular expression"),
    ([dict(NEW_ROW, num_sms=1.5)], "num_sms must be a non-negative integer"),
    ([dict(NEW_ROW, colour="red")], "unknown field 'colour'"),
    ([{k: v for k, v in NEW_ROW.items() if k != "vendor"}], "vendor must be a non-empty string"),
    ([{"name": "NVIDIA H100 SXM5 80GB", "peak_tflops": {"bf16": 0}}], "peak_tflops.bf16"),
]


@pytest.mark.parametrize("data,message", BAD_FILES, ids=[m for _, m in BAD_FILES])
def test_bad_user_file_gives_one_line_config_error(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as e:
        load_datasheet(path)
    text = str(e.value)
    assert message in text
    assert str(path) in text
    assert "\n" not in text


def test_missing_user_file_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_datasheet(tmp_path / "missing.json")


# ------------------------------------------------------------------------------------------ dtypes

@pytest.mark.parametrize("s,key", [
    ("float", "fp32"), ("double", "fp64"), ("c10::Half", "fp16"), ("half", "fp16"),
    ("c10::BFloat16", "bf16"), ("c10::Float8_e4m3fn", "fp8"), ("c10::Float8_e5m2", "fp8"),
    ("c10::Float8_e4m3fnuz", "fp8"), ("c10::Float8_e5m2fnuz", "fp8"), ("signed char", "int8"),
    ("unsigned char", "int8"), ("int8", "int8"), ("torch.bfloat16", "bf16"), ("Float", "fp32"),
    ("long int", None), ("int", None), ("bool", None), ("c10::complex<float>", None), ("", None),
    ("Scalar", None), (None, None), (3, None),
])
def test_normalize_dtype(s, key):
    assert normalize_dtype(s) == key


def test_matching_is_memoised_per_datasheet():
    from tb_gpuinsight.estimate.devices import load_datasheet, match_device

    rows = load_datasheet()
    props = {"name": "NVIDIA H100 80GB HBM3", "numSms": 132, "computeMajor": 9, "totalGlobalMem": 85e9}
    first = match_device(props, rows)
    assert match_device(dict(props), rows) is first  # re-rating asks again: answered from the memo
    other = load_datasheet()[:1]  # another sheet never sees the first sheet's answer
    assert match_device(props, other) is not first
    assert first.spec is not None and "H100" in first.spec.name


def test_hint_keeps_a_matched_row_of_the_hinted_architecture():
    """An MI250 trace matched from its properties keeps MI250 as the picker's pre-selection (its Tensile names say
    gfx90a, which MI250X shares); a row of another architecture gives way to the hint."""
    from tb_gpuinsight.estimate.devices import device_hint

    tensile = ["Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_ISA90a"]
    assert device_hint(tensile, matched=["AMD Instinct MI250 (one GCD)"])["name"] == "AMD Instinct MI250 (one GCD)"
    assert device_hint(tensile)["name"] == "AMD Instinct MI250X (one GCD)"
    assert device_hint(["sm90_xmma_gemm"], matched=["NVIDIA A100 SXM4 80GB"])["name"] == "NVIDIA H100 SXM5 80GB"


def test_a_trace_naming_no_gpu_is_rated_as_the_row_its_kernel_names_suggest(tmp_path):
    """A trace without deviceProperties whose kernels are sm80 builds: the API rates it as the A100 row the device
    picker suggests, and its device report says where the row came from; --device still decides when given."""
    import json

    import tb_gpuinsight

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000, "dur": 50,
               "args": {"External id": 1, "Input Dims": [[256, 256], [256, 256]], "Input type": ["float", "float"]}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1001,
               "dur": 1, "args": {"correlation": 1, "External id": 1}},
              {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n", "pid": 0, "tid": 7,
               "ts": 1010, "dur": 20, "args": {"External id": 1, "correlation": 1, "device": 0, "stream": 7,
                                                "grid": [4, 1, 1], "block": [128, 1, 1]}}]
    path = tmp_path / "noname.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    report = next(iter(tb_gpuinsight.analyze(path, execution_traces=[]).devices.values()))
    assert report.match.spec.name == "NVIDIA A100 SXM4 80GB" and report.match.how.startswith("suggested by")
    assert report.summary["rated_time_share"] == 1.0
    forced = next(iter(tb_gpuinsight.analyze(path, execution_traces=[], device="NVIDIA H100 SXM5 80GB")
                       .devices.values()))
    assert forced.match.spec.name == "NVIDIA H100 SXM5 80GB" and "forced" in forced.match.how
