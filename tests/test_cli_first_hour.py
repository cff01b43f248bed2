"""What a new user trips on at the command line: CSV cells on one line and every row, whole launch counts, the
class column wide enough for "communication", a datasheet device name checked first (exit 2, like the plugin's
400), an unwritable `augment` output refused before the analysis, a tar archive named as such."""
from __future__ import annotations

import csv
import glob
import io
import os
import tarfile

import pytest

import tb_gpuinsight as gi
from tb_gpuinsight import cli
from tb_gpuinsight.commands import analyze as analyze_command
from tb_gpuinsight.commands.analyze import ANALYZE_COLUMNS
from tb_gpuinsight.commands.text import render_table
from tb_gpuinsight.errors import TraceError

from .corpus import corpus_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT = glob.glob(os.path.join(ROOT, "samples", "bert_h100", "*.pt.trace.json.gz"))[0]


def _csv(capsys, *argv):
    assert cli.main(list(argv)) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def test_csv_holds_every_row_on_one_line_each(capsys):
    trace = str(corpus_path("tracelens/mi210__gpu_only_trace.json.gz"))
    rows = _csv(capsys, "analyze", trace, "--format", "csv")
    assert len(rows) == len(gi.analyze(trace).by_name()) > 20  # not the table's 20
    assert len(_csv(capsys, "analyze", trace, "--format", "csv", "--top", "5")) == 5
    kernel = next(r for r in rows if r["kind"] == "kernel")
    assert kernel["grid"].startswith("[") and "\n" not in kernel["grid"] and " " not in kernel["block"]
    assert all("\n" not in v for r in rows for v in r.values() if v)


def test_diff_counts_are_whole_numbers(capsys):
    assert cli.main(["diff", BERT, BERT, "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("kernel"))
    for line in lines[head + 2:head + 5]:
        cells = line.split()
        assert not any(c.endswith(".00") for c in cells[-13:-9]), line  # calls and launches A/B


def test_the_class_column_shows_communication_whole():
    table = render_table([{"display_name": "ncclKernel_AllReduce", "kernel_class": "communication"}],
                         ANALYZE_COLUMNS)
    assert "communication" in table[2] and "~" not in table[2]


def test_an_unknown_device_name_is_refused_first(capsys):
    assert cli.main(["analyze", BERT, "--device", "H100 SXM7"]) == 2
    err = capsys.readouterr().err
    assert "'H100 SXM7' is not a datasheet row; did you mean 'NVIDIA H100 SXM5 80GB'" in err
    assert cli.main(["diff", BERT, BERT, "--device", "UNKNOWN"]) == 2


def test_augment_refuses_a_bad_output_before_the_analysis(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(analyze_command, "analyze_trace", lambda *a: ran.append(a))
    assert cli.main(["augment", BERT, str(tmp_path / "no" / "such" / "out.json.gz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["augment", BERT, str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert cli.main(["augment", BERT, BERT]) == 2
    assert "refusing to overwrite the input" in capsys.readouterr().err
    assert not ran


def test_a_tar_archive_is_named(tmp_path):
    archive = tmp_path / "traces.pt.trace.json"
    with tarfile.open(archive, "w") as tar:
        tar.add(BERT, arcname="bert.pt.trace.json.gz")
    with pytest.raises(TraceError, match="is a tar archive: extract it"):
        gi.load(str(archive))
