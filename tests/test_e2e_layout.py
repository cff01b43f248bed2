"""End to end: the layout at laptop and desktop sizes in light and dark mode, deep links and exports, in real
TensorBoard with headless Chromium (one server and one browser for the module)."""
from __future__ import annotations

import csv
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .browser import CHROMIUM, CHROMIUM_ARGS, LOADED_MACHINE_WAIT_MS, need_browser, plugin_frame

RUN, WORKER = "bert_h100", "h100-node"


@pytest.fixture(scope="module")
def server(samples_tensorboard):
    return samples_tensorboard


@pytest.fixture(scope="module")
def browser():
    need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def route(url: str, name: str, **params) -> dict:
    """A route's answer, once the run is read (503 while it is being read)."""
    query = urllib.parse.urlencode(params)
    end = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}data/plugin/gpuinsight/{name}?{query}", timeout=120) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.time() > end:
                raise
            time.sleep(1)


@pytest.fixture(scope="module")
def kernel_rows(server):
    """The first page of the Kernel efficiency table as the route serves it (the table's default request)."""
    return route(server, "kernels", run=RUN, worker=WORKER, span="all", device=0, dtype="auto", group="name",
                 sort="total_us", order="desc", offset=0, limit=100)["rows"]


def open_plugin(browser, server, width, height, dark=False, link="gi.run=bert_h100&gi.tab=kernels"):
    page = browser.new_page(viewport={"width": width, "height": height}, accept_downloads=True)
    page.set_default_timeout(LOADED_MACHINE_WAIT_MS)
    errors: list = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + ("?darkMode=true" if dark else "") + "#gpuinsight&" + link)
    frame = plugin_frame(page)
    return page, frame, errors


def wait_rows(frame):
    frame.wait_for_function("() => document.querySelectorAll('.table-host .tabulator-row').length > 0", timeout=90000)


@pytest.mark.parametrize("width,height,dark", [(1280, 720, False), (1280, 720, True), (1920, 1080, False),
                                               (1920, 1080, True)])
def test_kernel_table_fits_and_drawer_keeps_row_visible(browser, server, width, height, dark):
    page, frame, errors = open_plugin(browser, server, width, height, dark)
    try:
        wait_rows(frame)
        assert frame.evaluate("document.documentElement.dataset.theme") == ("dark" if dark else "light")
        bg = frame.evaluate("getComputedStyle(document.body).backgroundColor")
        rgb = [int(v) for v in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3]]
        assert (sum(rgb) / 3 < 80) if dark else (sum(rgb) / 3 > 200), bg
        # Every column of the main table is on screen: no sideways scroll in the table or the page.
        fit = frame.evaluate("""() => {
            const holder = document.querySelector('.table-host .tabulator-tableholder');
            const table = document.querySelector('.table-host .tabulator');
            const cols = [...document.querySelectorAll('.table-host .tabulator-col')].map(c => c.getBoundingClientRect().right);
            return {scroll: holder.scrollWidth - holder.clientWidth, right: Math.max(...cols),
                    tableRight: table.getBoundingClientRect().right, vw: window.innerWidth,
                    page: document.scrollingElement.scrollWidth - window.innerWidth};
        }""")
        assert fit["scroll"] <= 1 and fit["page"] <= 1, fit
        assert fit["right"] <= fit["tableRight"] + 1 <= fit["vw"] + 1, fit
        # The table comes first: its header row is in the first screen.
        assert frame.locator(".table-host .tabulator-header").bounding_box()["y"] < height * 0.5
        rows = frame.locator(".table-host .tabulator-row")
        target = rows.nth(min(rows.count() - 1, 9))
        target.locator(".tabulator-cell").first.click()
        frame.wait_for_selector(".drawer:not([hidden])", timeout=60000)
        page.wait_for_timeout(600)  # the drawer is laid out, the page scrolled
        row = frame.locator(".table-host .tabulator-row.row-selected")
        assert row.count() == 1
        r, d = row.bounding_box(), frame.locator(".drawer").bounding_box()
        vh = frame.evaluate("window.innerHeight")
        assert 0 <= r["y"] and r["y"] + r["height"] <= vh, (r, vh)
        overlap_x = r["x"] < d["x"] + d["width"] and d["x"] < r["x"] + r["width"]
        overlap_y = r["y"] < d["y"] + d["height"] and d["y"] < r["y"] + r["height"]
        assert not (overlap_x and overlap_y), ("the drawer covers the selected row", r, d)
        assert "Raw name" in frame.locator(".drawer").inner_text()
    finally:
        page.close()
    assert not errors, errors


