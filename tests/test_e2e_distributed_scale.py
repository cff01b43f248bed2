"""End to end at 1280x720: real TensorBoard serving a run of 150 ranks (copies of the 8 real DLRM ranks) from a
summary store with its rank index, headless Chromium on the Distributed tab: ranks paged by the server, the order
switched to top stragglers first, a rank found by the search box."""
from __future__ import annotations

from tb_gpuinsight.analysis import rank_table
from tb_gpuinsight.logdir import discover
from tb_gpuinsight.store import open_store

from .browser import need_browser, plugin_page
from .corpus import corpus_path
from .rank_copies import build, real_summaries

RANKS = 150


def _rows(frame) -> list:
    return [int(t.split()[0]) for t in frame.locator(".ranks-per-rank tbody tr").all_inner_texts()]


def test_distributed_tab_pages_and_searches_150_ranks(tmp_path):
    need_browser()
    corpus = str(corpus_path("param/dlrm_8ranks"))
    logdir, store = str(tmp_path / "logdir"), str(tmp_path / "cache")
    build(corpus, logdir, real_summaries(corpus, str(tmp_path)), RANKS, store)
    assert not rank_table.index_logdir(open_store(store), logdir, discover(logdir))  # as `summarize` leaves it
    console: list = []
    with plugin_page(tmp_path, logdir, console=console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
        frame.get_by_role("tab", name="Distributed").click()
        frame.wait_for_function("() => document.querySelectorAll('.ranks-per-rank tbody tr').length === 64",
                                timeout=120000)
        frame.locator("select[aria-label='Rank order']").select_option("rank")
        frame.wait_for_function("() => document.querySelector('.ranks-pager-status')?.innerText"
                                ".startsWith('ranks 1–64 of 150')", timeout=30000)
        assert _rows(frame) == list(range(64))
        frame.get_by_role("button", name="Next ›").click()
        frame.wait_for_function("() => document.querySelector('.ranks-pager-status')?.innerText"
                                ".startsWith('ranks 65–128 of 150')", timeout=30000)
        assert _rows(frame) == list(range(64, 128))
        assert "64 of 150 ranks on this page" in frame.locator(".chart-status").inner_text()
        frame.get_by_role("button", name="Next ›").click()
        frame.wait_for_function("() => document.querySelectorAll('.ranks-per-rank tbody tr').length === 22",
                                timeout=30000)
        assert _rows(frame) == list(range(128, 150))
        assert frame.get_by_role("button", name="Next ›").is_disabled()

        frame.locator("select[aria-label='Rank order']").select_option("straggler")
        frame.wait_for_function("() => document.querySelector('.ranks-pager-status')?.innerText"
                                ".startsWith('ranks 1–64 of 150')", timeout=30000)
        waited = {r["rank"]: r["others_waited_us"] for r in _report(store, logdir).ranks}
        shown = _rows(frame)
        assert [waited[r] for r in shown] == sorted((waited[r] for r in shown), reverse=True)
        assert waited[shown[0]] == max(waited.values())  # the rank the others waited for most, first

        frame.locator("input[aria-label='Search ranks']").fill("149")
        frame.wait_for_function("() => document.querySelectorAll('.ranks-per-rank tbody tr').length === 1",
                                timeout=30000)
        assert _rows(frame) == [149]
        assert "matching “149”" in frame.locator(".ranks-pager-status").inner_text()
        frame.locator("input[aria-label='Search ranks']").fill("no such worker")
        frame.wait_for_selector("text=No rank matches", timeout=30000)
        page.screenshot(path=str(tmp_path / "distributed-150.png"))
    assert not console, console


def _report(store: str, logdir: str):
    """The run's report as the index holds it (the answer the tab was given)."""
    from tb_gpuinsight.store import rank_index

    index = rank_index.load(open_store(store), "job")
    (stored,) = index.reports.values()
    return rank_table.from_json(stored)
