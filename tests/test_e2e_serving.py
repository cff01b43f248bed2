"""End to end: real TensorBoard, headless Chromium, the Overview of a serving trace (the synthetic SGLang extend +
decode steps of test_serving_steps.py): the decode step is a step of phase decode, batch 32, in the step table."""
from __future__ import annotations

from .browser import plugin_page
from .test_serving_steps import sglang_trace


def test_a_decode_step_in_the_overview(tmp_path):
    run = tmp_path / "logdir" / "sglang"
    run.mkdir(parents=True)
    sglang_trace(run)
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='sglang']", state="attached", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("sglang")
        frame.wait_for_selector(".ov-table tbody tr", timeout=60000)
        head = frame.locator(".ov-table thead").inner_text()
        assert "Phase" in head and "Batch" in head and "Tokens" in head
        rows = frame.locator(".ov-table tbody tr")
        assert rows.count() == 2
        decode = rows.nth(1).inner_text()
        assert "decode" in decode and "32" in decode and "step 1 decode bs=32" in decode
        assert "extend" in rows.nth(0).inner_text() and "15,360" in rows.nth(0).inner_text()
        page.screenshot(path=str(tmp_path / "overview_serving.png"), full_page=True)
    assert not [m for m in console if m.startswith("error")], console
