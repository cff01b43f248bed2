"""End to end at 1280x720: real TensorBoard over three hand-made GPU runs (`gpu_steps`: the same loop twice, then
with the GEMM 3x slower), headless Chromium. The Trends tab lists them in recording order with the last marked a
regression and its GEMM kernel named; the Diff tab's verdict panel says "Regression" and attributes the change to
the GEMM class and kernel."""
from __future__ import annotations

from .browser import plugin_page
from .gpu_steps import write_run

NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1"


def _logdir(root):
    write_run(root / "before", gemm_us=400, stamp=1700000000000)
    write_run(root / "again", gemm_us=400, stamp=1700000100000)
    write_run(root / "after", gemm_us=1200, stamp=1700000200000)
    return str(root)


def test_trends_view_and_diff_attribution_at_1280(tmp_path):
    console: list = []
    with plugin_page(tmp_path, _logdir(tmp_path / "logdir"), console=console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.wait_for_selector("button.tab:has-text('Trends')", timeout=60000)
        frame.locator("button.tab:has-text('Trends')").click()
        frame.wait_for_function("() => document.querySelectorAll('.trend-table tr.trend-row').length === 3",
                                timeout=120000)
        runs = frame.locator(".trend-table tr.trend-row")
        assert [runs.nth(i).locator("td").first.inner_text().strip() for i in range(3)] == ["before", "again", "after"]
        tags = [runs.nth(i).locator(".trend-change").inner_text().strip() for i in range(3)]
        assert tags == ["none", "none", "regression"], tags
        assert "ampere_sgemm_128x64_nn" in frame.locator(".trend-table tr.trend-kernel").first.inner_text()
        assert "100" in frame.locator(".trend-table tr.trend-kernel").first.inner_text()  # % of the change
        frame.wait_for_selector(".trend-chart canvas", timeout=30000)
        box = frame.locator(".trend-chart canvas").first.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 150, box
        assert frame.evaluate(NO_SIDEWAYS)
        page.screenshot(path=str(tmp_path / "trends.png"), full_page=True)

        frame.locator("button.tab:has-text('Diff')").click()
        frame.wait_for_selector("select[aria-label='Run A'] option[value='after']", state="attached", timeout=60000)
        frame.locator("select[aria-label='Run A']").select_option("before")
        frame.locator("select[aria-label='Run B']").select_option("after")
        frame.wait_for_selector(".diff-verdict", timeout=60000)
        verdict = frame.locator(".diff-verdict")
        assert "Regression" in verdict.locator(".panel-title").inner_text()
        text = verdict.inner_text()
        assert "0.600 ms → 1.400 ms" in text and "7 of 8 steps kept" in text, text
        classes = verdict.locator("table").first.inner_text()
        assert "GEMM" in classes and "100" in classes, classes
        assert "ampere_sgemm_128x64_nn" in verdict.locator("table").nth(1).inner_text()
        assert frame.evaluate(NO_SIDEWAYS)
        verdict.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "diff_verdict.png"), full_page=True)
    assert not console, console
