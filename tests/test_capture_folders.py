"""A graph-capture folder belongs to the run beside it: vLLM's (and SGLang's, laid out as the README advises)
`capture_traces/` with its `execution_details.json` is no run of its own; `ls`, the UI's run list and every command on
the folder see one run whose replay kernels take their ops from the capture. Real traces: TraceLens's vLLM decode
replay and its capture, copied into the layout the servers write."""
from __future__ import annotations

import contextlib
import io
import os
import shutil

import pytest

from tb_gpuinsight.cli import main
from tb_gpuinsight.logdir import discover
from tb_gpuinsight.service import LogdirService

from .corpus import corpus_path

REPLAY = "tracelens/vllm_decode_full__graph_execution.json.gz"
CAPTURES = "tracelens/vllm_decode_full__capture_traces"
TRACE = "host_1234.1773709750000000000.pt.trace.json.gz"
CAPTURE = "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"


def _layout(root, folder: str = "capture_traces", trace: str = TRACE):
    """A server's profile folder: its decode trace and, beside it, the capture folder with its index."""
    run = root / "decode"
    run.mkdir(parents=True)
    shutil.copy(corpus_path(REPLAY), run / trace)
    shutil.copytree(corpus_path(CAPTURES), run / folder)
    for dirpath, _, files in os.walk(run):  # the corpus is read-only; the copies need not be
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return run


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("folder,trace", [("capture_traces", TRACE),
                                          ("vllm_decode_full__capture_traces", "vllm_decode_full__graph_execution.json.gz")])
def test_a_capture_folder_is_part_of_its_run(tmp_path, folder, trace):
    run = _layout(tmp_path, folder, trace)
    for root, name in ((tmp_path, "decode"), (run, ".")):
        runs = discover(str(root))
        assert [r.name for r in runs] == [name]
        assert [os.path.basename(e.path) for e in runs[0].captures] == [CAPTURE]
        assert list(runs[0].workers) == [trace.split(".")[0] if "__" not in trace else trace[:-len(".json.gz")]]
    code, out, _ = _cli(["ls", str(tmp_path)])
    assert code == 0 and out.count("run ") == 1 and f"  + {folder}/{CAPTURE} (graph capture)" in out, out


def test_every_command_works_on_a_folder_with_a_capture(tmp_path):
    run = _layout(tmp_path)
    for argv in (["overview", str(run)], ["report", str(run)], ["diff", str(run), str(run)], ["ranks", str(run)],
                 ["timeline", str(run)], ["critical-path", str(run)]):
        code, out, err = _cli(argv)
        assert code == 0 and out and "runs" not in err, (argv, err)
    # the replay's kernels took their ops from the capture beside it
    code, out, _ = _cli(["analyze", str(run / TRACE), "--format", "csv", "--top", "0"])
    assert code == 0 and "from graph capture" in out


def test_a_capture_folder_alone_stays_a_run(tmp_path):
    """Given as the logdir itself, or in a folder holding no trace, the capture is all there is: it is listed."""
    run = _layout(tmp_path)
    assert [r.name for r in discover(str(run / "capture_traces"))] == ["."]
    os.remove(run / TRACE)
    assert [r.name for r in discover(str(tmp_path))] == ["decode/capture_traces"]


def test_the_ui_run_list_shows_the_capture_as_a_companion(tmp_path):
    _layout(tmp_path)
    service = LogdirService(str(tmp_path), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=3600)
    service.scan()
    runs = service.runs_json()["runs"]
    assert [r["run"] for r in runs] == ["decode"]
    assert runs[0]["companions"] == [{"file": f"capture_traces/{CAPTURE}", "kind": "graph capture"}]


def test_the_run_picker_shows_the_capture_beside_the_run(tmp_path):
    """In the browser: one run in the picker, and beside it "+ 1 graph capture" with the file in its tooltip."""
    from .browser import plugin_page

    _layout(tmp_path / "logdir")
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='decode']", state="attached", timeout=120000)
        note = frame.wait_for_selector(".run-companions:has-text('+ 1 graph capture')", timeout=120000)
        assert note.get_attribute("title") == f"capture_traces/{CAPTURE} (graph capture)"
        assert frame.eval_on_selector_all("select[aria-label='Run'] option", "os => os.map(o => o.value)") == ["decode"]
    assert console == []
