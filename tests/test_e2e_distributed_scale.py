"""End to end at 1280x720: real TensorBoard serving a run of 150 ranks (copies of the 8 real DLRM ranks) from a
summary store with its rank index, headless Chromium on the Distributed tab: ranks paged by the server, the order
switched to top stragglers first, a rank found by the search box."""
from __future__ import annotations

from tb_gpuinsight.store import rank_table
from tb_gpuinsight.logdir import discover
from tb_gpuinsight.store import open_store

from .browser import need_browser, plugin_page
from .corpus import corpus_path
from .rank_copies import build, real_summaries

RANKS = 150


def _rows(frame) -> list:
    return [int(t.split()[0]) for t in frame.locator(".ranks-per-rank tbody tr").all_inner_texts()]


def _wait_first(frame, rank: int, count: int) -> None:
    """Until the table shows `count` rows starting with `rank` (the page asked for has arrived)."""
    frame.wait_for_function(
        f"() => {{ const rows = document.querySelectorAll('.ranks-per-rank tbody tr');"
        f" return rows.length === {count} && rows[0].querySelector('td')?.innerText.trim() === '{rank}'; }}",
        timeout=60000)


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
        # Past one page, the ranks the others waited for most come first.
        report = _report(store)
        assert report.stragglers and frame.locator("select[aria-label='Rank order']").input_value() == "straggler"
        expected = rank_table.heatmap_page(report, order="straggler")["ranks"]
        _wait_first(frame, expected[0], 64)
        shown = _rows(frame)
        assert shown == expected
        waited = {r["rank"]: r["others_waited_us"] for r in report.ranks}
        assert [waited[r] for r in shown] == sorted((waited[r] for r in shown), reverse=True)
        assert waited[shown[0]] == max(waited.values())
        assert frame.locator(".ranks-pager-status").inner_text().startswith("ranks 1–64 of 150")

        frame.locator("select[aria-label='Rank order']").select_option("rank")
        _wait_first(frame, 0, 64)
        assert _rows(frame) == list(range(64))
        frame.get_by_role("button", name="Next ›").click()
        _wait_first(frame, 64, 64)
        assert _rows(frame) == list(range(64, 128))
        assert frame.locator(".ranks-pager-status").inner_text().startswith("ranks 65–128 of 150")
        assert "64 of 150 ranks on this page" in frame.locator(".chart-status").inner_text()
        frame.get_by_role("button", name="Next ›").click()
        _wait_first(frame, 128, 22)
        assert _rows(frame) == list(range(128, 150))
        assert frame.get_by_role("button", name="Next ›").is_disabled()

        frame.locator("input[aria-label='Search ranks']").fill("149")
        _wait_first(frame, 149, 1)
        assert "matching “149”" in frame.locator(".ranks-pager-status").inner_text()
        frame.locator("input[aria-label='Search ranks']").fill("no such worker")
        frame.wait_for_selector("text=No rank matches", timeout=60000)
        page.screenshot(path=str(tmp_path / "distributed-150.png"))
    assert not console, console


def _report(store: str):
    """The run's report as the index holds it (the answer the tab was given)."""
    from tb_gpuinsight.store import rank_index

    index = rank_index.load(open_store(store), "job")
    (stored,) = index.reports.values()
    return rank_table.from_json(stored)
