"""End to end: real TensorBoard, headless Chromium, the Overview tab (landing view) on the samples and on a
multi-span run; a step click scopes the Kernel efficiency, Timeline and Memory tabs to that step; an evidence link
filters the kernel table."""
from __future__ import annotations

import os
import re
import shutil
from urllib.parse import parse_qs, urlparse

from .browser import SAMPLES, plugin_page

ROWS = "() => document.querySelectorAll('.tabulator-row').length > 0"


def _logdir(tmp_path):
    root = tmp_path / "logdir"
    shutil.copytree(SAMPLES, root, ignore=shutil.ignore_patterns("*.md", "*.py"))
    src = root / "bert_h100" / os.listdir(root / "bert_h100")[0]
    twice = root / "bert_twice"  # one worker, two spans: the trend across spans
    twice.mkdir()
    for stamp in ("1751410836000000000", "1751410899000000000"):
        shutil.copy(src, twice / f"h100-node.{stamp}.pt.trace.json.gz")
    return str(root)


def test_overview_tab(tmp_path):
    console: list = []
    with plugin_page(tmp_path, _logdir(tmp_path), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='bert_h100']", state="attached", timeout=60000)
        assert frame.locator("button.tab").first.inner_text() == "Overview"
        assert "active" in frame.locator("button.tab").first.get_attribute("class")
        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        frame.wait_for_selector(".ov-cards", timeout=60000)
        cards = frame.locator(".ov-cards").inner_text()
        assert "MFU" in cards.upper() and "GPU BUSY" in cards.upper() and "%" in cards
        frame.wait_for_selector(".ov-step-chart canvas", timeout=60000)
        assert frame.locator(".ov-table tbody tr").count() == 1
        assert frame.locator(".ov-rec").count() >= 1
        assert frame.locator(".ov-rec[data-rule='host_launch_bound']").count() == 1
        page.screenshot(path=str(tmp_path / "overview_bert.png"), full_page=True)

        # A step click scopes the kernel table to the kernels that started in that step.
        frame.locator(".ov-step").first.click()
        frame.wait_for_selector("button.tab.active:has-text('Kernel efficiency')", timeout=60000)
        frame.wait_for_selector(".chip-step", timeout=60000)
        assert "step 6" in frame.locator(".chip-step").inner_text()
        frame.wait_for_function(ROWS, timeout=60000)
        status = frame.locator(".table-status").first.inner_text()
        assert re.search(r"\d+ kernels", status), status
        # ... and the Timeline to that step's range (its wall time is the viewport's width), with the same chip.
        wall = re.search(r"\((.+)\)", frame.locator(".chip-step").inner_text()).group(1)
        frame.get_by_role("tab", name="Timeline").click()
        frame.wait_for_selector(".tl .chip-step", timeout=60000)
        frame.wait_for_function("w => (document.querySelector('.tl-status')?.textContent || '').includes(w)",
                                arg=f"({wall}) ·", timeout=60000)
        # ... and the Memory curve, zoomed to the step: its window is fetched at full detail.
        with page.expect_request(lambda r: "memory_curve" in r.url and "start_us=" in r.url, timeout=60000) as req:
            frame.get_by_role("tab", name="Memory").click()
        window = parse_qs(urlparse(req.value.url).query)
        assert float(window["end_us"][0]) > float(window["start_us"][0]), window
        frame.wait_for_selector(".memory .chip-step", timeout=60000)
        frame.locator(".chip-step .chip-x").click()
        frame.wait_for_selector(".chip-step", state="detached", timeout=60000)

        # An evidence link opens the kernel table filtered to that kernel.
        frame.get_by_role("tab", name="Overview").click()
        frame.wait_for_selector(".ov-link", timeout=60000)
        name = frame.locator(".ov-link").first.get_attribute("title")
        frame.locator(".ov-link").first.click()
        frame.wait_for_function(ROWS, timeout=60000)
        assert frame.locator("input[aria-label='Filter kernel names']").input_value() == name

        # Several spans of one worker: the trend chart.
        frame.get_by_role("tab", name="Overview").click()
        frame.locator("select[aria-label='Run']").select_option("bert_twice")
        frame.wait_for_selector(".ov-trend-chart canvas", timeout=60000)
        assert frame.locator(".ov-table tbody tr").count() == 2

        # A CPU-only run: a partial overview that says what is missing and how to record it.
        frame.locator("select[aria-label='Run']").select_option("cpu_mlp")
        frame.wait_for_selector(".ov-missing", timeout=60000)
        assert "ProfilerActivity.CUDA" in frame.locator(".ov-missing").inner_text()
    assert not console, console
