"""The CLI's words on traces that lack things (no GPU, no worker name, no world size, no device properties): each
line says something true instead of a placeholder ("-", "?", "unknown" where a reason can be given)."""
from __future__ import annotations

import json
import re

import pytest

import tb_gpuinsight
from tb_gpuinsight.cli import main

from .corpus import corpus_path

CPU_ONLY = "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"  # gloo, 300 ranks, no GPU activity
OLD = "hta/inference_rank_1.json.gz"  # 2021 format: kernels, no deviceProperties, distributedInfo = {rank: 1}


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _placeholders(text: str):
    """Lone "?" or "-" standing for a value (not a hyphen inside a word, a list bullet or a minus sign)."""
    text = re.sub(r"^\s*- ", "", text, flags=re.M)
    text = re.sub(r"(?<=\w) - (?=\w)", " minus ", text)
    return re.findall(r"(?:^|[\s(,:])([?-])(?=[\s),.;]|$)", text, re.M)


@pytest.fixture(scope="module")
def cpu_only():
    return corpus_path(CPU_ONLY)


@pytest.fixture(scope="module")
def old():
    return corpus_path(OLD)


# ------------------------------------------------------------------------------------------------- report

@pytest.mark.parametrize("fmt", ["md", "html"])
def test_report_of_a_trace_file_names_its_worker_as_tensorboard_would(capsys, cpu_only, fmt):
    code, out, _ = _cli(capsys, "report", cpu_only, "--format", fmt)
    assert code == 0
    assert "Worker -" not in out and "Worker rank-34.Jul" in out
    code, text, _ = _cli(capsys, "report", cpu_only, "--format", "json")
    assert json.loads(text)["subject"]["worker"] == "rank-34.Jul_15_10_52_41.1074"  # the same in every format


@pytest.mark.parametrize("command", ["report", "overview", "critical-path"])
def test_worker_is_refused_for_a_trace_file(capsys, cpu_only, command):
    """A trace file has no workers: --worker is a mistake said in one line, not silently ignored."""
    code, out, err = _cli(capsys, command, cpu_only, "--worker", "rank0")
    assert code == 2 and "--worker is for a run directory" in err and "Traceback" not in err
    with pytest.raises(tb_gpuinsight.ConfigError, match="no workers to choose from"):
        {"report": tb_gpuinsight.report, "overview": tb_gpuinsight.overview,
         "critical-path": tb_gpuinsight.critical_path}[command](cpu_only, worker="rank0")


def test_report_says_why_mfu_is_unknown(capsys, old):
    code, out, _ = _cli(capsys, "report", old)
    assert code == 0
    assert "TFLOP/s unknown, MFU **unknown**" in out and "efficiency unknown." in out
    assert ", -," not in out and "?" not in out
    code, text, _ = _cli(capsys, "report", old, "--format", "json")
    mfu = json.loads(text)["utilization"]["mfu"]
    assert mfu["value"] is None and "no datasheet peak" in mfu["source"] and "?" not in text


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_report_without_recommendations_does_not_read_like_a_null(capsys, cpu_only, fmt):
    code, out, _ = _cli(capsys, "report", cpu_only, "--format", fmt)
    assert "No recommendation: no rule's threshold is reached." in out and "None:" not in out


def test_report_of_a_cpu_only_trace_has_no_question_marks(capsys, cpu_only):
    code, text, _ = _cli(capsys, "report", cpu_only, "--format", "json")
    report = json.loads(text)
    assert "?" not in text
    assert report["utilization"]["tflops"]["source"].endswith("no compute kernel time to estimate FLOPs for")


# ------------------------------------------------------------------------------------------- critical path

def test_critical_path_of_a_cpu_only_trace_says_there_is_no_gpu_activity(capsys, cpu_only):
    code, out, _ = _cli(capsys, "critical-path", cpu_only)
    assert code == 0
    head = out.splitlines()[0]
    assert "?" not in head
    assert "no GPU activity: no cross-stream waits or host syncs" in head
    [(_, _, cp)] = tb_gpuinsight.critical_path(cpu_only).paths  # the API's notes: counts, not missing keys
    assert cp.notes["stream_waits"] == 0 and cp.notes["host_syncs"] == 0
    assert cp.notes["stream_wait_source"] == "none (no GPU activity)"


def test_critical_path_of_a_gpu_trace_counts_its_host_syncs(capsys, old):
    code, out, _ = _cli(capsys, "critical-path", old)
    assert code == 0
    assert "cross-stream waits: none (no stream waits), host syncs: 1 of 1 waited on GPU work" in out


# ------------------------------------------------------------------------------------------------ overview

