"""End to end, every tab at 1280x720 on real traces, in one TensorBoard and one browser for the module: a sample
(bert_h100), a sample with an Execution Trace (cpu_mlp), a ROCm trace from the corpus (MI300X, torch.compile) and
the 8-rank DLRM run with its Execution Traces. Per run and tab: the first view is not blank (content or a stated
empty state, no error), the page does not scroll sideways, no chart legend lies over its plot, the shares of one
list sum to at most 100 % (a critical-path cause's share of its step too), a label cut by an ellipsis shows its full text on hover; and a reload of the plugin's
frame or of the page lands on the same tab. The All-ranks Overview names its steps by rank."""
from __future__ import annotations

import os
import re

import pytest

from .browser import (CHROMIUM, CHROMIUM_ARGS, LOADED_MACHINE_WAIT_MS, SAMPLES, need_browser, plugin_frame,
                      reload_plugin_frame, tensorboard)
from .corpus import corpus_path

TABS = ["Overview", "Kernel efficiency", "Diff", "Trends", "Tensor shapes", "Execution graph", "Memory", "Timeline",
        "Distributed"]
RUNS = ["bert_h100", "cpu_mlp", "rocm_mi300x", "dlrm"]

# The charts' legend rectangles against their plot rectangles (ECharts' own layout), in chart pixels.
LEGEND_OVER_PLOT = """() => [...document.querySelectorAll('.content .gi-chart')]
    .filter(el => el.chart && !el.chart.isDisposed() && el.offsetWidth > 0).flatMap(el => {
  const c = el.chart, model = c.getModel();
  const plots = model.findComponents({mainType: 'grid'}).map(g => g.coordinateSystem && g.coordinateSystem.getRect())
    .filter(Boolean);
  return model.findComponents({mainType: 'legend'}).flatMap(lg => {
    const view = c.getViewOfComponentModel(lg);
    if (lg.get('show') === false || !view) return [];
    const r = view.group.getBoundingRect();
    const x = r.x + view.group.x, y = r.y + view.group.y;
    return plots.filter(p => x < p.x + p.width - 1 && x + r.width > p.x + 1 && y < p.y + p.height - 1
                        && y + r.height > p.y + 1)
      .map(p => ({chart: el.className, legend: [x, y, r.width, r.height], plot: [p.x, p.y, p.width, p.height]}));
  });
})"""

# Every column headed "share" of a table in the tab, as the numbers it shows (percent).
SHARE_COLUMNS = r"""() => {
  const pct = t => { const m = /([\d.,]+)\s*%/.exec(t || '');
    return m && !/^\s*</.test(t) ? parseFloat(m[1].replace(/,/g, '')) : 0; };
  const out = [];
  const allSteps = document.querySelector("select[aria-label='Critical path step']")?.value === '*';
  for (const tab of document.querySelectorAll('.content .tabulator')) {
    if (allSteps && tab.closest('.cp-table')) continue;  // shares of each step's wall time, several steps listed
    for (const col of tab.querySelectorAll('.tabulator-col[tabulator-field]')) {
      if (!/share/i.test(col.textContent)) continue;
      const f = col.getAttribute('tabulator-field');
      const cells = [...tab.querySelectorAll(`.tabulator-row .tabulator-cell[tabulator-field="${f}"]`)];
      out.push({table: f, sum: cells.reduce((s, c) => s + pct(c.textContent), 0), rows: cells.length});
    }
  }
  for (const table of document.querySelectorAll('.content table')) {
    const heads = [...table.querySelectorAll('thead th')].map(th => th.textContent);
    heads.forEach((hd, i) => {
      if (!/share/i.test(hd)) return;
      const cells = [...table.querySelectorAll('tbody tr')].map(tr => tr.children[i]);
      out.push({table: hd, sum: cells.reduce((s, c) => s + pct(c && c.textContent), 0), rows: cells.length});
    });
  }
  return out;
}"""

