"""End to end: real TensorBoard, headless Chromium. The Execution graph tab renders the cpu_mlp graph, a node click
shows its details, a run without an Execution Trace says how to record one; on the 8-rank DLRM step the first view
is readable, expanding a node keeps it on screen, the critical-path list selects nodes and every rank's path shows."""
from __future__ import annotations

from .browser import plugin_in_browser, plugin_page
from .corpus import corpus_logdir

CY = "document.querySelector('.graph-canvas').cy"


def _open_tab(frame, run: str) -> None:
    frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
    frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text="Execution graph").click()


def test_graph_renders_and_node_click_shows_details(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        _open_tab(frame, "cpu_mlp")
        frame.wait_for_function("() => { const c = document.querySelector('.graph-canvas');"
                                " return c && c.cy && c.cy.nodes().length > 0; }", timeout=60000)
        summary = frame.locator(".graph-summary").inner_text().lower()
        assert "linked to kineto" in summary
        frame.wait_for_selector(".cp-table .tabulator-row", timeout=60000)
        assert "critical path" in frame.locator(".graph-path-list").inner_text().lower()
        assert frame.evaluate("() => document.querySelector('.graph-canvas').cy.nodes('[?critical]').length") > 0
        # Click the first op node on the canvas, where Cytoscape drew it.
        box = frame.locator(".graph-canvas").bounding_box()
        pos = frame.evaluate("() => { const cy = document.querySelector('.graph-canvas').cy;"
                             " const n = cy.nodes('[kind = \"op\"]')[0] || cy.nodes()[0];"
                             " cy.center(n); return n.renderedPosition(); }")
        page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
        frame.wait_for_selector(".graph-details", timeout=60000)
        details = frame.locator(".graph-details").inner_text().lower()
        assert all(word in details for word in ("schema", "inputs", "outputs", "linked kernels")), details
        # Search finds an op and reveals it.
        frame.locator("input[aria-label='Search op name']").fill("linear")
        frame.wait_for_selector(".graph-results button", timeout=60000)
        frame.locator(".graph-results button").first.click()
        frame.wait_for_function("() => document.querySelector('.kernel-name')?.textContent === 'aten::linear'",
                                timeout=60000)
        page.screenshot(path=str(tmp_path / "graph.png"), full_page=True)
        # The whole graph saves as a PNG image (Cytoscape's own export).
        with page.expect_download() as dl:
            frame.locator(".graph-zoom [data-export='png']").click()
        assert dl.value.suggested_filename.endswith(".png") and "cpu_mlp" in dl.value.suggested_filename
        assert open(dl.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        _open_tab(frame, "bert_h100")
        frame.wait_for_selector("text=This span has no Execution Trace", timeout=60000)
        assert "ExecutionTraceObserver" in frame.locator(".state-empty").inner_text()
        # Its critical path needs no ET: the list still shows beside the message.
        frame.wait_for_selector(".cp-table .tabulator-row", timeout=60000)
    # The no-ET answer is data (200 with a reason), so nothing may fail.
    assert not console, console


def _wait_graph(frame, more_than: int = 0) -> None:
    frame.wait_for_function(f"() => {{ const c = document.querySelector('.graph-canvas');"
                            f" return c && c.cy && c.cy.nodes(':childless').length > {more_than}; }}", timeout=180000)


def test_dlrm_graph_is_readable_and_expands_in_place(tmp_path):
    logdir = corpus_logdir(tmp_path, "param/dlrm_8ranks", "dlrm")
    console: list = []
    with plugin_page(tmp_path, str(logdir), console=console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        _open_tab(frame, "dlrm")
        _wait_graph(frame)
        first = frame.evaluate(f"""() => {{ const cy = {CY}; const leaves = cy.nodes(':childless');
            return {{n: leaves.length, px: Math.min(...leaves.map(n => cy.zoom() * n.numericStyle('font-size'))),
                     top: document.querySelector('.graph-stage').getBoundingClientRect().top,
                     bottom: document.querySelector('.graph-stage').getBoundingClientRect().bottom}}; }}""")
        assert 20 <= first["n"] <= 60, first
        assert first["px"] >= 10, first  # label font size in screen pixels at the initial zoom
        assert first["bottom"] >= page.viewport_size["height"] - 80 - 16, first  # the canvas fills the height
        # Double-click an expandable node on screen: it opens into a box that stays where the node was.
        box = frame.locator(".graph-canvas").bounding_box()
        target = frame.evaluate(f"""() => {{ const cy = {CY}; const w = cy.width(), h = cy.height();
            const n = cy.nodes('[?expandable]:childless').filter(n => {{ const p = n.renderedPosition();
                return p.x > 60 && p.y > 30 && p.x < w - 200 && p.y < h - 140; }})[0];
            const p = n.renderedPosition(); return {{id: n.id(), x: p.x, y: p.y, n: cy.nodes(':childless').length}}; }}""")
        zoom = frame.evaluate(f"() => {CY}.zoom()")
        page.mouse.dblclick(box["x"] + target["x"], box["y"] + target["y"])
        frame.wait_for_function(f"() => {CY}.getElementById('{target['id']}').isParent()", timeout=60000)
        after = frame.evaluate(f"""() => {{ const cy = {CY}; const bb = cy.getElementById('{target['id']}').renderedBoundingBox();
            return {{x1: bb.x1, x2: bb.x2, y1: bb.y1, y2: bb.y2, w: cy.width(), h: cy.height(), zoom: cy.zoom()}}; }}""")
        assert after["zoom"] == zoom  # no re-fit
        assert after["x1"] <= target["x"] <= after["x2"] and after["y1"] - 5 <= target["y"] <= after["y2"], (target, after)
        assert 0 <= after["y1"] < after["h"] and after["x1"] < after["w"] and after["x2"] > 0, after
        # One wheel notch zooms out 1.2x about the pointer, and the page does not scroll.
        at = {"x": box["width"] * 0.4, "y": box["height"] * 0.5}
        under = f"() => {{ const cy = {CY}; const p = cy.pan(), z = cy.zoom();" \
                f" return [z, ({at['x']} - p.x) / z, ({at['y']} - p.y) / z, window.scrollY]; }}"
        z0, mx0, my0, scroll0 = frame.evaluate(under)
        page.mouse.move(box["x"] + at["x"], box["y"] + at["y"])
        page.mouse.wheel(0, 100)
        frame.wait_for_function(f"() => {CY}.zoom() !== {z0}")
        z1, mx1, my1, scroll1 = frame.evaluate(under)
        assert abs(z0 / z1 - 1.2) < 0.01 and scroll1 == scroll0, (z0, z1, scroll0, scroll1)
        assert abs(mx1 - mx0) < 1 and abs(my1 - my0) < 1  # the graph point under the pointer stays there
        # The critical path list (after closing the details the node click opened): clicking a segment with an ET
        # node selects that node in the graph.
        if frame.locator("aside.drawer").is_visible():
            frame.locator("button[aria-label='Close details']").click()
        frame.wait_for_selector(".cp-table .tabulator-row:not(.cp-no-et)", timeout=120000)
        frame.locator(".cp-table .tabulator-row:not(.cp-no-et)").nth(1).click()
        frame.wait_for_function(f"() => {CY}.$('node:selected').length === 1", timeout=60000)
        assert frame.locator(".cp-table .tabulator-row.cp-picked").count() >= 1
        # Every rank's path side by side; picking another rank reloads its graph and path.
        frame.locator(".cp-ranks > summary").click()
        assert frame.locator(".cp-ranks-table tbody tr").count() == 8
        assert "longest" in frame.locator(".cp-ranks > summary").inner_text().lower()
        frame.locator("select[aria-label='Rank']").select_option(index=3)
        frame.wait_for_function("() => document.querySelector('select[aria-label=\"Rank\"]').value.startsWith('worker3')")
        _wait_graph(frame)
        frame.wait_for_selector(".cp-table .tabulator-row", timeout=120000)
        assert frame.locator(".cp-ranks-table tr.cp-current td").first.inner_text().strip() == "3"
        page.screenshot(path=str(tmp_path / "dlrm_graph.png"))
    assert not console, console
