"""End to end: real TensorBoard over samples/, headless Chromium. The Timeline draws a span; wheel zoom narrows the
view; zoomed to one kernel, a click on it opens the kernel drawer; "Show on timeline" from a kernel row lands on that
kernel, and so does "on timeline" next to a kernel link of an Overview recommendation; "Open in Perfetto" speaks
Perfetto's PING/PONG protocol (against a stand-in window) and says when offline."""
from __future__ import annotations

import pytest

from .browser import plugin_in_browser, plugin_page

CANVAS = "() => document.querySelector('.tl-canvas')?.timeline"


def _open_timeline(frame, run: str = "bert_h100") -> None:
    frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
    frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text="Timeline").click()
    _wait_drawn(frame)


def _wait_drawn(frame) -> None:
    frame.wait_for_function("() => /items · query/.test(document.querySelector('.tl-status')?.textContent || '')",
                            timeout=60000)


def _viewport(frame):
    return frame.evaluate(f"() => ({CANVAS})().viewport")


def test_timeline_zoom_click_and_show_on_timeline(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        _open_timeline(frame)
        lanes = frame.evaluate(f"() => ({CANVAS})().lanes.map(l => l.label)")
        assert lanes[0].startswith("GPU 0") and any(label.startswith("thread") for label in lanes)
        draw_ms = float(frame.evaluate("() => document.querySelector('.tl-canvas').dataset.drawMs"))
        assert draw_ms >= 0
        # Wheel over the plot zooms in around the pointer.
        t0, t1 = _viewport(frame)
        box = frame.locator(".tl-canvas").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 60)
        page.mouse.wheel(0, -400)
        frame.wait_for_function(f"() => {{ const v = ({CANVAS})().viewport; return v[1] - v[0] < {(t1 - t0) * 0.9}; }}")
        _wait_drawn(frame)
        # Find the longest kernel: the view lands on it (one kernel wide); close its drawer, then click it.
        name = frame.evaluate("""async () => {
            const q = new URLSearchParams({run: 'bert_h100', worker: 'h100-node', span: 'all', device: '0',
                                           sort: 'max_us', order: 'desc', limit: '1'});
            return (await (await fetch('./kernels?' + q)).json()).rows[0].name; }""")
        frame.locator("input[aria-label='Find on timeline']").fill(name)
        frame.locator("input[aria-label='Find on timeline']").press("Enter")
        frame.wait_for_function("n => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === n",
                                arg=name, timeout=60000)
        frame.locator(".drawer:not([hidden]) button[aria-label='Close details']").click()
        _wait_drawn(frame)
        hit = frame.evaluate(f"""() => {{ const tl = ({CANVAS})();
            for (const lane of tl.data.lanes) for (let i = 0; i < lane.events.index.length; i++)
              if (tl.names[lane.events.name[i]] === {name!r})
                return tl.pointOf(lane.id, lane.events.start[i], lane.events.dur[i]);
            return null; }}""")
        assert hit, "the kernel is not drawn as an event once zoomed to it"
        v0, v1 = _viewport(frame)
        box = frame.locator(".tl-canvas").bounding_box()  # the notice above it has grown since
        page.mouse.click(box["x"] + hit["x"], box["y"] + hit["y"])
        frame.wait_for_function("n => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === n",
                                arg=name, timeout=60000)
        details = frame.locator(".drawer:not([hidden])").inner_text().lower()
        assert "launching ops" in details and "this launch" in details and "flops" in details
        assert v1 - v0 < 1000  # zoomed to about one kernel (the span is 4.5 ms)
        page.screenshot(path=str(tmp_path / "timeline.png"), full_page=True)

        # "Show on timeline" from a kernel row of the Kernel efficiency tab.
        frame.locator("nav.tabs button", has_text="Kernel efficiency").click()
        frame.wait_for_selector(".tabulator-row", timeout=60000)
        frame.locator(".tabulator-row").nth(1).click()
        frame.wait_for_selector(".drawer:not([hidden]) .show-on-timeline", timeout=60000)
        row_name = frame.locator(".drawer:not([hidden]) .kernel-name").inner_text()
        frame.locator(".drawer:not([hidden]) .show-on-timeline").click()
        frame.wait_for_function("n => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === n"
                                " && document.querySelector('nav.tabs button.active')?.textContent === 'Timeline'",
                                arg=row_name, timeout=60000)
        assert "highlighted" in frame.locator(".tl-found").inner_text()
        found = frame.evaluate(f"() => ({CANVAS})().highlight.length")
        assert found >= 1
        v0, v1 = _viewport(frame)
        occ = frame.evaluate(f"() => ({CANVAS})().highlight")
        assert any(v0 <= o["start"] and o["end"] <= v1 for o in occ)

        # "on timeline" next to a kernel link of an Overview recommendation: every launch highlighted, one shown.
        frame.locator("nav.tabs button", has_text="Overview").click()
        link = frame.locator(".ov-rec-links .ov-link-pair").first
        link.wait_for(timeout=60000)
        link_name = link.locator(".ov-link").get_attribute("title")
        assert link_name != row_name  # lands somewhere new
        link.locator(".show-on-timeline").click()
        frame.wait_for_function("n => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === n"
                                " && document.querySelector('nav.tabs button.active')?.textContent === 'Timeline'",
                                arg=link_name, timeout=60000)
        _wait_drawn(frame)
        count = frame.evaluate("() => fetch('./timeline/find?' + new URLSearchParams({run: 'bert_h100', "
                               "worker: 'h100-node', span: 'all', name: %r})).then(r => r.json()).then(j => j.count)"
                               % link_name)
        assert count >= 1 and frame.evaluate(f"() => ({CANVAS})().highlight.length") == count
        assert f"{count} occurrence" in frame.locator(".tl-found").inner_text()
        v0, v1 = _viewport(frame)
        occ = frame.evaluate(f"() => ({CANVAS})().highlight")
        assert any(v0 <= o["start"] and o["end"] <= v1 for o in occ)
    assert not console, console


