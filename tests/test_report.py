"""`tb-gpuinsight report`, `tb_gpuinsight.report(...)` and the plugin's /report route, on real traces: the 8-rank
DLRM run of the corpus and a pair of real H100 runs (the samples)."""
from __future__ import annotations

import gzip
import json
import os

import pytest

import tb_gpuinsight
from tb_gpuinsight.cli import main

from .corpus import corpus_path
from .test_plugin import BASE, _client, logdir  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT = os.path.join(ROOT, "samples", "bert_h100")
VIT = os.path.join(ROOT, "samples", "vit_h100")


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _figures(node, path="$"):
    """Every figure (a dict with a "value") of a report, with where it is."""
    if isinstance(node, dict):
        if "value" in node:
            yield path, node
        for k, v in node.items():
            yield from _figures(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _figures(v, f"{path}[{i}]")


@pytest.fixture(scope="module")
def dlrm():
    return str(corpus_path("param/dlrm_8ranks"))


def test_dlrm_report_markdown_is_ranked_and_names_the_straggler(capsys, dlrm):
    code, md, _ = _cli(capsys, "report", dlrm)
    assert code == 0
    for heading in ("# GPU Insight report: dlrm\\_8ranks", "## Device and estimate coverage", "## Step time",
                    "## Recommendations, by recoverable time", "## Top kernels by waste", "## Memory peak",
                    "## Distributed: 8 ranks (world size 8)"):
        assert heading in md, heading
    assert md.index("## Step time") < md.index("## Recommendations") < md.index("## Top kernels by waste")
    assert "rated as NVIDIA Tesla V100 SXM2 32GB" in md
    assert "**Straggler: rank 7**" in md and "arrived last at 5 of 8" in md
    assert "1. **Exposed communication**" in md  # NCCL time is most of each rank's step
    assert "no memory events: record with profile\\_memory=True" in md


def test_dlrm_report_json_schema_units_provenance_and_determinism(capsys, dlrm):
    code, text, _ = _cli(capsys, "report", dlrm, "--format", "json")
    assert code == 0
    report = json.loads(text)
    assert report["schema_version"] == 1
    assert report["subject"]["worker"] == "worker0_step_12" and report["subject"]["steps"] == 1
    assert report["devices"][0]["datasheet"] == "NVIDIA Tesla V100 SXM2 32GB"
    figures = list(_figures(report))
    assert len(figures) > 20
    for where, f in figures:
        assert "unit" in f, where
        if "name" not in f:  # a rule's evidence has the unit its key names; its recommendation says where from
            assert f["unit"] and f["source"], where
    step = report["step"]
    assert step["time"]["mean"]["unit"] == "ms" and step["time"]["mean"]["value"] == pytest.approx(14.455)
    split = step["split"]["rows"]
    assert sum(r["ms_per_step"] for r in split) == pytest.approx(14.455, rel=1e-6)  # the split adds up
    recs = report["recommendations"]
    assert [r["rank"] for r in recs] == list(range(1, len(recs) + 1))
    times = [r["recoverable"]["value"] for r in recs]
    assert times == sorted(times, reverse=True) and recs[0]["id"] == "exposed_comm"
    waste = report["waste"]["rows"]
    assert waste and [w["waste_ms_per_step"] for w in waste] == sorted((w["waste_ms_per_step"] for w in waste),
                                                                       reverse=True)
    for w in waste:
        assert w["class"] != "communication"
        assert w["waste_ms_per_step"] == pytest.approx(w["ms_per_step"] * (1 - w["efficiency"] / 100))
    dist = report["distributed"]
    assert dist["ranks"] == 8 and dist["straggler"]["rank"] == 7
    assert dist["step_max"]["value"] == pytest.approx(19.901)
    busbw = [c["busbw"] for c in dist["collectives"]["rows"]]
    assert any(b and b > 20 for b in busbw)  # the 1.5 MiB all-reduce's 32.5 GB/s
    assert {c["unit"] for c in dist["collectives"]["columns"]} >= {"ms", "GB/s", "bytes", "%"}
    again = tb_gpuinsight.report(dlrm, format="json")
    assert again == text  # deterministic: the same inputs give the same bytes


def test_report_of_a_pair_puts_changes_outside_the_noise_first(capsys):
    report = tb_gpuinsight.report(VIT, baseline=BERT)
    comp = report["comparison"]
    assert comp["baseline"] == "bert_h100"
    step = next(m for m in comp["metrics"] if m["metric"] == "step")
    assert step["a"] == pytest.approx(report["comparison"]["metrics"][0]["a"])
    assert step["b"] > step["a"] and step["slower"] > 0 and step["unit"] == "ms"
    assert step["noise"] is None and step["outside_noise"] is None  # one step per side: noise unknown
    rows = comp["kernels"]["rows"]
    assert rows and [abs(r["delta_ms"]) for r in rows] == sorted((abs(r["delta_ms"]) for r in rows), reverse=True)
    assert {r["status"] for r in rows} >= {"added", "both"}
    md = tb_gpuinsight.report(VIT, baseline=BERT, format="md")
    assert "## Changes from the baseline bert\\_h100" in md
    assert "too few steps per side: the noise is unknown" in md
    html = tb_gpuinsight.report(VIT, baseline=BERT, format="html")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html and "<section id=comparison>" in html


def test_report_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    code, _, err = _cli(capsys, "report", str(tmp_path / "missing"))
    assert code == 2 and err.count("\n") == 1 and "no such file or directory" in err
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    code, _, err = _cli(capsys, "report", str(bad))
    assert code == 2 and err.count("\n") == 1
    code, _, err = _cli(capsys, "report", BERT, "--device", "H100 nonsense")
    assert code == 2 and "not a datasheet row" in err


def test_report_writes_a_file(capsys, tmp_path):
    out = tmp_path / "r.html"
    code, stdout, _ = _cli(capsys, "report", BERT, "--format", "html", "-o", str(out))
    assert code == 0 and stdout == ""
    assert "<section id=waste>" in out.read_text()


def test_report_route_json_markdown_html_and_errors(logdir, tmp_path):  # noqa: F811
    client, _ = _client(logdir, tmp_path)
    sel = {"run": "vit_h100", "worker": "h100-node"}
    response = client.get(f"{BASE}/report", query_string=sel)
    assert response.status_code == 200
    body = json.loads(response.get_data(as_text=True))
    api = tb_gpuinsight.report(VIT)
    assert body["schema_version"] == 1 and body["subject"]["label"] == "vit_h100 / h100-node"
    assert body["step"]["time"]["mean"]["value"] == pytest.approx(api["step"]["time"]["mean"]["value"])
    assert [r["id"] for r in body["recommendations"]] == [r["id"] for r in api["recommendations"]]
    assert [w["name"] for w in body["waste"]["rows"]] == [w["name"] for w in api["waste"]["rows"]]
    response = client.get(f"{BASE}/report", query_string={**sel, "format": "md", "b_run": "bert_h100",
                                                          "b_worker": "h100-node"})
    assert response.status_code == 200 and response.mimetype == "text/markdown"
    assert "attachment" in response.headers["Content-Disposition"]
    text = response.get_data(as_text=True)
    assert "## Changes from the baseline bert\\_h100 / h100-node" in text
    response = client.get(f"{BASE}/report", query_string={**sel, "format": "html"})
    assert response.mimetype == "text/html" and "script-src" not in response.headers["Content-Security-Policy"]
    assert "<section id=step>" in response.get_data(as_text=True)
    response = client.get(f"{BASE}/report", query_string={**sel, "device_name": "NVIDIA A100 SXM4 80GB"})
    assert response.status_code == 200  # the device picked in the header rates the report as on every tab
    assert [d["datasheet"] for d in json.loads(response.get_data(as_text=True))["devices"]] == ["NVIDIA A100 SXM4 80GB"]
    for query, status in (({**sel, "format": "pdf"}, 400), ({"worker": "h100-node"}, 400),
                          ({**sel, "device_name": "no such GPU"}, 400),
                          ({**sel, "run": "../etc"}, 404), ({**sel, "b_run": "nope", "b_worker": "w"}, 404)):
        response = client.get(f"{BASE}/report", query_string=query)
        assert response.status_code == status, query
        assert "error" in json.loads(response.get_data(as_text=True))
