"""End to end in Chromium: the HTML report of a pair of runs reads with every section visible and a hostile kernel
name shown as text; the scalars `profile()` writes appear in TensorBoard's Scalars dashboard."""
from __future__ import annotations

import gzip
import json
import os

import pytest

import tb_gpuinsight

from .browser import SAMPLES, browser_page, need_browser, tensorboard

XSS = "<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script>"
SECTIONS = ("devices", "step", "recommendations", "waste", "memory", "comparison")


def _hostile_run(root):
    """The bert_h100 sample with every kernel name (and the run's name) carrying markup."""
    run = root / ("bert" + XSS.replace("/", "_"))
    run.mkdir(parents=True)
    folder = os.path.join(SAMPLES, "bert_h100")
    doc = json.loads(gzip.decompress(open(os.path.join(folder, os.listdir(folder)[0]), "rb").read()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = e["name"] + XSS
    (run / "node.1751410836000000000.pt.trace.json").write_text(json.dumps(doc))
    return run


def test_html_report_of_a_pair_in_chromium_shows_every_section_and_no_injected_markup(tmp_path):
    need_browser()
    run = _hostile_run(tmp_path / "logdir")
    page_file = tmp_path / "report.html"
    page_file.write_text(tb_gpuinsight.report(run, baseline=os.path.join(SAMPLES, "vit_h100"), format="html"))
    console: list = []
    with browser_page(console) as page:
        page.goto(page_file.as_uri())
        for section in SECTIONS:
            assert page.locator(f"section#{section} h2").is_visible(), section
        assert page.locator("h1").inner_text().startswith("GPU Insight report: bert<img src=x onerror=")
        assert page.locator("section#comparison h2").inner_text() == "Changes from the baseline vit_h100"
        assert page.locator("section#comparison tbody tr").count() > 3
        titles = [page.locator("section#waste code").nth(i).get_attribute("title") for i in range(3)]
        assert all(t.endswith(XSS) for t in titles), titles  # each raw kernel name, markup included, as text
        assert page.locator("img").count() == 0 and page.locator("script").count() == 0
        assert page.evaluate("() => window.__pwned") is None
        first = page.locator("section#waste tbody tr").first.locator("td").nth(1)
        assert first.is_visible() and first.inner_text().strip()
        card = page.locator("section#step .card").first
        assert "ms" in card.inner_text() and card.get_attribute("title")  # the figure's provenance on hover
    assert not console, console


def test_dlrm_html_report_in_chromium_names_the_straggler(tmp_path):
    need_browser()
    from .corpus import corpus_path

    page_file = tmp_path / "dlrm.html"
    page_file.write_text(tb_gpuinsight.report(str(corpus_path("param/dlrm_8ranks")), format="html"))
    console: list = []
    with browser_page(console) as page:
        page.goto(page_file.as_uri())
        dist = page.locator("section#distributed")
        assert dist.is_visible() and "Straggler: rank 7" in dist.inner_text()
        assert page.locator("section#distributed tbody tr").count() == 5
        box = page.locator("section#recommendations ol li").first.bounding_box()
        assert box and box["height"] > 0
    assert not console, console


@pytest.fixture()
def recorded(tmp_path):
    torch = pytest.importorskip("torch")
    run = tmp_path / "logdir" / "mlp"
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tb_gpuinsight.profile(run, worker_name="w", wait=1, warmup=1, active=3, repeat=2) as prof:
        for _ in range(10):
            loss = model(torch.randn(16, 32)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    return tmp_path / "logdir"


def test_scalars_of_a_recorded_loop_show_in_tensorboards_scalars_dashboard(tmp_path, recorded):
    need_browser()
    console: list = []
    with tensorboard(str(recorded), str(tmp_path / "cache")) as url, browser_page(console) as page:
        page.goto(url + "#scalars")
        tag = page.get_by_text("gpuinsight/step_time_ms").first
        tag.wait_for(state="visible", timeout=90000)
        # the chart card of the tag is drawn (a canvas or svg inside the scalar card)
        page.get_by_text("gpuinsight", exact=True).first.wait_for(state="visible", timeout=60000)
        assert page.locator("tf-scalar-card, .scalar-card, tf-line-chart-data-loader").count() > 0


def test_header_report_menu_downloads_the_selections_report(samples_tensorboard):
    from .browser import plugin_in_browser

    with plugin_in_browser(samples_tensorboard) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='vit_h100']", state="attached", timeout=90000)
        frame.locator("select[aria-label='Run']").select_option("vit_h100")
        frame.locator("summary", has_text="Report").click()
        link = frame.locator("details.menu a", has_text="HTML page")
        link.wait_for(state="visible", timeout=60000)
        href = link.get_attribute("href")
        assert "format=html" in href and "run=vit_h100" in href
        fetch = """async href => { const r = await fetch(href); return {status: r.status,
            disposition: r.headers.get('content-disposition'), text: await r.text()}; }"""
        answer = frame.evaluate(fetch, href)
        for _ in range(60):  # 503 while the span is still being analysed
            if answer["status"] != 503:
                break
            frame.wait_for_timeout(1000)
            answer = frame.evaluate(fetch, href)
        assert answer["status"] == 200, answer
        assert answer["disposition"] == 'attachment; filename="gpuinsight-report-vit_h100.html"'
        html = answer["text"]
        assert "<h1>GPU Insight report: vit_h100 / h100-node</h1>" in html and "<section id=waste>" in html
