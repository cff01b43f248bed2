"""End to end: a logdir written by `tb_gpuinsight.profile` (two spans, each with its Kineto trace, Execution Trace
and tensor.trace) opened in real TensorBoard: all four tabs show their content or their explicit empty state."""
from __future__ import annotations

import pytest

from .browser import plugin_page

torch = pytest.importorskip("torch")


def _record(logdir) -> None:
    import tb_gpuinsight

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    with tb_gpuinsight.profile(logdir / "captured", worker_name="trainer", wait=1, warmup=1, active=1,
                               repeat=2) as prof:
        for _ in range(6):
            model(torch.randn(16, 32)).sum().backward()
            prof.step()


def _tab(frame, label: str) -> None:
    frame.locator("nav.tabs button", has_text=label).click()


def test_all_four_tabs_on_a_captured_logdir(tmp_path):
    _record(tmp_path / "logdir")
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='captured']", state="attached",
                                timeout=60000)
        # Overview (the landing tab): a CPU-only capture says what is missing and how to record it.
        frame.wait_for_selector("text=no GPU activities", timeout=60000)
        _tab(frame, "Kernel efficiency")
        # Kernel efficiency: a CPU-only capture says so instead of spinning.
        frame.wait_for_selector("text=No GPU kernels in this selection", timeout=60000)
        # Tensor shapes: ops by shape and the tensor.trace records of the spans.
        _tab(frame, "Tensor shapes")
        frame.wait_for_function("() => document.querySelectorAll('.shapes-ops .tabulator-row').length > 0",
                                timeout=60000)
        frame.wait_for_function("() => document.querySelectorAll('.shapes-tensors .tabulator-row').length > 0",
                                timeout=60000)
        assert "aten::linear" in frame.locator(".shapes-ops").inner_text()
        # Execution graph: the span's own ET, linked to its Kineto trace.
        frame.locator("select[aria-label='Span']").select_option(index=1)
        _tab(frame, "Execution graph")
        frame.wait_for_function("() => { const c = document.querySelector('.graph-canvas');"
                                " return c && c.cy && c.cy.nodes().length > 0; }", timeout=60000)
        summary = frame.locator(".graph-summary").inner_text()
        assert "100" in summary and "linked" in summary.lower(), summary
        # Diff: the two spans of the run; without GPU kernels it says so.
        _tab(frame, "Diff")
        frame.wait_for_selector("text=No GPU kernels on either side", timeout=60000)
        page.screenshot(path=str(tmp_path / "capture_tabs.png"), full_page=True)
    assert not console, console