# A label cut by an ellipsis without a title of its own or an ancestor's: marked for the hover check.
CUT_LABEL = """() => { const cut = [...document.querySelectorAll('.content *')].filter(e => e.offsetParent !== null
    && e.children.length === 0 && e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1
    && getComputedStyle(e).textOverflow === 'ellipsis' && !e.closest('[title]') && e.textContent.trim());
  cut.slice(0, 3).forEach((e, i) => e.setAttribute('data-cut', String(i)));
  return cut.slice(0, 3).map(e => e.textContent.trim()); }"""

SETTLED = """() => { const c = document.querySelector('.content'); if (!c) return false;
  const busy = [...c.querySelectorAll('.state-loading, .state-progress, .spinner')].some(e => e.offsetParent !== null);
  return !busy && c.innerText.trim().length > 0; }"""


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tabs") / "logdir"
    root.mkdir()
    for run in ("bert_h100", "cpu_mlp"):
        os.symlink(os.path.join(SAMPLES, run), root / run)
    (root / "rocm_mi300x").mkdir()
    os.symlink(corpus_path("tracelens/torch_compile_triton__trace.json.gz"),
               root / "rocm_mi300x" / "mi300x.1700000000000.pt.trace.json.gz")
    os.symlink(corpus_path("param/dlrm_8ranks"), root / "dlrm")
    return root


@pytest.fixture(scope="module")
def page(logdir, tmp_path_factory):
    need_browser()
    from playwright.sync_api import sync_playwright

    with tensorboard(str(logdir), str(tmp_path_factory.mktemp("cache"))) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 720})
            pg.set_default_timeout(LOADED_MACHINE_WAIT_MS)
            pg.goto(url + "#gpuinsight")
            yield pg
        finally:
            browser.close()


def _open(page, run: str, tab: str):
    frame = plugin_frame(page)
    frame.wait_for_selector(f"select[aria-label='Run'] option[value='{run}']", state="attached", timeout=120000)
    if frame.locator("select[aria-label='Run']").input_value() != run:
        frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text=tab).click()
    frame.wait_for_function(SETTLED, timeout=180000)
    page.wait_for_timeout(400)  # charts lay out after their data
    frame.wait_for_function(SETTLED, timeout=180000)
    return frame


def _active_tab(frame) -> str:
    return frame.locator("nav.tabs button[aria-selected='true']").inner_text().strip().lower()


@pytest.mark.parametrize("run", RUNS)
def test_every_tab_reads_at_1280(page, run, tmp_path):
    problems = []
    for tab in TABS:
        frame = _open(page, run, tab)
        where = f"{run} / {tab}"
        content = frame.locator(".content")
        if content.locator(".state-error").count():
            problems.append(f"{where}: error: {content.locator('.state-error').first.inner_text()[:200]}")
        text = content.inner_text().strip()
        canvases = frame.evaluate("() => [...document.querySelectorAll('.content canvas')]"
                                  ".filter(c => c.offsetWidth > 100 && c.offsetHeight > 60).length")
        if len(text) < 40 and not canvases:
            problems.append(f"{where}: blank first view ({text!r})")
        wide = frame.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        if wide[0] > wide[1] + 1:
            problems.append(f"{where}: scrolls sideways ({wide[0]} px in {wide[1]})")
        for hit in frame.evaluate(LEGEND_OVER_PLOT):
            problems.append(f"{where}: legend over the plot {hit}")
        graph = frame.evaluate("() => { const l = document.querySelector('.content .graph-legend-host'),"
                               " c = document.querySelector('.content .graph-canvas'); if (!l || !c) return null;"
                               " const a = l.getBoundingClientRect(), b = c.getBoundingClientRect();"
                               " return a.top < b.bottom - 1 && a.bottom > b.top + 1; }")
        if graph:
            problems.append(f"{where}: graph legend over the canvas")
        for i, text in enumerate(frame.evaluate(CUT_LABEL)):
            label = frame.locator(f"[data-cut='{i}']")
            label.hover()
            title = label.evaluate("e => e.closest('[title]')?.getAttribute('title') || ''")
            if text not in title:
                problems.append(f"{where}: cut label {text!r} without its full text on hover")
        for share in frame.evaluate(SHARE_COLUMNS):
            if share["sum"] > 100.5:
                problems.append(f"{where}: shares of one list sum to {share['sum']:.1f} % ({share})")
        for share in re.findall(r"Mostly [^:\n]+: ([\d.]+) ?%", content.inner_text()):
            if float(share) > 100.05:  # a cause's share of its step (the causes split the wall time)
                problems.append(f"{where}: a critical-path cause at {share} % of its step")
        page.screenshot(path=str(tmp_path / f"{run}_{re.sub(r'[^a-z]+', '_', tab.lower())}.png"))
    assert not problems, "\n".join(problems)


