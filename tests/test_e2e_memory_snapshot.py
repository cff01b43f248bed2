"""End to end: real TensorBoard over a run holding a trace and a CUDA memory snapshot: /memory_snapshot answers the
CLI's peak, and the Memory tab at 1280x720 shows the snapshot's timeline, what holds the peak by source line (the
stack on click) and the fragmentation."""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request

from tb_gpuinsight.cli import main

from .browser import SAMPLES, need_browser, plugin_in_browser, tensorboard
from .corpus import CORPUS, need_corpus

SNAPSHOT = os.path.join(CORPUS, "memory_snapshots", "cs336_lm_memory_snapshot.pickle")
SHOT = os.environ.get("TB_GPUINSIGHT_SNAPSHOT_SHOT", "")  # where to keep the tab's screenshot, if anywhere


def _route(url: str, run: str, timeout: float = 120.0) -> dict:
    end = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}data/plugin/gpuinsight/memory_snapshot?run={run}") as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.time() > end:
                raise
            time.sleep(0.5)


def test_memory_tab_with_a_snapshot_and_the_route_in_real_tensorboard(tmp_path, capsys):
    need_corpus()
    need_browser()
    run = tmp_path / "logdir" / "lm"
    run.mkdir(parents=True)
    shutil.copy(os.path.join(SAMPLES, "bert_h100", "h100-node.1751410836000000000.pt.trace.json.gz"), run)
    shutil.copy(SNAPSHOT, run / "memory_snapshot.pickle")
    assert main(["memory", str(run), "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    console: list = []
    with tensorboard(str(tmp_path / "logdir"), str(tmp_path / "cache")) as url:
        body = _route(url, "lm")
        assert body["peak_allocated_bytes"] == cli["peak_allocated_bytes"] == 13_923_997_700
        assert body["peak_reserved_bytes"] == cli["peak_reserved_bytes"]
        assert [(r["frame"], r["bytes"], r["count"]) for r in body["at_peak"]] == \
            [(r["frame"], r["bytes"], r["count"]) for r in cli["at_peak"]]
        with plugin_in_browser(url, console) as (page, frame):
            page.set_viewport_size({"width": 1280, "height": 720})
            frame.wait_for_selector("select[aria-label='Run'] option[value='lm']", state="attached", timeout=60000)
            frame.get_by_role("tab", name="Memory").click()
            frame.wait_for_selector(".memory-snapshot .snapshot-chart canvas", timeout=60000)
            facts = frame.locator(".memory-snapshot .memory-facts").inner_text()
            assert "Peak allocated" in facts and "13.9 GB" in facts, facts
            assert "Free in segments at peak" in facts
            first = frame.locator(".snapshot-at-peak tbody tr").first
            assert "cs336_basics/model.py:39" in first.inner_text()
            first.click()
            stack = frame.locator(".snapshot-stack").inner_text()
            assert "einsum" in stack and "model.py:39 forward" in stack
            frame.wait_for_selector(".memory-chart canvas", timeout=60000)  # the trace's own memory view below
            frame.locator(".memory-snapshot").scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "memory_snapshot_tab.png"))
            if SHOT:
                shutil.copy(tmp_path / "memory_snapshot_tab.png", SHOT)
    assert not console, console