PERFETTO_STANDIN = """() => {
  // A same-origin window that answers PING with PONG, as ui.perfetto.dev does, and keeps what it was sent.
  const frame = document.createElement('iframe');
  document.body.appendChild(frame);
  const win = frame.contentWindow;
  window.__sent = [];
  win.postMessage = (msg, origin) => {
    window.__sent.push({msg, origin});
    if (msg === 'PING') win.eval("parent.postMessage('PONG', '*')");
  };
  window.open = () => win;
}"""


def test_open_in_perfetto_protocol_and_offline(samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        _open_timeline(frame)
        frame.evaluate(PERFETTO_STANDIN)
        frame.locator("button.tl-perfetto").click()
        frame.wait_for_function("() => /Sent to Perfetto/.test(document.querySelector('.tl-perfetto-status').textContent)",
                                timeout=60000)
        sent = frame.evaluate("""() => window.__sent.map(s => typeof s.msg === 'string' ? {ping: s.msg, origin: s.origin}
            : {origin: s.origin, title: s.msg.perfetto.title, bytes: s.msg.perfetto.buffer.byteLength,
               gzip: new Uint8Array(s.msg.perfetto.buffer.slice(0, 2)).join(',')})""")
        assert sent[0] == {"ping": "PING", "origin": "https://ui.perfetto.dev"}
        last = sent[-1]
        assert last["origin"] == "https://ui.perfetto.dev" and last["title"].startswith("bert_h100 / ")
        assert last["bytes"] > 1000 and last["gzip"] == "31,139"  # the augmented trace, gzip
        page.context.set_offline(True)
        frame.locator("button.tl-perfetto").click()
        frame.wait_for_function("() => /needs internet/.test(document.querySelector('.tl-perfetto-status').textContent)",
                                timeout=60000)
        page.context.set_offline(False)
    assert not console, console


def test_find_and_show_on_timeline_with_long_rocm_names(tmp_path):
    """On an MI300X vLLM trace: Find takes a lower-case part of a mangled CK name and steps through the matches of
    both CK kernels that share it; "Show on timeline" from the Kernel efficiency tab lands on an 822-character
    kernel name (a parameter takes at most 500 characters: the row's key is sent instead)."""
    import os

    from .corpus import corpus_path

    logdir = tmp_path / "logdir"
    (logdir / "vllm").mkdir(parents=True)
    os.symlink(corpus_path("tracelens/vllm_decode_full__graph_execution.json.gz"),
               logdir / "vllm" / "mi300x.pt.trace.json.gz")
    console: list = []
    with plugin_page(tmp_path, str(logdir), console=console) as (page, frame):
        _open_timeline(frame, "vllm")
        # Lanes are sized to what they hold: GPU streams (kernels, names inside) taller than CPU op lanes.
        heights = frame.evaluate(f"() => {{ const tl = ({CANVAS})();"
                                 " return tl.lanes.map((l, i) => [l.kind, tl.tops[i + 1] - tl.tops[i]]); }")
        gpu = {h for kind, h in heights if kind == "gpu"}
        cpu = {h for kind, h in heights if kind == "cpu"}
        assert gpu and cpu and min(gpu) > max(cpu), heights
        find = frame.locator("input[aria-label='Find on timeline']")
        find.fill("rmsnorm2dfwd")
        find.press("Enter")
        frame.wait_for_selector(".tl-found .tl-found-pos", timeout=60000)
        bar = frame.locator(".tl-found").inner_text()
        assert "2 names matching" in bar, bar
        total = int(frame.locator(".tl-found-pos").inner_text().split("/")[1].replace(",", ""))
        names = frame.locator("select[aria-label='Names found'] option").all_inner_texts()
        assert len(names) == 3 and all("Rmsnorm2dFwd" in n for n in names[1:])
        first = frame.locator(".tl-found-pos").inner_text()
        frame.locator(".tl-found .tl-next").click()
        frame.wait_for_function("p => document.querySelector('.tl-found-pos')?.textContent !== p", arg=first)
        frame.wait_for_function("() => /Rmsnorm2dFwd/.test(document.querySelector('.drawer:not([hidden]) "
                                ".kernel-name')?.textContent || '')", timeout=60000)
        assert frame.evaluate(f"() => ({CANVAS})().highlight.length") == total
        # Narrow to one of the two names, then the longest name of the trace from the kernel table.
        frame.locator("select[aria-label='Names found']").select_option(index=1)
        frame.wait_for_function("() => /1 \\/|of “ck_tile::Rmsnorm2dFwd”/.test(document.querySelector('.tl-found')"
                                "?.textContent || '')", timeout=60000)
        frame.locator("nav.tabs button", has_text="Kernel efficiency").click()
        frame.locator("input[aria-label='Filter kernel names']").fill("direct_copy_kernel_cuda")
        frame.wait_for_function("() => { const rows = document.querySelectorAll('.tabulator-row');"
                                " return rows.length === 1 && /direct_copy/.test(rows[0].textContent); }",
                                timeout=60000)
        frame.locator(".tabulator-row").first.click()
        frame.wait_for_selector(".drawer:not([hidden]) .show-on-timeline", timeout=60000)
        name = frame.locator(".drawer:not([hidden]) .kernel-name").inner_text()
        assert len(name) > 800
        frame.locator(".drawer:not([hidden]) .show-on-timeline").click()
        frame.wait_for_function("n => document.querySelector('.drawer:not([hidden]) .kernel-name')?.textContent === n"
                                " && document.querySelector('nav.tabs button.active')?.textContent === 'Timeline'",
                                arg=name, timeout=60000)
        assert "highlighted" in frame.locator(".tl-found").inner_text()
        assert not frame.locator(".tl-notice .error, .tl-notice [role=alert]").count()
        # The whole name as the kernel table's filter (an Overview link sends it so): the row, not an error.
        frame.locator("nav.tabs button", has_text="Kernel efficiency").click()
        rows = "() => document.querySelectorAll('.tabulator-row').length"
        frame.locator("input[aria-label='Filter kernel names']").fill("")
        frame.wait_for_function(f"() => ({rows})() > 1", timeout=60000)
        frame.locator("input[aria-label='Filter kernel names']").fill(name)
        frame.wait_for_function(f"() => ({rows})() === 1", timeout=60000)
        assert not frame.locator(".content [role=alert]").count()
    assert not console, console


TAB_LABELS = ("Overview", "Kernel efficiency", "Diff", "Tensor shapes", "Execution graph", "Memory", "Timeline",
              "Distributed")


def _active_tab(frame) -> str:
    frame.wait_for_selector("nav.tabs button.active", timeout=60000)
    return frame.locator("nav.tabs button.active").inner_text()


def _zoom_in(page, frame):
    """Zoom the drawn Timeline in one wheel notch; the viewport once drawn."""
    _wait_drawn(frame)
    frame.locator(".tl-canvas").hover()
    page.mouse.wheel(0, -400)
    frame.wait_for_timeout(500)
    _wait_drawn(frame)
    return _viewport(frame)


def test_every_tab_survives_a_reload_of_the_frame_and_of_the_page(samples_tensorboard):
    """Reloading the plugin's frame, or TensorBoard's page, lands on the same tab of the same run (the Timeline on
    the same viewport), never on a "Not Found" page."""
    from .browser import plugin_frame, reload_plugin_frame

    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        for label in TAB_LABELS:
            frame.locator("nav.tabs button", has_text=label).click()
            assert _active_tab(frame) == label
            if label == "Timeline":
                before = _zoom_in(page, frame)
            frame = reload_plugin_frame(page, frame)
            assert "Not Found" not in frame.locator("body").inner_text()[:200]
            assert _active_tab(frame) == label, label
            # the run list arrives after the tab is drawn: wait for it rather than read an empty select
            frame.wait_for_function("() => document.querySelector(\"select[aria-label='Run']\")?.value === 'bert_h100'",
                                    timeout=60000)
            if label == "Timeline":
                _wait_drawn(frame)
                assert _viewport(frame) == pytest.approx(before, abs=0.01)
        page.reload()
        frame = plugin_frame(page)
        assert _active_tab(frame) == "Distributed"
        frame.locator("nav.tabs button", has_text="Timeline").click()
        before = _zoom_in(page, frame)
        page.reload()
        frame = plugin_frame(page)
        assert _active_tab(frame) == "Timeline"
        _wait_drawn(frame)
        assert _viewport(frame) == pytest.approx(before, abs=0.01)
    assert not console, console
