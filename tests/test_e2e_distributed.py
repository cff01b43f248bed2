"""End to end: real TensorBoard over the real 8-rank DLRM step, headless Chromium, the Distributed tab (per-rank
table and charts, straggler, collectives with bus bandwidth, heatmap), NCCL kernels rated "communication", and the
kernel table over all ranks."""
from __future__ import annotations

import os

from .browser import plugin_page
from .corpus import corpus_path


def test_distributed_tab_on_dlrm(tmp_path):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(corpus_path("param/dlrm_8ranks"), logdir / "dlrm")
    console: list = []
    with plugin_page(tmp_path, str(logdir), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
        frame.get_by_role("tab", name="Distributed").click()
        frame.wait_for_function("() => document.querySelectorAll('.ranks-per-rank tbody tr').length === 8",
                                timeout=120000)
        head = frame.locator(".ranks-per-rank thead").inner_text()
        assert all(c in head for c in ("Host-bound", "Launch-bound", "Sync", "Data loading", "Other idle")), head
        straggler = frame.locator(".ranks-straggler").inner_text()
        assert "Straggler: rank 7" in straggler and "arrived last at 5 of 8" in straggler, straggler
        assert "row-straggler" in (frame.locator(".ranks-per-rank tbody tr").nth(7).get_attribute("class") or "")
        collectives = frame.locator(".ranks-collectives").inner_text()
        assert "all_reduce" in collectives and "all_to_all" in collectives and "GB/s" in collectives
        assert "NVLink 2.0" in frame.locator(".ranks-summary").inner_text()
        frame.wait_for_selector(".ranks-heatmap canvas", timeout=60000)
        frame.wait_for_selector(".ranks-bars canvas", timeout=60000)
        frame.locator(".ranks-per-rank tbody tr").nth(1).click()
        compare = frame.locator(".rank-compare").inner_text()
        assert "Rank 1 (worker1_step_12) against the median rank" in compare and "Wait in collectives" in compare
        frame.wait_for_selector(".ranks-kernel-compare", timeout=60000)
        kernels = frame.locator(".rank-kernels").inner_text()
        assert "against rank 0, the rank of median step time" in kernels and "ncclKernel_SendRecv" in kernels, kernels
        frame.locator("select[aria-label='Heatmap metric']").select_option("comm_wait")
        frame.wait_for_function(
            "() => document.querySelector('.chart-status')?.innerText.includes('Wait in collectives per rank')",
            timeout=60000)
        page.screenshot(path=str(tmp_path / "distributed.png"), full_page=True)

        frame.get_by_role("tab", name="Kernel efficiency").click()
        frame.wait_for_selector(".tag-communication", timeout=120000)
        assert "communication" in frame.locator(".tag-communication").first.inner_text()
        # "All ranks": every rank's trace in one analysis; each rank ran on its own GPU, so one card per rank, each
        # naming the rank it adds up.
        frame.locator("select[aria-label='Worker']").select_option(label="All ranks (8)")
        frame.locator(".ke-summary-head").click()  # the cards start folded into one line above the table
        frame.wait_for_function(
            "() => new Set([...document.querySelectorAll('.badge')].map(b => b.innerText)"
            ".filter(t => /^GPU ([0-7]) · rank \\1$/.test(t))).size === 8",
            timeout=120000)
        frame.wait_for_selector(".tag-communication", timeout=60000)
        # The table spans every rank: its spread over the ranks in its own columns (every NCCL kernel on all 8).
        frame.wait_for_selector(".tabulator-col[tabulator-field='rank_median_us']", timeout=60000)
        frame.locator(".tabulator-col[tabulator-field='rank_max_us']").click()
        frame.wait_for_function(
            "() => [...document.querySelectorAll('.tabulator-row')].some(r =>"
            " r.innerText.includes('ncclKernel_SendRecv') && r.querySelector(\"[tabulator-field='ranks']\")?.innerText"
            " === '8')", timeout=60000)
        assert "all ranks: one row per kernel" in frame.locator(".table-status").inner_text()
        page.screenshot(path=str(tmp_path / "all_ranks_kernels.png"), full_page=True)
    assert not console, console