def test_overview_of_a_cpu_only_trace_shows_no_gpu_figures(capsys, cpu_only):
    code, out, _ = _cli(capsys, "overview", cpu_only)
    assert code == 0
    assert "no GPU activity (a CPU-only run): the split below is CPU time" in out
    assert "MFU" not in out.replace("MFU figures", "") and "?" not in out


def test_overview_says_why_mfu_is_unknown(capsys, old):
    code, out, _ = _cli(capsys, "overview", old)
    assert code == 0
    assert "TFLOP/s unknown (FLOPs known for 0.0% of compute kernel time)  MFU unknown (no datasheet peak)" in out
    assert "of ? peak" not in out


# ------------------------------------------------------------------------------------- info, timeline, misc

def test_info_says_what_distributed_info_leaves_out(capsys, old, cpu_only):
    code, out, _ = _cli(capsys, "info", old)
    assert code == 0
    assert "rank      1 (world size and backend not recorded)" in out
    assert "device    none listed (no deviceProperties); GPU activity on device 0" in out  # not "CPU-only"
    code, out, _ = _cli(capsys, "info", cpu_only)
    assert "rank      34 of 300 (gloo)\n" in out
    assert "device    none listed, and no GPU activity (a CPU-only run)" in out


def test_timeline_lane_names_whole_stream_ids(capsys, old):
    code, out, _ = _cli(capsys, "timeline", old)
    assert code == 0
    assert "GPU 0 · stream 7 " in out and "stream 7.0" not in out
    assert "4 events in 1 lane; 0 profiler steps" in out
    labels = [lane["label"] for lane in tb_gpuinsight.timeline_index(old).lanes]  # the plugin's lane names too
    assert "GPU 0 · stream 7" in labels


def test_analyze_of_a_cpu_only_trace_says_there_is_no_kernel_time(capsys, cpu_only):
    code, out, _ = _cli(capsys, "analyze", cpu_only)
    assert code == 0
    assert "shapes of kernel time: no kernel time" in out


def test_diff_says_no_change_instead_of_unknown(capsys, old, cpu_only):
    code, out, _ = _cli(capsys, "diff", old, old)
    assert code == 0
    assert "(+0.000 ms, 0.0%)" in out and "unknown" not in out
    assert re.search(r"GEMM +0\.021 +0\.021 +\+0\.000 +-$", out, re.M)  # no share of a change that is zero
    code, out, _ = _cli(capsys, "diff", cpu_only, old)
    assert "(+0.030 ms, A has no GPU activity)" in out
    code, out, _ = _cli(capsys, "diff", cpu_only, cpu_only)
    assert "(+0.000 ms, no change)" in out and "by class: none (no GPU activity on either side)" in out


def test_summarize_of_an_empty_logdir_says_nothing_was_written(capsys, tmp_path):
    (tmp_path / "logs").mkdir()
    code, out, _ = _cli(capsys, "summarize", "--workers", "1", "--store", tmp_path / "store", tmp_path / "logs")
    assert code == 0
    assert "nothing written to the store" in out and not (tmp_path / "store").exists()


@pytest.mark.parametrize("command", ["info", "overview", "critical-path", "report", "timeline", "analyze"])
def test_no_lone_placeholders_on_old_and_cpu_only_traces(capsys, old, cpu_only, command):
    for path in (old, cpu_only):
        code, out, err = _cli(capsys, command, path)
        assert code == 0 and "Traceback" not in err
        # tables print "-" in cells of figures a row lacks; the text around them must not
        prose = "\n".join(line for line in out.splitlines() if not re.search(r"\S {2,}-( |$)", line)
                          and not line.startswith(("---", "|")))
        assert not _placeholders(prose), (command, path, prose)


def test_an_empty_op_table_does_not_say_no_kernels(capsys, old):
    code, out, _ = _cli(capsys, "shapes", old)  # 2021 format: no shapes recorded, so no op groups
    assert code == 0
    assert "0 op groups" in out and out.rstrip().endswith("(none)") and "(no kernels)" not in out


def test_an_empty_op_diff_does_not_say_no_kernels(capsys, cpu_only):
    code, out, _ = _cli(capsys, "diff", cpu_only, cpu_only, "--by", "op")
    assert code == 0
    assert out.rstrip().endswith("(no ops)") and "(no kernels)" not in out


def test_an_op_diff_titles_its_name_column_op(capsys, old):
    code, out, _ = _cli(capsys, "diff", old, old, "--by", "op")
    assert code == 0
    [header] = [line for line in out.splitlines() if "delta ms" in line and "status" in line]
    assert header.startswith("op ") and not header.startswith("kernel")
