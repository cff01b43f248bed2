"""Summary sections: built by the analysis workers, stored in the summary, read back by the service; a failing
builder loses only its own section."""
from __future__ import annotations

import os
import shutil
import sys
import types

import numpy as np
import pytest

from tb_gpuinsight import sections
from tb_gpuinsight.sections import Section, SectionContext, SectionError
from tb_gpuinsight.service import LogdirService

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT_RUN = os.path.join(ROOT, "samples", "bert_h100")


def _kernel_count(ctx: SectionContext) -> Section:
    return Section("x", {"kernels": len(ctx.trace.kernels), "ets": list(ctx.execution_traces)},
                   {"dur": ctx.trace.kernels["dur"].copy()})


def _broken(ctx: SectionContext) -> Section:
    raise ZeroDivisionError("boom")


@pytest.fixture
def registered(monkeypatch):
    module = types.ModuleType("_gi_test_sections")
    module.kernel_count, module.broken = _kernel_count, _broken
    monkeypatch.setitem(sys.modules, "_gi_test_sections", module)
    monkeypatch.setattr(sections, "SECTION_BUILDERS",
                        {"count": "_gi_test_sections:kernel_count", "broken": "_gi_test_sections:broken"})


def test_sections_round_trip_through_the_service(registered, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(BERT_RUN, logdir / "bert", ignore=shutil.ignore_patterns("*.md"))
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=60)
    service.scan()
    run = service.runs_json()["runs"][0]
    worker = run["workers"][0]["worker"]
    span = run["workers"][0]["spans"][0]["span"]
    assert run["status"] == "ready"
    [(state, count)] = service.sections("bert", worker, span, "count")
    assert count.error == "" and count.info["kernels"] == len(count.arrays["dur"]) > 0
    assert count.arrays["dur"].dtype == np.float64
    [(_, broken)] = service.sections("bert", worker, span, "broken")
    assert broken.error == "internal error: ZeroDivisionError: boom"
    with pytest.raises(SectionError, match="boom"):
        broken.check()
    [(_, missing)] = service.sections("bert", worker, span, "other")
    assert missing.error
    # The summary on disk holds the sections: a new service (a restart) reads them without analysing again.
    again = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=60)
    again.scan()
    [(_, stored)] = again.sections("bert", worker, span, "count")
    assert np.array_equal(stored.arrays["dur"], count.arrays["dur"])


def test_object_arrays_are_refused(monkeypatch):
    module = types.ModuleType("_gi_test_objects")
    module.build = lambda ctx: Section("o", {}, {"names": np.array(["a"], dtype=object)})
    monkeypatch.setitem(sys.modules, "_gi_test_objects", module)
    monkeypatch.setattr(sections, "SECTION_BUILDERS", {"o": "_gi_test_objects:build"})
    out = sections.build_section("o", SectionContext(None, None))
    assert "numeric numpy array" in out.error


def test_summary_without_sections_still_loads():
    from tb_gpuinsight import analyze
    from tb_gpuinsight.store.envelope import load_summary, meta_dict, to_bytes

    [trace_path] = [os.path.join(BERT_RUN, f) for f in os.listdir(BERT_RUN) if f.endswith(".pt.trace.json.gz")]
    eff = analyze(trace_path)
    summary = load_summary(to_bytes(eff, {"path": "x"}))
    assert summary.sections == {} and len(summary.eff.activities) == len(eff.activities)
