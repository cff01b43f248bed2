"""The engine version changes with any source or rule file that computes what summaries and the estimate memo hold:
the datasheet, the op-schema table and the kernel classes are JSON files beside the code."""
from __future__ import annotations

from tb_gpuinsight import engine_version as ev


def _digest(monkeypatch, root, part):
    monkeypatch.setattr(ev, "_ROOT", root)
    ev._sources.cache_clear()
    try:
        return ev.source_digest(part)
    finally:
        ev._sources.cache_clear()


def test_a_changed_rule_file_changes_the_digest(tmp_path, monkeypatch):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "formulas.py").write_text("X = 1\n")
    table = rules / "table.json"
    table.write_text('{"mm": 4}')
    before = _digest(monkeypatch, tmp_path, "rules")
    table.write_text('{"mm": 5}')
    assert _digest(monkeypatch, tmp_path, "rules") != before
    table.write_text('{"mm": 4}')
    assert _digest(monkeypatch, tmp_path, "rules") == before
    (rules / "notes.txt").write_text("not a rule")  # neither code nor rule data
    assert _digest(monkeypatch, tmp_path, "rules") == before


def test_the_package_rule_files_are_read():
    read = {entry.split(b"\0", 1)[0].decode() for part in ("estimate", "analysis") for entry in ev._sources(part)}
    ev._sources.cache_clear()
    assert {"estimate/devices.json", "estimate/op_schemas.json", "analysis/kernels/kernel_classes.json"} <= read
