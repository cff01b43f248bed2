"""Render the built bundle in headless Chromium against the mock server and check the UI.

    python frontend/dev/check.py [--shots /tmp/gpuinsight]

Needs Debian's chromium (/usr/bin/chromium) and the playwright Python package (never `playwright install`).
Exits non-zero with a list of failures; writes screenshots into --shots.
"""
from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Frame, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server import serve  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

failures: list = []

# Returns [x, y] (canvas CSS pixels) in the middle of a plotted point, or null.
POINT_FINDER = """() => {
  const c = document.querySelector('.chart-box canvas');
  const dpr = c.width / c.clientWidth;
  const ctx = c.getContext('2d');
  const img = ctx.getImageData(0, 0, c.width, c.height).data;
  const at = (x, y) => { const i = (y * c.width + x) * 4; return [img[i], img[i + 1], img[i + 2]]; };
  const colourful = ([r, g, b]) => Math.max(r, g, b) - Math.min(r, g, b) > 40;
  const same = (a, b) => Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]) + Math.abs(a[2] - b[2]) < 12;
  const top = Math.round(60 * dpr);
  for (let y = top; y < c.height - 60 * dpr; y += 2) {
    for (let x = Math.round(70 * dpr); x < c.width - 30 * dpr; x += 2) {
      const p = at(x, y);
      if (!colourful(p)) continue;
      let ok = true;
      for (let dy = -3; dy <= 3 && ok; dy++) for (let dx = -3; dx <= 3 && ok; dx++) ok = same(p, at(x + dx, y + dy));
      if (ok) return [x / dpr, y / dpr];
    }
  }
  return null;
}"""


