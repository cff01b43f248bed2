"""End to end: real TensorBoard over samples/, headless Chromium, the Tensor shapes tab on the CPU and GPU samples."""
from __future__ import annotations

import re

from .browser import plugin_in_browser

ROWS = "() => document.querySelectorAll('.shapes-ops .tabulator-row').length > 0"


def test_tensor_shapes_tab(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("cpu_mlp")
        frame.get_by_role("tab", name="Tensor shapes").click()
        frame.wait_for_function(ROWS, timeout=60000)
        assert "aten::" in frame.locator(".shapes-ops").inner_text()
        frame.wait_for_function(
            "() => document.querySelectorAll('.shapes-tensors .tabulator-row').length > 0", timeout=60000)
        tensors = frame.locator(".shapes-tensors .tabulator-row").first.inner_text()
        assert "[32, 64]" in tensors and "record.py" in tensors
        status = frame.locator(".table-status").nth(1).inner_text()
        assert re.search(r"\d+ joined to a profiled op", status), status
        frame.locator("input[aria-label^='Filter names']").fill("weight")
        frame.wait_for_function(
            "() => [...document.querySelectorAll('.shapes-tensors .tabulator-row')]"
            ".every(r => r.innerText.includes('weight'))", timeout=60000)
        frame.locator("input[aria-label^='Filter ops']").fill("aten::linear")
        frame.wait_for_function(
            "() => [...document.querySelectorAll('.shapes-ops .tabulator-row')]"
            ".every(r => r.innerText.includes('aten::linear'))", timeout=60000)
        frame.locator(".shapes-ops .tabulator-row").first.click()
        frame.wait_for_selector(".shape-distribution canvas", timeout=60000)
        caption = frame.locator(".shape-distribution .chart-caption").inner_text()
        assert re.search(r"aten::linear: \d+ input-shape signatures? over \d+ calls", caption), caption
        page.screenshot(path=str(tmp_path / "shapes_cpu.png"), full_page=True)

        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        frame.wait_for_function(ROWS, timeout=60000)
        first = frame.locator(".shapes-ops .tabulator-row").first.inner_text()
        assert "%" in first, first  # a GPU run: achieved % of peak
        frame.wait_for_selector("text=no tensor.trace for this span", timeout=60000)

        # Leaf ops by default (each device microsecond once); the tree nests aten::linear -> aten::addmm.
        assert frame.locator(".view-switch button[aria-pressed='true']").inner_text() == "Leaf ops"
        assert "counted once" in frame.locator(".table-status").first.inner_text()
        leaf_ops = frame.locator(".shapes-ops .tabulator-cell[tabulator-field='op']").all_inner_texts()
        assert "aten::addmm" in leaf_ops and "aten::linear" not in leaf_ops, leaf_ops
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.locator(".view-switch button[data-view='tree']").click()
        frame.wait_for_selector(".shapes-ops .tabulator-data-tree-control", timeout=60000)
        assert "total = self + children" in frame.locator(".table-status").first.inner_text()
        page.screenshot(path=str(tmp_path / "shapes_tree_1280.png"))
        ops = frame.locator(".shapes-ops .tabulator-cell[tabulator-field='op']").all_inner_texts()
        assert "aten::linear" in ops and "aten::addmm" in ops, ops[:20]
    assert not console, console
