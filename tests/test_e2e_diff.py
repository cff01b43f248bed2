"""End to end: real TensorBoard over samples/, headless Chromium, the Diff tab comparing two H100 sample runs."""
from __future__ import annotations

import re

from .browser import plugin_in_browser

TIME = r"[−+]?\d[\d,.]*\s*(?:ns|µs|ms|s)\b"


def test_diff_tab_in_tensorboard(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        frame.wait_for_selector("button.tab:has-text('Diff')", timeout=60000)
        frame.locator("button.tab:has-text('Diff')").click()
        frame.wait_for_selector("select[aria-label='Run A'] option[value='vit_h100']", state="attached", timeout=60000)
        # Default B: nothing as comparable as the same worker's previous span or the same model on the same GPU
        # (BERT and ViT share too few ops): a prompt with the reason, not the next run by name.
        frame.wait_for_selector(".diff .state-empty:has-text('Pick B to compare with')", timeout=60000)
        assert "same ops" in frame.locator(".diff .state-empty").inner_text()
        frame.locator("select[aria-label='Run A']").select_option("bert_h100")
        frame.locator("select[aria-label='Run B']").select_option("vit_h100")

        # The table: rows with numbers, remote-sorted by impact.
        frame.wait_for_function("() => document.querySelectorAll('.diff .tabulator-row').length > 0", timeout=60000)
        frame.wait_for_timeout(300)
        rows = frame.locator(".diff .tabulator-row")
        assert rows.count() > 0
        first = rows.first.inner_text()
        assert re.search(r"\d", first), f"the first row shows no numbers: {first!r}"
        assert re.search(TIME, first), f"the first row shows no time: {first!r}"
        status = frame.locator(".diff .table-status").inner_text()
        assert re.search(r"\d+ rows?", status), status

        # The summary strip: both totals and the change; the same device on both sides, so no warning.
        figures = frame.locator(".diff-figures").inner_text()
        fig_a = frame.locator(".diff-fig-a .figure-value").inner_text()
        fig_b = frame.locator(".diff-fig-b .figure-value").inner_text()
        assert re.fullmatch(TIME, fig_a.strip()) and re.fullmatch(TIME, fig_b.strip()), (fig_a, fig_b)
        assert "bert_h100" in figures and "vit_h100" in figures, figures
        assert "H100" in figures, figures
        assert re.search(r"[+−]\d", frame.locator(".diff-fig-change .figure-value").inner_text())
        assert frame.locator(".diff-device-warn").count() == 0

        # The class chart draws on a canvas.
        frame.wait_for_selector(".diff-chart canvas", timeout=60000)
        box = frame.locator(".diff-chart canvas").first.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100, box
        page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)

        # A click on a row shows both sides in the details drawer.
        rows.first.locator(".tabulator-cell[tabulator-field='name']").click()
        frame.wait_for_selector(".drawer:not([hidden]) table.diff-compare", timeout=60000)
        details = frame.locator(".drawer:not([hidden])").inner_text()
        assert "Time" in details and re.search(TIME, details), details
        page.screenshot(path=str(tmp_path / "diff_details.png"), full_page=True)
        frame.locator(".drawer:not([hidden]) button[aria-label='Close details']").click()
        frame.locator(".diff .tabulator").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "diff_table.png"), full_page=True)

        # A name filter narrows the table (server side); a status filter too.
        frame.locator(".diff input[aria-label='Filter names']").fill("gemm")
        frame.wait_for_function(
            "() => /matching/.test(document.querySelector('.diff .table-status')?.textContent || '')", timeout=60000)
        for text in frame.locator(".diff .tabulator-row .tabulator-cell[tabulator-field='name']").all_inner_texts():
            assert "gemm" in text.lower(), text

        # Swap pins A; the same selection on both sides gives an explicit empty state.
        frame.locator("button[aria-label='Swap A and B']").click()
        frame.wait_for_function(
            "() => document.querySelector(\"select[aria-label='Run A']\").value === 'vit_h100'", timeout=60000)
        assert frame.locator("input[aria-label='Pin A']").is_checked()
        frame.locator("select[aria-label='Run B']").select_option("vit_h100")
        frame.wait_for_selector(".diff .state-empty:has-text('Pick B to compare with')", timeout=60000)
    assert not console, console


def test_diff_cross_vendor_suggests_ops_and_counts_op_calls(tmp_path, samples_tensorboard):
    """H100 BERT against the MI250 toy model: kernel names barely match, the tab offers Op + shapes; there Calls are
    op calls and launches have their own column; only-in-one-side tags are neutral, not red / green."""
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.wait_for_selector("button.tab:has-text('Diff')", timeout=60000)
        frame.locator("button.tab:has-text('Diff')").click()
        frame.wait_for_selector("select[aria-label='Run B'] option[value='minitoy_mi250']", state="attached",
                                timeout=60000)
        frame.locator("select[aria-label='Run A']").select_option("bert_h100")
        frame.locator("select[aria-label='Run B']").select_option("minitoy_mi250")
        frame.wait_for_selector(".diff-suggest:has-text('barely match')", timeout=60000)
        added = frame.locator(".diff-status-added").first
        added.wait_for(timeout=60000)
        colour = added.evaluate("e => getComputedStyle(e).color")
        assert colour not in ("rgb(180, 35, 24)", "rgb(43, 138, 62)"), colour
        page.screenshot(path=str(tmp_path / "diff_cross_vendor_1280.png"))
        headers = [t.lower() for t in frame.locator(".diff .tabulator-col-title").all_inner_texts()]
        assert "launches" in headers and "calls" not in headers, headers  # by kernel: the count is launches
        frame.locator(".diff-suggest button:has-text('Compare by op + shapes')").click()
        frame.wait_for_selector(".diff .tabulator-col[tabulator-field='launches_b']", state="attached", timeout=60000)
        assert frame.locator(".diff-suggest").count() == 0
        by = frame.locator(".diff-controls label:has-text('Rows per') select")
        assert by.input_value() == "op"  # the control shows what the banner's button chose
        headers = frame.locator(".diff .tabulator-col-title").all_inner_texts()
        assert "calls" in [t.lower() for t in headers] and "launches" in [t.lower() for t in headers], headers
        page.screenshot(path=str(tmp_path / "diff_ops_1280.png"))
    assert not console, console
