"""End to end: real TensorBoard over samples/, headless Chromium, the Kernel efficiency tab of every GPU run."""
from __future__ import annotations

import re

import pytest

from .browser import SAMPLES, plugin_in_browser, plugin_page

GPU_RUNS = ("bert_h100", "vit_h100", "minitoy_mi250")


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


def test_kernel_efficiency_tab_in_tensorboard(samples_tensorboard, shots):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        frame.get_by_role("tab", name="Kernel efficiency").click()  # the Overview is the landing tab
        for run in GPU_RUNS:
            frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
            frame.locator("select[aria-label='Run']").select_option(run)
            frame.wait_for_function(
                "() => document.querySelectorAll('.tabulator-row').length > 0", timeout=60000)
            frame.wait_for_timeout(300)
            rows = frame.locator(".tabulator-row")
            assert rows.count() > 0, run
            first = rows.first.inner_text()
            assert re.search(r"\d", first), f"{run}: the first row shows no numbers: {first!r}"
            frame.wait_for_selector(".chart-box canvas", timeout=60000)
            caption = frame.locator(".chart-caption").inner_text()
            plotted = int(re.search(r"(\d+) kernels? plotted", caption).group(1))
            assert plotted > 0, f"{run}: roofline has no points ({caption})"
            assert frame.locator(".device-card").count() >= 1
            if run in ("vit_h100", "minitoy_mi250"):
                if not frame.locator(".ke-summary[open]").count():
                    frame.locator(".ke-summary-head").click()  # the cards start folded into one line
                assert "flops known" in frame.locator(".figures").inner_text().lower()  # share of compute time
            if run == "minitoy_mi250":  # kernel time without a rated figure, per reason with its hint
                assert frame.locator(".reasons-table tr").count() >= 1
                assert "formula" in frame.locator(".reasons").inner_text()
                assert "without: elementwise" in frame.locator(".figures").inner_text().lower()
            page.screenshot(path=str(shots / f"{run}.png"), full_page=True)
        rows = frame.locator(".tabulator-row")
        rows.first.locator(".tabulator-cell[tabulator-field='name']").click()
        frame.wait_for_selector(".drawer", timeout=60000)
        assert frame.locator(".drawer").inner_text().strip()
    assert not console, console


def test_tab_works_under_path_prefix(tmp_path):
    console: list = []
    with plugin_page(tmp_path, SAMPLES, "--path_prefix", "/tb/gpu", console=console) as (page, frame):
        assert page.url.split("#")[0].rstrip("/").endswith("/tb/gpu")
        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        frame.get_by_role("tab", name="Kernel efficiency").click()
        frame.wait_for_function("() => document.querySelectorAll('.tabulator-row').length > 0", timeout=60000)
        assert frame.locator("details.menu a[download]").count() >= 1
    assert not console, console
