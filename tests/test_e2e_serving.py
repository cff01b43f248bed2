"""End to end: real TensorBoard, headless Chromium, the Overview of a serving trace (the synthetic SGLang extend +
decode steps of test_serving_steps.py): the decode step is a step of phase decode, batch 32, in the step table."""
from __future__ import annotations

from .browser import plugin_page
from .test_serving_steps import sglang_trace


def test_a_decode_step_in_the_overview(tmp_path):
    run = tmp_path / "logdir" / "sglang"
    run.mkdir(parents=True)
    sglang_trace(run)
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='sglang']", state="attached", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("sglang")
        frame.wait_for_selector(".ov-table tbody tr", timeout=60000)
        head = frame.locator(".ov-table thead").inner_text()
        assert "Phase" in head and "Batch" in head and "Tokens" in head
        rows = frame.locator(".ov-table tbody tr")
        assert rows.count() == 2
        decode = rows.nth(1).inner_text()
        assert "decode" in decode and "32" in decode and "step 1 decode bs=32" in decode
        assert "extend" in rows.nth(0).inner_text() and "15,360" in rows.nth(0).inner_text()
        page.screenshot(path=str(tmp_path / "overview_serving.png"), full_page=True)
    assert not [m for m in console if m.startswith("error")], console


def test_the_distributed_tab_lists_family_collectives_with_their_size_or_reason(tmp_path):
    """Two ranks of a vLLM run on B200s: a symmetric-memory all-reduce sized from its op's [888, 2880] bf16 tensor,
    rated on the link, and a DeepEP dispatch whose op records no tensor, listed with the reason (the synthetic
    traces of test_family_collectives.py)."""
    from .test_family_collectives import KERNELS, _trace

    run = tmp_path / "logdir" / "vllm_ep"
    run.mkdir(parents=True)
    for rank in range(2):
        _trace(run / f"rank{rank}.1700000000000.pt.trace.json", rank, KERNELS)
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='vllm_ep']", state="attached", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("vllm_ep")
        frame.locator("nav.tabs button", has_text="Distributed").click()
        frame.wait_for_selector(".ranks-collectives tbody tr", timeout=120000)
        assert "collective instances matched" in frame.locator(".ranks-summary").inner_text()
        rows = [frame.locator(".ranks-collectives tbody tr").nth(i).inner_text()
                for i in range(frame.locator(".ranks-collectives tbody tr").count())]
        reduce = next(r for r in rows if "all_reduce" in r)
        dispatch = next(r for r in rows if "all_to_all" in r)
        assert "custom collectives" in reduce and "MB" in reduce and "%" in reduce  # 5.1 MB, % of the link
        assert "DeepEP" in dispatch and "no tensor recorded" in dispatch
        page.screenshot(path=str(tmp_path / "distributed_family.png"), full_page=True)
    assert not [m for m in console if m.startswith("error")], console
