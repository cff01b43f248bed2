"""End to end at 1280x720 on the samples: the Timeline draws forward -> backward flows beside launch flows and a CPU
op's drawer shows its inputs and its backward op (a click goes there); every view's options survive a reload (the
Timeline's colour, flows and selected event, Kernel efficiency's sort, the Shapes view and filter, the Overview's step scope, the Trends
metric); a CPU device's memory chart lists only the curves it has. Set GI_SCREENSHOTS to a folder to keep the
screenshots."""
from __future__ import annotations

import os
from pathlib import Path

from .browser import plugin_frame, plugin_in_browser, reload_plugin_frame

CANVAS = "() => document.querySelector('.tl-canvas')?.timeline"
SETTLED = "() => /items · query/.test(document.querySelector('.tl-status')?.textContent || '')"


def _shots(tmp_path) -> Path:
    return Path(os.environ.get("GI_SCREENSHOTS") or tmp_path)


def _open(frame, run: str, tab: str) -> None:
    frame.wait_for_selector(f"select[aria-label='Run'] option[value='{run}']", state="attached", timeout=120000)
    if frame.locator("select[aria-label='Run']").input_value() != run:
        frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text=tab).click()


def _forward_op(frame):
    """A drawn CPU op whose backward op is linked (its end starts later)."""
    return frame.evaluate(f"""() => {{ const tl = ({CANVAS})();
        for (const lane of tl.data.lanes) {{ const ev = lane.events;
          for (let i = 0; i < ev.index.length; i++)
            if (ev.fb_lane && ev.fb_lane[i] != null && ev.fb_ts[i] > ev.start[i] && ev.act[i] < 0)
              return {{index: ev.index[i], lane: lane.id, name: tl.names[ev.name[i]], start: ev.start[i],
                       dur: ev.dur[i], act: -1}}; }}
        return null; }}""")


def test_timeline_forward_backward_flows_and_op_details(samples_tensorboard, tmp_path):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        _open(frame, "minitoy_mi250", "Timeline")
        frame.wait_for_function(SETTLED, timeout=60000)
        frame.locator("input[aria-label='Show launch flows']").check()
        op = _forward_op(frame)
        assert op, "no forward op with a backward link drawn"
        # Zoomed to the forward op's neighbourhood: the nested ops (and so both kinds of flow) are drawn.
        frame.evaluate(f"op => ({CANVAS})().setViewport(op.start - 300, op.start + 1500)", op)
        frame.wait_for_function(f"() => ({CANVAS})().data.t1 - ({CANVAS})().data.t0 < 2000", timeout=60000)
        frame.wait_for_function(SETTLED, timeout=60000)
        page.wait_for_timeout(300)
        page.screenshot(path=str(_shots(tmp_path) / "timeline-flows.png"))  # launch and fwd->bwd flows
        frame.evaluate(f"op => ({CANVAS})().cb.onPick(op)", op)
        frame.wait_for_selector(".drawer:not([hidden]) .tl-op-link button", timeout=60000)
        assert frame.locator(".drawer:not([hidden]) .tl-op-inputs tbody tr").count() >= 1  # shapes and dtypes
        picked = frame.evaluate(f"() => ({CANVAS})().picked")
        assert any(f.get("fwdBwd") for f in picked), picked  # the dashed arrow to its backward op
        frame.wait_for_function(SETTLED, timeout=60000)
        page.screenshot(path=str(_shots(tmp_path) / "timeline-op-details.png"))
        # The details sit beside the lanes at 720 px, not over them: the lanes keep their full height in view.
        lanes = frame.evaluate(f"() => ({CANVAS})().el.getBoundingClientRect().toJSON()")
        panel = frame.evaluate("() => document.querySelector('.drawer:not([hidden])').getBoundingClientRect().toJSON()")
        assert lanes["right"] <= panel["left"] + 1 and lanes["height"] > 150, (lanes, panel)
        # The backward op is one click away: the timeline moves there and selects it.
        target = frame.locator(".drawer:not([hidden]) .tl-op-link button").first.inner_text()
        frame.locator(".drawer:not([hidden]) .tl-op-link button").first.click()
        frame.wait_for_function(f"i => ({CANVAS})().selected !== i", arg=op["index"], timeout=60000)
        frame.wait_for_function("t => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === t",
                                arg=target, timeout=60000)
    assert not console, console