# The header's run picker holds the run: it is filled when /runs answers, which a loaded machine may send after a
# tab restored from the address has drawn its content.
RUN_PICKED = "run => document.querySelector(\"select[aria-label='Run']\")?.value === run"


def test_reloads_land_on_the_same_tab(page):
    """The plugin's frame reloaded on every tab; the whole page (slower: TensorBoard itself starts again) on every
    other tab and on the Execution graph."""
    for i, tab in enumerate(TABS):
        frame = _open(page, "dlrm", tab)
        assert _active_tab(frame) == tab.lower()
        if i % 2 == 0 or tab == "Execution graph":
            page.reload()
            frame = plugin_frame(page)
            frame.wait_for_function(SETTLED, timeout=180000)
            assert _active_tab(frame) == tab.lower(), f"page reload on {tab}"
            frame.wait_for_function(RUN_PICKED, arg="dlrm", timeout=60000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_selector("nav.tabs button[aria-selected='true']", timeout=60000)
        frame.wait_for_function(SETTLED, timeout=180000)
        assert _active_tab(frame) == tab.lower(), f"frame reload on {tab}"
        frame.wait_for_function(RUN_PICKED, arg="dlrm", timeout=60000)


def test_all_ranks_overview_names_ranks(page):
    frame = _open(page, "dlrm", "Overview")
    frame.locator("select[aria-label='Worker']").select_option("*")
    frame.wait_for_function("() => document.querySelectorAll('.ov-step').length === 8", timeout=180000)
    steps = frame.evaluate("() => [...document.querySelectorAll('.ov-step')].map(b => b.textContent)")
    assert sorted(s.split(" · ")[-1] for s in steps) == [f"rank {r}" for r in range(8)], steps
    frame.locator("select[aria-label='Worker']").select_option(index=0)


def test_all_ranks_device_cards_name_their_ranks(page):
    """Kernel efficiency in All ranks: each GPU's card says which ranks it adds up (DLRM: rank i on GPU i)."""
    frame = _open(page, "dlrm", "Kernel efficiency")
    frame.locator("select[aria-label='Worker']").select_option("*")
    frame.wait_for_function("() => [...document.querySelectorAll('.card-head .badge')]"
                            ".some(b => /· (rank|ranks|all ranks)/.test(b.textContent))", timeout=180000)
    badges = frame.evaluate("() => [...document.querySelectorAll('.card-head .badge')].map(b => b.textContent)")
    assert badges and all(re.fullmatch(r"GPU \d+ · (rank \d+|ranks [\d–, ]+|all ranks)", b) for b in badges), badges
    frame.locator("select[aria-label='Worker']").select_option(index=0)
    frame.wait_for_function("() => [...document.querySelectorAll('.card-head .badge')]"
                            ".every(b => /^GPU \\d+$/.test(b.textContent))", timeout=180000)


def test_a_cpu_runs_step_chart_legend_follows_cpu_categories(page):
    frame = _open(page, "cpu_mlp", "Overview")
    frame.wait_for_function("() => document.querySelector('.ov-step-chart')?.dataset.series", timeout=60000)
    series = frame.evaluate("() => document.querySelector('.ov-step-chart').dataset.series").split("|")
    assert series and not [s for s in series if s.startswith("idle:") or "GPU" in s], series
