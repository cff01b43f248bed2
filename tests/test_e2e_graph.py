"""End to end: real TensorBoard over samples/, headless Chromium, the Execution graph tab renders the cpu_mlp graph,
a node click shows its details, and a run without an Execution Trace says how to record one."""
from __future__ import annotations


from .browser import plugin_page



def _open_tab(frame, run: str) -> None:
    frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
    frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text="Execution graph").click()


def test_graph_renders_and_node_click_shows_details(tmp_path):
    console: list = []
    with plugin_page(tmp_path, console=console) as (page, frame):
        _open_tab(frame, "cpu_mlp")
        frame.wait_for_function("() => { const c = document.querySelector('.graph-canvas');"
                                " return c && c.cy && c.cy.nodes().length > 0; }", timeout=60000)
        summary = frame.locator(".graph-summary").inner_text().lower()
        assert "linked to kineto" in summary and "critical path" in summary
        assert frame.evaluate("() => document.querySelector('.graph-canvas').cy.nodes('[?critical]').length") > 0
        # Click the first op node on the canvas, where Cytoscape drew it.
        box = frame.locator(".graph-canvas").bounding_box()
        pos = frame.evaluate("() => { const cy = document.querySelector('.graph-canvas').cy;"
                             " const n = cy.nodes('[kind = \"op\"]')[0] || cy.nodes()[0];"
                             " cy.center(n); return n.renderedPosition(); }")
        page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
        frame.wait_for_selector(".graph-details", timeout=20000)
        details = frame.locator(".graph-details").inner_text().lower()
        assert all(word in details for word in ("schema", "inputs", "outputs", "linked kernels")), details
        # Search finds an op and reveals it.
        frame.locator("input[aria-label='Search op name']").fill("linear")
        frame.wait_for_selector(".graph-results button", timeout=20000)
        frame.locator(".graph-results button").first.click()
        frame.wait_for_function("() => document.querySelector('.kernel-name')?.textContent === 'aten::linear'",
                                timeout=20000)
        page.screenshot(path=str(tmp_path / "graph.png"), full_page=True)
        _open_tab(frame, "bert_h100")
        frame.wait_for_selector("text=This span has no Execution Trace", timeout=60000)
        assert "ExecutionTraceObserver" in frame.locator(".state-empty").inner_text()
    # The no-ET answer is a deliberate 404 with a one-line reason; nothing else may fail.
    assert not [c for c in console if "/graph/view" not in c], console
