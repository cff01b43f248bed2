"""The CLI's output layer: names from a trace or a file system never reach the terminal raw (N1), failed writes end
in one line and exit 1 (N2, N13), and output files are complete or absent, never partial."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import tb_gpuinsight
from tb_gpuinsight.cli import main

from .test_reader_errors import rocm_mm_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
ESC = "\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, then clears it
VISIBLE = "\\x1b]0;PWNED\\x07\\x1b[2J"


def _hostile_logdir(tmp_path) -> Path:
    """A run folder, worker, kernel, op and device all named with terminal escapes."""
    doc = copy.deepcopy(rocm_mm_trace(1))
    doc["baseTimeNanoseconds"] = 1700000000000000000
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cpu_op"):
            e["name"] = e["name"] + ESC
    for p in doc.get("deviceProperties", []):
        p["name"] = "dev" + ESC
    run = tmp_path / "logdir" / ("run" + ESC)
    run.mkdir(parents=True)
    (run / f"w{ESC}.1700000000000000000.pt.trace.json").write_text(json.dumps(doc))
    return tmp_path / "logdir"


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _commands(logdir: Path):
    trace = str(next(logdir.glob("*/*.json")))
    return {"info": ["info", trace], "analyze": ["analyze", trace], "diff": ["diff", trace, trace],
            "shapes": ["shapes", trace], "critical-path": ["critical-path", trace], "ls": ["ls", str(logdir)]}


@pytest.mark.parametrize("command", ["info", "analyze", "diff", "shapes", "critical-path", "ls"])
def test_control_characters_from_traces_and_file_names_are_shown_escaped(tmp_path, command):
    code, out, err = _run(_commands(_hostile_logdir(tmp_path))[command])
    assert code == 0, err
    text = out + err
    assert not any(c in text for c in "\x1b\x07\x9b"), text[:2000]
    assert VISIBLE in text  # shown, not dropped


def test_csv_and_json_keep_the_value(tmp_path):
    trace = _commands(_hostile_logdir(tmp_path))["analyze"][1]
    code, out, _ = _run(["analyze", trace, "--format", "csv"])
    assert code == 0 and ESC in out  # CSV keeps it (quoted by its encoder)
    code, out, _ = _run(["analyze", trace, "--format", "json"])
    assert code == 0 and "\x1b" not in out
    assert any(ESC in row.get("name", "") for row in json.loads(out)["rows"])  # JSON escapes it, the value kept


def _cli(args, **kwargs):
    """A real `tb-gpuinsight` process (its interpreter's own last flush included)."""
    package_root = str(Path(tb_gpuinsight.__file__).resolve().parent.parent)  # the package these tests import
    env = {**os.environ, "PYTHONPATH": package_root, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", *args], env=env, stderr=subprocess.PIPE,
                          text=True, timeout=300, **kwargs)


def _one_line_failure(proc) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("tb-gpuinsight: error: cannot write the output")


def _closed_pipe() -> int:
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write fails with EPIPE
    return write


@pytest.mark.parametrize("case", ["full disk", "closed pipe", "read-only descriptor", "closed stdout", "help, full disk"])
def test_failed_writes_to_stdout_end_in_one_line_and_exit_1(case):
    trace = str(SAMPLES / "minitoy_mi250" / "mi250-node.1724000000000000000.pt.trace.json.gz")
    if case.endswith("full disk"):
        with open("/dev/full", "w") as full:  # argparse itself swallows a failed write of --help
            proc = _cli(["ls", "--help"] if case.startswith("help") else ["analyze", trace], stdout=full)
    elif case == "closed pipe":
        fd = _closed_pipe()
        try:
            proc = _cli(["analyze", trace], stdout=fd)
        finally:
            os.close(fd)
    elif case == "read-only descriptor":
        with open(os.devnull, "rb") as read_only:
            proc = _cli(["analyze", trace], stdout=read_only)
    else:
        proc = _cli(["analyze", trace], preexec_fn=lambda: os.close(1))
    _one_line_failure(proc)


def _small_disk():
    """A child with files capped at 2 KiB: a longer write fails (EFBIG) as on a full file system."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


@pytest.mark.parametrize("command", ["report", "timeline", "graph"])
def test_output_files_are_never_left_partial(tmp_path, command):
    bert = str(next((SAMPLES / "bert_h100").iterdir()))
    out = tmp_path / "out.file"
    et = next((SAMPLES / "cpu_mlp").glob("*.et.json"))
    argv = {"report": ["report", bert, "--format", "html", "-o", str(out)],
            "timeline": ["timeline", bert, "--json", str(out)],
            "graph": ["graph", str(et), "--trace", str(et).replace(".et.json", ".pt.trace.json"), "--dot",
                      str(out)]}[command]
    proc = _cli(argv, stdout=subprocess.DEVNULL, preexec_fn=_small_disk)
    _one_line_failure(proc)
    assert not out.exists() and os.listdir(tmp_path) == []  # neither the file nor its temporary name
    proc = _cli(argv, stdout=subprocess.DEVNULL)  # without the cap: the complete file
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 2048


def test_export_parquet_into_a_path_under_a_file_is_one_line(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "file").write_text("x")
    (tmp_path / "store").mkdir()
    code, _, err = _run(["export-parquet", str(tmp_path / "store"), str(tmp_path / "file" / "x")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a folder" in err


def test_csv_rows_with_different_keys_keep_every_column(capsys):
    """Kernel rows where only some carry `fused_from`: every key is a column, a row without it an empty cell (the
    csv writer refused the row with a ValueError, a traceback from `analyze --format csv`)."""
    from tb_gpuinsight.commands.text import print_csv

    print_csv([{"name": "a", "us": 1}, {"name": "b", "us": 2, "fused_from": "x + y"}])
    assert capsys.readouterr().out.splitlines() == ["name,us,fused_from", "a,1,", "b,2,x + y"]
