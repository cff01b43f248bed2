"""The MCP server (`tb-gpuinsight mcp LOGDIR`) driven by the `mcp` SDK's own stdio client, as an assistant's client
drives it: the server is a subprocess on the real sample runs; its answers are checked against the Python API's.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

import tb_gpuinsight as tbg  # noqa: E402
from tb_gpuinsight.routes.params import name_key  # noqa: E402

from .corpus import corpus_path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
BERT = SAMPLES / "bert_h100"
BERT_TRACE = next(BERT.glob("*.pt.trace.json.gz"))
VIT = SAMPLES / "vit_h100"
CALL_TIMEOUT_S = 240


def _server(logdir: Path, *extra: str) -> StdioServerParameters:
    """The server as a client configures it: the CLI module in a subprocess, this checkout first on the path."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "tb_gpuinsight.cli", "mcp", str(logdir), "--wait", "120", *extra],
                                 env={"PYTHONPATH": path, "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "")})


async def _session(logdir: Path, script):
    async with stdio_client(_server(logdir)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)


def _run(logdir: Path, script):
    return asyncio.run(asyncio.wait_for(_session(logdir, script), CALL_TIMEOUT_S))


def _json(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


CALLS = {  # list_runs after the bert and vit runs are analysed (the others may still be loading)
    "overview": {"run": "bert_h100"},
    "top_kernels": {"run": "bert_h100", "limit": 3},
    "top_waste": ("top_kernels", {"run": "bert_h100", "by": "waste", "limit": 3}),
    "kernel_detail": None,  # with the first kernel's name_key
    "diff_runs": {"run_a": "bert_h100", "run_b": "vit_h100", "limit": 3},
    "ranks": {"run": "bert_h100"},
    "critical_path": {"run": "bert_h100", "limit": 3},
    "memory_peak": {"run": "bert_h100"},
    "report": {"run": "bert_h100", "format": "json"},
    "report_md": ("report", {"run": "bert_h100"}),
    "list_runs": {},
    "timeline_window": {"run": "bert_h100", "t0_us": 0, "t1_us": 1500, "limit": 5, "lanes": "gpu"},
    "bad_run": ("top_kernels", {"run": "no_such_run"}),
    "outside": ("overview", {"run": "bert_h100", "span": "../../etc/passwd"}),
    "bad_argument": ("top_kernels", {"run": "bert_h100", "limit": 0}),
    "after_errors": ("list_runs", {"limit": 1}),
}


@pytest.fixture(scope="module")
def exchange():
    """One session over samples/: the tool list, every tool's answer, the resources and the prompt."""
    async def script(session):
        out = {"tools": (await session.list_tools()).tools}
        for label, spec in CALLS.items():
            name, args = spec if isinstance(spec, tuple) else (label, spec)
            if label == "kernel_detail":
                args = {"run": "bert_h100", "kernel": json.loads(out["top_kernels"].content[0].text)["rows"][0][
                    "name_key"], "occurrences": 3}
            out[label] = await session.call_tool(name, args)
        out["resources"] = (await session.list_resources()).resources
        out["resource"] = await session.read_resource("gpuinsight://report/bert_h100")
        try:
            await session.read_resource("gpuinsight://report/no_such_run")
            out["resource_error"] = None
        except MCPError as exc:
            out["resource_error"] = str(exc)
        out["prompt"] = await session.get_prompt("diagnose_run", {"run": "bert_h100"})
        out["last"] = await session.call_tool("ranks", {"run": "bert_h100"})
        return out

    return _run(SAMPLES, script)


def test_tools_are_listed_with_descriptions_and_schemas(exchange):
    tools = {t.name: t for t in exchange["tools"]}
    assert {"list_runs", "overview", "top_kernels", "kernel_detail", "diff_runs", "ranks", "critical_path",
            "memory_peak", "report", "timeline_window"} <= set(tools)
    for tool in tools.values():
        assert len(tool.description) > 80, tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.annotations.read_only_hint is True
    props = tools["top_kernels"].input_schema["properties"]
    assert props["run"]["description"] and props["by"]["enum"] == ["time", "waste"]
    assert props["limit"]["minimum"] == 1 and props["limit"]["maximum"] == 200
    assert tools["top_kernels"].input_schema["required"] == ["run"]


def test_list_runs_names_every_sample_run(exchange):
    runs = {r["run"]: r for r in _json(exchange["list_runs"])["rows"]}
    assert set(runs) == {p.name for p in SAMPLES.iterdir() if p.is_dir()}
    bert = runs["bert_h100"]
    assert bert["status"] == "ready" and bert["steps"] == 1
    assert bert["devices"][0]["datasheet"] == "NVIDIA H100 SXM5 80GB"


def test_top_kernels_first_row_is_the_api_largest_kernel(exchange):
    api = tbg.kernel_table(BERT_TRACE)
    rows = _json(exchange["top_kernels"])["rows"]
    assert rows[0]["name_key"] == name_key(api["name"][0])
    for mine, theirs in zip(rows, api.to_dict("records")):
        assert mine["name"] == theirs["name"] and mine["count"] == theirs["count"]
        assert mine["total_ms"] == pytest.approx(theirs["total_us"] / 1000, rel=1e-5)
        assert mine["efficiency_pct"] == pytest.approx(100 * theirs["efficiency"], rel=1e-5)
        assert mine["bound"] == theirs["bound"]
        reason = theirs["flops_reason"]
        assert mine["provenance"]["flops"] == (f"unknown: {reason}" if theirs["flops"] != theirs["flops"] else
                                               f"estimated; {reason}" if reason else "estimated")


def test_top_kernels_by_waste_agrees_with_the_report(exchange):
    waste = tbg.report(str(BERT))["waste"]["rows"]
    rows = _json(exchange["top_waste"])["rows"]
    assert [r["name"] for r in rows] == [r["name"] for r in waste[: len(rows)]]
    assert rows[0]["waste_ms"] == pytest.approx(waste[0]["waste_ms_per_step"], rel=1e-5)  # one step


def test_overview_and_report_equal_the_api(exchange):
    api = tbg.report(str(BERT))
    ov = _json(exchange["overview"])
    assert ov["step"]["time"]["mean"]["value"] == pytest.approx(api["step"]["time"]["mean"]["value"], rel=1e-5)
    assert ov["step"]["time"]["mean"]["unit"] == "ms" and ov["step"]["time"]["mean"]["source"]
    assert [r["id"] for r in ov["recommendations"]] == [r["id"] for r in api["recommendations"]]
    assert ov["utilization"]["mfu"]["value"] == pytest.approx(api["utilization"]["mfu"]["value"], rel=1e-5)
    report = _json(exchange["report"])
    assert report["schema_version"] == api["schema_version"]
    assert [r["name"] for r in report["waste"]["rows"]] == [r["name"] for r in api["waste"]["rows"]]
    md = exchange["report_md"].content[0].text
    assert md.startswith("# GPU Insight report") and "## Recommendations" in md


def test_kernel_detail_places_the_kernel(exchange):
    detail = _json(exchange["kernel_detail"])
    top = _json(exchange["top_kernels"])["rows"][0]
    assert detail["kernel"]["name_key"] == top["name_key"]
    assert detail["roofline"]["ridge_flop_per_byte"] > 0 and detail["roofline"]["bound"] == top["bound"]
    ops = detail["ops"]
    assert ops and sum(o["count"] for o in ops) == top["count"]
    assert detail["timeline"]["count"] == top["count"] and len(detail["timeline"]["first"]) == 3
    assert detail["launch"]["block"] and isinstance(detail["launch"]["block"], list)


def test_diff_runs_gives_the_gate_verdict_and_the_api_diff(exchange):
    from tb_gpuinsight.reporting.gate import gate
    from tb_gpuinsight.reporting.sides import side_from_path

    out = _json(exchange["diff_runs"])
    api = tbg.diff(str(BERT), str(VIT))
    assert out["summary"]["delta_us"] == pytest.approx(api.summary["delta_us"], rel=1e-5)
    assert out["changes"]["total"] == len(api.rows)
    verdict = gate(side_from_path(str(BERT)).overview, side_from_path(str(VIT)).overview, "step", 5.0, ("A", "B"))
    assert out["verdict"]["failed"] is verdict.failed and out["verdict"]["line"] == verdict.line


def test_views_equal_the_api(exchange):
    cp = _json(exchange["critical_path"])
    api_cp = tbg.critical_path(str(BERT)).steps
    assert cp["steps"][0]["path_ms"] == pytest.approx(api_cp["path_us"].iloc[0] / 1000, rel=1e-5)
    assert len(cp["longest_segments"]) == 3
    durations = [s["dur_us"] for s in cp["longest_segments"]]
    assert durations == sorted(durations, reverse=True)
    mem = _json(exchange["memory_peak"])
    api_mem = tbg.memory(BERT_TRACE).summary
    gpu = next(d for d in mem["devices"] if d["device"] == "cuda:0")
    api_gpu = next(d for d in api_mem["devices"] if d["device"] == "cuda:0")
    assert gpu["peak_allocated_bytes"] == api_gpu["peak"]["allocated"]
    assert gpu["peak_reserved_bytes"] == api_gpu["peak_reserved"]
    ranks = _json(exchange["ranks"])
    assert ranks["rank_count"] == 1 and ranks["ranks_by_step_time"]["rows"][0]["step_ms"] == pytest.approx(
        cp["steps"][0]["wall_ms"], rel=1e-5)


def test_timeline_window_is_capped_and_in_range(exchange):
    out = _json(exchange["timeline_window"])
    events = out["events"]
    assert events["total"] > 5 and len(events["rows"]) == 5 and events["next_offset"] == 5
    starts = [e["start_us"] for e in events["rows"]]
    assert starts == sorted(starts)
    assert all(e["lane"].startswith("GPU") and e["start_us"] < 1500 for e in events["rows"])
    assert all(b["lane"].startswith("GPU") for b in out["busy"])


def test_errors_are_one_line_tool_errors_and_the_server_keeps_answering(exchange):
    bad = exchange["bad_run"]
    assert bad.is_error and "no_such_run" in bad.content[0].text and "\n" not in bad.content[0].text
    outside = exchange["outside"]
    assert outside.is_error and "has no span" in outside.content[0].text
    argument = exchange["bad_argument"]
    assert argument.is_error and argument.content[0].text.startswith("bad argument for top_kernels: limit")
    assert "\n" not in argument.content[0].text
    assert _json(exchange["after_errors"])["rows"][0]["run"] == "bert_h100"
    assert "no_such_run" in exchange["resource_error"]
    assert not exchange["last"].is_error


def test_report_resources_and_the_diagnose_prompt(exchange):
    uris = {str(r.uri) for r in exchange["resources"]}
    assert "gpuinsight://report/bert_h100" in uris and "gpuinsight://report/cpu_mlp" in uris
    text = exchange["resource"].contents[0].text
    assert text.startswith("# GPU Insight report: bert\\_h100")
    prompt = exchange["prompt"].messages[0].content.text
    assert prompt.index("Call overview") < prompt.index("Call top_kernels") < prompt.index("the recommendations ranked")
    assert '"bert_h100"' in prompt


def test_a_span_still_analysing_asks_to_call_again(tmp_path):
    """A span an analysis process is still working on: after `wait_s` the answer is a retry hint naming the span,
    not a failure or a hang."""
    from tb_gpuinsight.mcp_server.desk import Desk, ToolProblem
    from tb_gpuinsight.mcp_server.tools import overview

    shutil.copytree(BERT, tmp_path / "bert")
    desk = Desk(str(tmp_path), workers=0, wait_s=0.2)
    for state in desk.service.runs["bert"].spans.values():
        state.status = "loading"  # as while a worker process analyses it
    try:
        with pytest.raises(ToolProblem, match=r"pt\.trace\.json\.gz is loading: still being analysed; call again"):
            overview(desk, run="bert")
    finally:
        desk.close()


def test_compact_numbers():
    from tb_gpuinsight.mcp_server.tools import compact

    assert compact({"a": [1.23456789, float("nan"), 2.0, 1e20]}) == {"a": [1.23457, None, 2, 1e20]}


def test_ranks_and_stragglers_of_a_real_distributed_run(tmp_path):
    """The 8-rank DLRM step of the corpus (copied: a logdir of its own): the straggler the API names."""
    src = corpus_path("param/dlrm_8ranks")
    shutil.copytree(src, tmp_path / "dlrm")

    async def script(session):
        return await session.call_tool("ranks", {"run": "dlrm", "limit": 3})

    out = _json(_run(tmp_path, script))
    api = tbg.ranks(str(tmp_path / "dlrm"))
    assert out["rank_count"] == 8
    assert [s["rank"] for s in out["stragglers"]] == [s["rank"] for s in api.stragglers[:3]]


def test_a_summary_store_serves_runs_without_analysing_again(tmp_path):
    """`--store`: the summaries `tb-gpuinsight summarize` wrote are read, not recomputed: every run is ready at
    once (no span analysed by this server: its worker pool never starts) and answers as the API does."""
    from tb_gpuinsight.mcp_server.desk import Desk
    from tb_gpuinsight.mcp_server.tools import top_kernels

    shutil.copytree(BERT, tmp_path / "logs" / "bert")
    store = tmp_path / "store"
    tbg.summarize(str(tmp_path / "logs"), store=str(store), workers=0)
    desk = Desk(str(tmp_path / "logs"), store=str(store), wait_s=0)
    try:
        assert [(r["run"], r["status"]) for r in desk.runs()] == [("bert", "ready")]
        rows = top_kernels(desk, run="bert", limit=1)["rows"]
        assert rows[0]["name_key"] == name_key(tbg.kernel_table(BERT_TRACE)["name"][0])
        assert desk.service._pool is None
    finally:
        desk.close()
