"""End to end at 1280x720: the Timeline draws launch -> kernel flows (the view's toggle and the selected event's),
finds kernels by class ("gemm"), lists a CPU op's kernels with their efficiency in a resizable drawer; the Kernel
efficiency tab names Tensile GEMMs by macro tile, matrix instruction and transposes, the raw name on hover."""
from __future__ import annotations

import os
from pathlib import Path

from .browser import plugin_in_browser, reload_plugin_frame, tensorboard, need_browser
from .corpus import corpus_path

CANVAS = "() => document.querySelector('.tl-canvas')?.timeline"
SETTLED = "() => /items · query/.test(document.querySelector('.tl-status')?.textContent || '')"


def _bert_timeline(frame) -> None:
    frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
    frame.locator("select[aria-label='Run']").select_option("bert_h100")
    frame.locator("nav.tabs button", has_text="Timeline").click()
    frame.wait_for_function(SETTLED, timeout=60000)


def _find_gemm(frame) -> None:
    frame.locator("input[aria-label='Find on timeline']").fill("gemm")
    frame.locator("input[aria-label='Find on timeline']").press("Enter")
    frame.wait_for_selector(".drawer:not([hidden]) .tl-launched-by", timeout=60000)


def test_timeline_flows_find_by_class_and_op_kernels(samples_tensorboard, tmp_path):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        _bert_timeline(frame)
        frame.locator("input[aria-label='Show launch flows']").check()
        flows = frame.evaluate(f"""() => {{ const tl = ({CANVAS})();
            return tl.flows && tl.data.lanes.flatMap(l => l.events.src_lane || []).filter(s => s != null).length; }}""")
        assert flows > 10, flows
        # Find by class: "gemm" lands on the longest GEMM and opens its drawer, which names the op that launched it.
        _find_gemm(frame)
        assert "Launched by aten::" in frame.locator(".drawer:not([hidden]) .tl-launched-by").inner_text()
        assert frame.evaluate(f"() => ({CANVAS})().picked.length") == 1
        frame.wait_for_function(SETTLED, timeout=60000)
        page.screenshot(path=str(tmp_path / "timeline_flows_1280x720.png"))
        # The drawer is a panel beside the lanes; its grip (its left edge) sets its width, and the lanes follow.
        # A CPU op's drawer lists its kernels with their % of roof.
        panel = frame.locator(".drawer:not([hidden])")
        before = panel.bounding_box()
        grip = frame.locator(".drawer:not([hidden]) .drawer-grip").bounding_box()
        page.mouse.move(grip["x"] + 3, grip["y"] + 200)
        page.mouse.down()
        page.mouse.move(grip["x"] - 150, grip["y"] + 200, steps=5)
        page.mouse.up()
        side = frame.evaluate("() => getComputedStyle(document.documentElement).getPropertyValue('--gi-side')")
        after = panel.bounding_box()
        assert side.strip().endswith("px") and after["width"] > before["width"] + 100, (side, before, after)
        frame.wait_for_function(f"w => ({CANVAS})().el.getBoundingClientRect().right <= w + 1", arg=after["x"],
                                timeout=30000)
        op = frame.evaluate(f"""() => {{ const tl = ({CANVAS})();
            for (const lane of tl.data.lanes) {{ const ev = lane.events;
              for (let i = 0; i < ev.index.length; i++)
                if (tl.names[ev.name[i]] === 'aten::addmm' || tl.names[ev.name[i]] === 'aten::mm')
                  return {{index: ev.index[i], lane: lane.id, name: tl.names[ev.name[i]], start: ev.start[i], dur: ev.dur[i], act: -1}}; }}
            return null; }}""")
        assert op, "no matmul op drawn"
        frame.evaluate(f"op => ({CANVAS})().cb.onPick(op)", op)
        frame.wait_for_selector(".drawer:not([hidden]) .tl-kernels-table tbody tr", timeout=60000)
        row = frame.locator(".drawer:not([hidden]) .tl-kernels-table tbody tr").first.inner_text()
        assert "%" in row or "—" in row
        assert frame.evaluate(f"() => ({CANVAS})().picked.length") >= 1
    assert not console, console


def test_tensile_rows_read_by_tile_and_transposes(tmp_path):
    need_browser()
    logdir = tmp_path / "logdir" / "vllm"
    logdir.mkdir(parents=True)
    os.symlink(corpus_path("tracelens/vllm_decode_full__graph_execution.json.gz"),
               logdir / "mi300x.1700000000000.pt.trace.json.gz")
    console: list = []
    with tensorboard(str(tmp_path / "logdir"), str(tmp_path / "cache")) as url, \
            plugin_in_browser(url, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.wait_for_selector("select[aria-label='Run'] option[value='vllm']", state="attached", timeout=120000)
        frame.locator("nav.tabs button", has_text="Kernel efficiency").click()
        frame.locator("input[aria-label='Filter kernel names']").fill("Cijk")
        # the filtered table: every row a Tensile GEMM, read by its tile and instruction (not Cijk_...)
        frame.wait_for_function("() => { const rows = [...document.querySelectorAll('.tabulator-row')];"
                                " return rows.length >= 2 && rows.every("
                                "r => /MT\\d+x\\d+x\\d+ MI\\d+x\\d+x\\d+ [NT]{2} #/.test(r.textContent)); }",
                                timeout=180000)
        cells = frame.evaluate("() => [...document.querySelectorAll('.tabulator-row')].map(r => "
                               "[...r.querySelectorAll('[title]')].map(e => e.getAttribute('title')).join(' '))")
        assert any("Cijk_" in c for c in cells)  # the whole raw name on hover
        page.screenshot(path=str(Path(os.environ.get("GI_SCREENSHOTS") or tmp_path) / "kernels-tensile-rows.png"))
    assert not console, console


def test_reload_keeps_diff_sides_timeline_find_and_selected_event(samples_tensorboard):
    """A reload of the plugin's frame lands on the same view: the Diff's B (and a pinned A), the Timeline's Find
    (its highlights) and the selected event (its drawer)."""
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        _bert_timeline(frame)
        _find_gemm(frame)
        found = frame.evaluate(f"() => ({CANVAS})().highlight.length")
        picked = frame.evaluate(f"() => ({CANVAS})().selected")
        assert found > 1 and picked is not None
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_function(f"n => ({CANVAS})()?.highlight.length === n", arg=found, timeout=60000)
        frame.wait_for_function(f"i => ({CANVAS})()?.selected === i", arg=picked, timeout=60000)
        assert frame.locator("input[aria-label='Find on timeline']").input_value() == "gemm"
        frame.wait_for_selector(".drawer:not([hidden]) .kernel-name", timeout=60000)
        # Diff: B chosen by hand survives a reload.
        frame.locator("nav.tabs button", has_text="Diff").click()
        b_run = frame.locator("select[aria-label='Run B']")
        b_run.wait_for(timeout=60000)
        frame.wait_for_function("() => document.querySelectorAll(\"select[aria-label='Run B'] option\").length > 1",
                                timeout=60000)
        current = b_run.input_value()
        other = [v for v in b_run.evaluate("s => [...s.options].map(o => o.value)") if v != current][0]
        b_run.select_option(other)
        frame.wait_for_function("r => decodeURIComponent(parent.location.hash).includes('gi.diff.b_run=' + r)",
                                arg=other, timeout=30000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_selector("select[aria-label='Run B']", timeout=60000)
        frame.wait_for_function("r => document.querySelector(\"select[aria-label='Run B']\")?.value === r",
                                arg=other, timeout=60000)
    assert not console, console
