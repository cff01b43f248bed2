"""End to end: real TensorBoard over samples/, headless Chromium, the Memory tab on the H100 sample (GPU and CPU
memory events) and its empty state on the CPU sample recorded without memory."""
from __future__ import annotations

import re

from .browser import plugin_in_browser

OP_ROWS = "() => document.querySelectorAll('.memory-ops .tabulator-row').length > 0"


def test_memory_tab(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='bert_h100']", state="attached",
                                timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        frame.get_by_role("tab", name="Memory").click()
        frame.wait_for_selector(".memory-chart canvas", timeout=60000)
        facts = frame.locator(".memory-facts").inner_text()
        assert "Peak allocated" in facts and "101 MB" in facts, facts  # 101,305,344 B at the peak
        frame.wait_for_function(OP_ROWS, timeout=60000)
        frame.wait_for_function("() => document.querySelectorAll('.memory-allocs .tabulator-row').length > 0",
                                timeout=60000)
        assert "(allocated before the span)" in frame.locator(".memory-allocs .tabulator-row").first.inner_text()
        # Hover: the axis tooltip gives the live total under the pointer.
        box = frame.locator(".memory-chart canvas").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
        frame.wait_for_function("() => [...document.querySelectorAll('.memory-chart div')]"
                                ".some(d => d.innerText.includes('Allocated') && /\\dB|MB/.test(d.innerText))",
                                timeout=60000)
        # Click an op: its allocations are drawn on the curve.
        frame.locator(".memory-ops .tabulator-row").first.click()
        frame.wait_for_function("() => /red: \\d+ allocations of/.test("
                                "document.querySelector('.memory-curve .chart-caption').innerText)", timeout=60000)
        page.screenshot(path=str(tmp_path / "memory_bert.png"), full_page=True)
        # CPU memory of the same span.
        frame.locator("select[aria-label='Memory device']").select_option("cpu")
        frame.wait_for_function(OP_ROWS, timeout=60000)
        assert "aten::" in frame.locator(".memory-ops").inner_text()
        # A span recorded without profile_memory says how to record one.
        frame.locator("select[aria-label='Run']").select_option("cpu_mlp")
        frame.wait_for_selector("text=No memory events in this span", timeout=60000)
        assert re.search(r"profile_memory=True", frame.locator(".state-empty").inner_text())
    assert not console, console