def expect(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def plugin_frame(page: Page) -> Frame:
    deadline = time.time() + 10
    while time.time() < deadline:
        for f in page.frames:
            if "plugin_entry.html?name=gpuinsight" in f.url:
                return f
        page.wait_for_timeout(50)
    raise RuntimeError("plugin iframe not found")


def open_page(browser, url: str, console: list, size=(1440, 1100)) -> Page:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.goto(url)
    return page


def choose(frame: Frame, label: str, value: str) -> None:
    frame.locator(f"select[aria-label='{label}']").select_option(value)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shots", default="/tmp/gpuinsight")
    args = parser.parse_args()
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)

    httpd, url = serve(0, "/some/prefix", "default")
    empty_httpd, empty_url = serve(0, "", "empty")
    err_httpd, err_url = serve(0, "", "runs-error")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        console: list = []

        # --- main view, under a path prefix -----------------------------------------------------------------------
        page = open_page(browser, url, console)
        frame = plugin_frame(page)
        frame.wait_for_selector(".tabulator-row", timeout=15000)
        frame.wait_for_selector(".chart-box canvas", timeout=15000)
        page.wait_for_timeout(400)
        rows = frame.locator(".tabulator-row").count()
        expect(rows > 0, f"kernel table has rows ({rows})")
        expect(frame.locator(".chart-box canvas").count() > 0, "roofline canvas exists")
        expect(frame.locator(".device-card").count() == 1, "one device card")
        expect("NVIDIA H100 SXM5 80GB" in frame.locator(".device-card").inner_text(), "device card shows datasheet row")
        expect(frame.locator(".figure").count() >= 5, "summary figures shown")
        expect(frame.locator(".pbar-fill").count() > 0, "% of peak bars drawn")
        expect(frame.locator(".cell-unknown[title]").count() > 0, "unknown values have a reason tooltip")
        hostile = frame.locator(".cell-name", has_text="<img src=x")
        expect(hostile.count() == 1, "hostile kernel name rendered as text in the table")
        expect(frame.evaluate("() => window.__xss") is None, "no injected script ran")
        expect(frame.locator(".tabulator img, .tabulator script").count() == 0, "no element injected from data")
        page.screenshot(path=str(shots / "kernels.png"), full_page=True)

        # roofline tooltip: find the inside of a plotted point on the canvas (a 7x7 patch of one saturated colour
        # below the legend), hover it and check the tooltip
        spot = frame.evaluate(POINT_FINDER)
        expect(spot is not None, "roofline draws points")
        found = False
        if spot:
            frame.locator(".chart-box").scroll_into_view_if_needed()
            page.wait_for_timeout(200)
            box = frame.locator(".chart-box canvas").bounding_box()
            page.mouse.move(box["x"] + spot[0], box["y"] + spot[1])
            page.wait_for_timeout(400)
            found = frame.locator(".tt-name").count() > 0 and frame.locator(".tt-name").first.is_visible()
        expect(found, "roofline tooltip appears on hover")
        if found:
            page.screenshot(path=str(shots / "tooltip.png"))
            expect(frame.locator(".tt table").count() > 0, "tooltip lists time / TFLOP/s / GB/s / % peak")
        page.mouse.move(0, 0)

        # sorting (server side): click the TFLOP/s header
        frame.locator(".tabulator-col[tabulator-field='tflops'] .tabulator-col-title").click()
        page.wait_for_timeout(500)
        first = frame.locator(".tabulator-row").first.locator(".tabulator-cell[tabulator-field='tflops']").inner_text()
        expect(first.strip() not in ("", "—"), f"sorted by TFLOP/s, first row {first!r}")

        # filter (debounced, server side)
        frame.locator("input.search").fill("img src")
        page.wait_for_timeout(900)
        expect(frame.locator(".tabulator-row").count() == 1, "name filter leaves the hostile kernel only")
        frame.locator(".tabulator-row").first.locator(".tabulator-cell").nth(2).click()
        frame.wait_for_selector(".drawer .op-block", timeout=5000)
        expect("<img src=x" in frame.locator(".drawer .kernel-name").inner_text(), "details show the name as text")
        expect(frame.evaluate("() => window.__xss") is None, "still no injected script")
        frame.locator("input.search").fill("")
        page.wait_for_timeout(900)
        frame.locator(".tabulator-row", has_text="cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128").first.locator(
            ".tabulator-cell").nth(2).click()
        frame.wait_for_selector(".drawer .op-block table.inputs", timeout=5000)
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / "details.png"))
        expect("aten::addmm" in frame.locator(".drawer").inner_text(), "details list the launching op")
        frame.locator(".drawer .op-block .btn-small").first.click()
        page.wait_for_timeout(800)
        expect(frame.locator(".chip").count() == 1, "op filter chip shown")
        frame.locator(".drawer-head .btn-icon").click()
        expect(frame.locator(".drawer").is_hidden(), "details close")
        frame.locator(".chip-x").click()
        page.wait_for_timeout(600)

        # group by op, dtype, top-N
        frame.locator(".controls select").nth(1).select_option("op")
        page.wait_for_timeout(700)
        expect(frame.locator(".tabulator-col[tabulator-field='op']").is_visible(), "op column shown when grouped by op")
        frame.locator(".controls select").nth(0).select_option("fp32")
        page.wait_for_timeout(700)
        expect(frame.locator(".peak-active").count() == 1, "chosen dtype peak highlighted on the card")
        frame.locator(".controls select").nth(2).select_option("25")
        page.wait_for_timeout(700)
        expect(frame.locator(".tabulator-row").count() <= 25, "top-N limits the page")
        expect(frame.locator(".tabulator-paginator").count() == 1, "paginator shown")
        frame.locator(".controls select").nth(1).select_option("name")
        frame.locator(".controls select").nth(0).select_option("auto")
        page.wait_for_timeout(700)

        # a run with two GPUs, one unknown, and a partial error
        choose(frame, "Run", "exp/<a&b> two gpus")
        frame.wait_for_selector(".device-card.unmatched", timeout=10000)
        expect("unknown device: efficiency unknown" in frame.locator(".device-card.unmatched").inner_text(),
               "unmatched device says efficiency unknown")
        expect(frame.locator(".banner-warn").count() == 1, "partial-errors banner shown")
        frame.locator(".device-card.unmatched").click()
        frame.wait_for_selector(".tabulator-row", timeout=10000)
        page.wait_for_timeout(600)
        page.screenshot(path=str(shots / "two-gpus.png"), full_page=True)

        # a span of a specific worker
        choose(frame, "Worker", "worker1")
        page.wait_for_timeout(300)
        choose(frame, "Span", "worker1.1695835536000.pt.trace.json")
        frame.wait_for_selector(".tabulator-row", timeout=10000)
        expect(frame.locator("details.menu a[download]").count() == 1, "download link per span")
        href = frame.locator("details.menu a[download]").first.get_attribute("href")
        expect(href.startswith("./trace?"), f"download link is relative: {href}")

        # the error run
        choose(frame, "Run", "broken")
        frame.wait_for_selector(".state-error .file-errors", timeout=5000)
        expect(frame.locator(".file-errors li").count() == 2, "error run lists each file's reason")

        # the loading run: progress, then the table when ready
        urllib.request.urlopen(url + "data/plugin/gpuinsight/_restart_loading").read()
        frame.wait_for_selector(".state-error .file-errors", timeout=5000)  # still on "broken"
        page.wait_for_timeout(2500)  # the next poll of `runs` sees exp/llama_8b loading again
        choose(frame, "Run", "exp/llama_8b")
        frame.wait_for_selector(".state-progress", timeout=5000)
        expect(frame.locator(".progress-track").count() == 2, "progress bars for files and bytes")
        page.wait_for_timeout(4500)
        page.screenshot(path=str(shots / "loading.png"))
        frame.wait_for_selector(".tabulator-row", timeout=20000)
        expect(True, "loading run becomes ready by polling runs")

        # placeholder tabs
        frame.locator(".tab", has_text="Diff").click()
        expect("not available yet" in frame.locator(".content").inner_text(), "Diff tab: not available yet")
        frame.locator(".tab", has_text="Kernel efficiency").click()
        frame.wait_for_selector(".tabulator-row", timeout=10000)
        page.close()

        # --- no runs, and the runs route failing ----------------------------------------------------------------
        page = open_page(browser, empty_url, console)
        frame = plugin_frame(page)
        frame.wait_for_selector(".state-empty", timeout=10000)
        expect("No PyTorch profiler traces found under the logdir" in frame.locator(".state-empty").inner_text(),
               "empty logdir message")
        page.screenshot(path=str(shots / "empty.png"))
        page.close()
        expected_errors: list = []  # the browser logs the 500 of the runs route itself
        page = open_page(browser, err_url, expected_errors)
        frame = plugin_frame(page)
        frame.wait_for_selector(".state-error", timeout=10000)
        expect("permission denied" in frame.locator(".state-error").inner_text(), "server error message shown")
        page.close()

        errors = [c for c in console if not c.startswith("warning")]
        for c in console:
            print("console:", c)
        expect(not errors, f"no console errors ({len(errors)})")
        browser.close()
    for h in (httpd, empty_httpd, err_httpd):
        h.shutdown()
    print(f"screenshots in {shots}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
