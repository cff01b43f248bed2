"""Progress lines draw on a terminal without any third-party package, and stay silent elsewhere."""
import sys

from tb_gpuinsight import progress


def test_silent_when_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert progress.terminal_progress("t") is None
    assert progress.count_progress("t", "files") is None


def test_lines_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    read = progress.terminal_progress("big.json")
    read("read", 250_000, 1_000_000)
    read("read", 1_000_000, 1_000_000)
    progress.count_progress("summarize", "files")(2, 2)
    err = capsys.readouterr().err
    assert "big.json read [#######" in err and "250.0k/1.0M B" in err
    assert "1.0M/1.0M B" in err and err.count("\n") == 2
    assert "2/2 files" in err