def test_reload_keeps_every_views_options(samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        # Timeline: colour by % of roof, flows on, an event selected.
        _open(frame, "minitoy_mi250", "Timeline")
        frame.wait_for_function(SETTLED, timeout=60000)
        frame.locator("select[aria-label='Colour by']").select_option("efficiency")
        frame.locator("input[aria-label='Show launch flows']").check()
        op = _forward_op(frame)
        frame.evaluate(f"op => ({CANVAS})().cb.onPick(op)", op)
        frame.wait_for_function("() => decodeURIComponent(parent.location.hash).includes('gi.timeline.ev=')",
                                timeout=30000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_function(f"i => ({CANVAS})()?.selected === i", arg=op["index"], timeout=60000)
        assert frame.locator("select[aria-label='Colour by']").input_value() == "efficiency"
        assert frame.locator("input[aria-label='Show launch flows']").is_checked()
        assert frame.evaluate(f"() => ({CANVAS})().flows") is True
        # Shapes: the op tree and a filter.
        _open(frame, "cpu_mlp", "Tensor shapes")
        frame.locator("button[data-view='tree']").click()
        frame.locator("input[aria-label='Filter ops or shapes…']").fill("addmm")
        frame.wait_for_function("() => decodeURIComponent(parent.location.hash).includes('gi.shapes.ops=addmm')",
                                timeout=30000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_selector("button[data-view='tree'][aria-pressed='true']", timeout=60000)
        assert frame.locator("input[aria-label='Filter ops or shapes…']").input_value() == "addmm"
        # Overview: a step scoped survives a reload, and the tab it opened shows it.
        _open(frame, "bert_h100", "Overview")
        frame.wait_for_selector(".ov-step", timeout=60000)
        frame.locator(".ov-step").first.click()
        frame.wait_for_selector(".chip-step", timeout=60000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_selector(".chip-step", timeout=60000)
        # Kernel efficiency: the table's sort (a header click; most first, then fewest first on a second click).
        _open(frame, "bert_h100", "Kernel efficiency")
        frame.wait_for_selector(".tabulator-row", timeout=60000)
        count = frame.locator(".tabulator-col[tabulator-field='count'] .tabulator-col-title")
        count.click()
        frame.wait_for_function("() => /gi\\.kernels\\.sort=count(&|$)/.test(parent.location.hash)", timeout=30000)
        count.click()
        frame.wait_for_function("() => /gi\\.kernels\\.sort=count\\.asc/.test(parent.location.hash)", timeout=30000)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_selector(".tabulator-col[tabulator-field='count'][aria-sort='ascending']", timeout=60000)
        shown = frame.evaluate("() => [...document.querySelectorAll(\".tabulator-row [tabulator-field='count']\")]"
                               ".map(c => Number(c.textContent.replace(/[^0-9]/g, '')))")
        assert shown and shown == sorted(shown), shown  # the rows came back fewest launches first
        # Trends: the metric.
        frame.locator("nav.tabs button", has_text="Trends").click()
        metric = frame.locator(".trends select").first
        metric.wait_for(timeout=60000)
        other = [v for v in metric.evaluate("s => [...s.options].map(o => o.value)") if v != metric.input_value()][0]
        metric.select_option(other)
        frame = reload_plugin_frame(page, frame)
        frame.wait_for_function("v => document.querySelector('.trends select')?.value === v", arg=other, timeout=60000)
    assert not console, console


def test_a_cpu_devices_memory_chart_lists_only_its_curves(samples_tensorboard):
    """The CPU allocator reports no reserve: its chart has no Reserved or Fragmentation curve or legend entry; the
    GPU's has all three."""
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        _open(frame, "bert_h100", "Memory")
        series = "() => document.querySelector('.memory-chart')?.dataset.series"
        frame.wait_for_function(series, timeout=60000)
        assert "Reserved" in frame.evaluate(series)
        frame.locator("select[aria-label='Memory device']").select_option("cpu")
        frame.wait_for_function(f"() => ({series})() === 'Allocated'", timeout=60000)
    assert not console, console
