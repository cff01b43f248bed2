"""End to end: trace strings that are HTML (kernel, op, run and ET node names) render as text in every tab."""
from __future__ import annotations

import gzip
import json
import os
import shutil

from .browser import SAMPLES, plugin_page

XSS = "<img src=x onerror=alert(1)>"
TABS = ("Kernel efficiency", "Diff", "Tensor shapes", "Execution graph")


def _hostile_logdir(root):
    gpu = root / ("gpu" + XSS)
    gpu.mkdir(parents=True)
    src = os.path.join(SAMPLES, "bert_h100", os.listdir(os.path.join(SAMPLES, "bert_h100"))[0])
    doc = json.loads(gzip.decompress(open(src, "rb").read()))
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cpu_op"):
            e["name"] = e["name"] + XSS
    (gpu / "node.1751410836000000000.pt.trace.json").write_text(json.dumps(doc))
    cpu = root / ("cpu" + XSS)
    shutil.copytree(os.path.join(SAMPLES, "cpu_mlp"), cpu)
    for path in cpu.iterdir():
        if path.name.endswith(".et.json"):
            et = json.loads(path.read_text())
            for node in et["nodes"]:
                node["name"] = node["name"] + XSS
            path.write_text(json.dumps(et))
        elif path.name.endswith(".tensor.trace"):
            path.write_text(path.read_text().replace("  x  ", "  x" + XSS + "  "))
    return root


def test_html_in_trace_strings_renders_as_text_in_every_tab(tmp_path):
    logdir = _hostile_logdir(tmp_path / "logdir")
    console: list = []
    with plugin_page(tmp_path, str(logdir), console=console) as (page, frame):
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        for run in ("gpu" + XSS, "cpu" + XSS):
            frame.wait_for_selector(f"select[aria-label='Run'] option[value='{run}']", state="attached",
                                    timeout=90000)
            frame.locator("select[aria-label='Run']").select_option(run)
            for tab in TABS:
                frame.locator("nav.tabs button", has_text=tab).click()
                frame.wait_for_timeout(2500)
                assert frame.locator("img[src='x']").count() == 0, (run, tab)
            if run.startswith("gpu"):
                frame.locator("nav.tabs button", has_text="Kernel efficiency").click()
                frame.wait_for_function("() => document.querySelectorAll('.tabulator-row').length > 0",
                                        timeout=90000)
                # The table shows a short name (the markup reads as a template argument and is folded away);
                # the raw name, markup included, is its hover text.
                shown = frame.locator(".tabulator-row").first.locator(".cell-name")
                assert XSS in (shown.get_attribute("title") or "")
                frame.locator(".tabulator-row").first.locator(".tabulator-cell[tabulator-field='name']").click()
                frame.wait_for_selector(".drawer", timeout=60000)
                assert XSS in frame.locator(".drawer").inner_text()
        assert XSS in frame.locator("select[aria-label='Run']").inner_text()
        assert frame.locator("img[src='x']").count() == 0 and not dialogs
    assert not [c for c in console if c.rstrip().endswith("/x") or "pageerror" in c], console  # no <img> loaded
