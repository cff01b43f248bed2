"""A logdir that yields no run says why, with its path: missing, a file (a tar archive: extract it), unreadable,
empty, or only files that are not traces. The server logs it once and `/runs` carries it; the tab shows it."""
from __future__ import annotations

import logging
import os
import tarfile

import pytest

from tb_gpuinsight.logdir import logdir_problem
from tb_gpuinsight.service import LogdirService

from .browser import plugin_page


def _problems(tmp_path):
    missing = tmp_path / "runz"
    archive = tmp_path / "traces.tar"
    with tarfile.open(archive, "w") as tar:
        note = tmp_path / "note.txt"
        note.write_text("x")
        tar.add(note, arcname="note.txt")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    others = tmp_path / "others"
    (others / "a").mkdir(parents=True)
    (others / "a" / "config.json").write_text("{}")
    (others / "notes.txt").write_text("hello")
    (others / "logs.tar.gz").write_bytes(b"\x1f\x8b")
    return {"missing": (missing, "no such directory"), "file": (archive, "not a directory but a file (a .tar"),
            "empty": (empty, "empty, no file"),
            "others": (others, "3 files but no PyTorch profiler trace (*.pt.trace.json or *.pt.trace.json.gz), "
                               "e.g. a/config.json, logs.tar.gz, notes.txt; logs.tar.gz is an archive")}


def test_each_problem_names_the_path_and_the_reason(tmp_path):
    for path, reason in _problems(tmp_path).values():
        problem = logdir_problem(str(path))
        assert problem.startswith(f"{path}: ") and reason in problem, problem
    assert logdir_problem("s3://bucket/logs") == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_an_unreadable_logdir(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert logdir_problem(str(locked)) == f"{locked}: cannot be read (Permission denied)"
    finally:
        locked.chmod(0o755)


def test_the_service_carries_it_and_logs_it_once(tmp_path, caplog):
    path, reason = _problems(tmp_path)["others"]
    service = LogdirService(str(path), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=60)
    with caplog.at_level(logging.WARNING, logger="tb_gpuinsight.service"):
        for _ in range(3):
            service.scan()
    assert reason in service.runs_json()["logdir_error"]
    assert [r.getMessage() for r in caplog.records].count(f"gpuinsight: {service.runs_json()['logdir_error']}") == 1
    missing = tmp_path / "runz"
    service = LogdirService(str(missing), cache_dir=str(tmp_path / "cache2"), workers=0, scan_interval=60)
    service.scan()
    assert service.runs_json()["logdir_error"] == f"{missing}: no such directory (check the --logdir path)"


def test_the_tab_shows_a_mistyped_logdir(tmp_path):
    missing = tmp_path / "runz"
    with plugin_page(tmp_path, str(missing)) as (page, frame):
        frame.wait_for_selector(".logdir-problem", timeout=60000)
        text = frame.locator(".state-empty").inner_text()
        assert f"{missing}: no such directory" in text and "holds no PyTorch profiler trace" in text