def test_deep_link_restores_view_and_back_returns(browser, server, kernel_rows):
    name = kernel_rows[1]["name"]
    word = "gemm" if any("gemm" in r["name"].lower() for r in kernel_rows) else name[:6]
    link = urllib.parse.urlencode({"gi.run": RUN, "gi.worker": WORKER, "gi.span": "all", "gi.tab": "kernels",
                                   "gi.kernels.sel": name}, quote_via=urllib.parse.quote)
    page, frame, errors = open_plugin(browser, server, 1280, 720, link=link)
    try:
        wait_rows(frame)
        assert frame.locator("select[aria-label='Run']").input_value() == RUN
        assert frame.locator(".tab.active").inner_text() == "Kernel efficiency"
        frame.wait_for_selector(".drawer:not([hidden])", timeout=60000)
        assert name in frame.locator(".drawer").inner_text()
        assert frame.locator(".table-host .tabulator-row.row-selected").count() == 1
        # A filter goes into the link; a tab change is a history entry that back undoes.
        frame.locator("input.search").fill(word)
        frame.wait_for_function(f"() => window.parent.location.hash.includes('gi.kernels.filter={word}')", timeout=60000)
        frame.get_by_role("tab", name="Overview").click()
        frame.wait_for_function("() => window.parent.location.hash.includes('gi.tab=overview')", timeout=60000)
        assert "gi.kernels." not in page.evaluate("location.hash")
        page.go_back()
        frame.wait_for_function("() => document.querySelector('.tab.active')?.textContent === 'Kernel efficiency'",
                                timeout=60000)
        frame.wait_for_function(f"() => document.querySelector('input.search')?.value === '{word}'", timeout=60000)
        page.go_forward()
        frame.wait_for_function("() => document.querySelector('.tab.active')?.textContent === 'Overview'",
                                timeout=60000)
    finally:
        page.close()
    assert not errors, errors


def test_csv_json_and_png_exports_match_the_route(browser, server, kernel_rows):
    page, frame, errors = open_plugin(browser, server, 1280, 720)
    try:
        wait_rows(frame)
        with page.expect_download() as dl:
            frame.locator(".table-host [data-export='csv']").click()
        assert dl.value.suggested_filename.endswith(".csv") and RUN in dl.value.suggested_filename
        table = list(csv.DictReader(io.StringIO(open(dl.value.path(), encoding="utf-8").read())))
        assert [r["Kernel (name)"] for r in table] == [r["name"] for r in kernel_rows]
        assert [float(r["Total (total_us)"]) for r in table] == pytest.approx([r["total_us"] for r in kernel_rows])
        with page.expect_download() as dl:
            frame.locator(".table-host [data-export='json']").click()
        data = json.load(open(dl.value.path(), encoding="utf-8"))
        assert [(r["name"], r["count"]) for r in data] == [(r["name"], r["count"]) for r in kernel_rows]
        frame.wait_for_selector(".roofline canvas", timeout=60000)
        frame.locator(".roofline .gi-chart").hover()  # the PNG button shows on hover
        with page.expect_download() as dl:
            frame.locator(".roofline [data-export='png']").click()
        assert open(dl.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        page.close()
    assert not errors, errors
