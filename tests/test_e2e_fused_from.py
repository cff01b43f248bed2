"""End to end: real TensorBoard, headless Chromium, the Kernel efficiency table of a torch.compile trace (the corpus's
MI300X Triton trace): Inductor kernels are classed by what they do, and the ops fused into them show in their own
"Fused from" column (hidden until a page holds such a kernel)."""
from __future__ import annotations

import shutil

from .browser import plugin_page
from .corpus import corpus_path


def test_fused_from_column_shows_the_ops_inductor_fused(tmp_path):
    run = tmp_path / "logdir" / "compiled"
    run.mkdir(parents=True)
    shutil.copy(corpus_path("tracelens/torch_compile_triton__trace.json.gz"), run / "host.1.pt.trace.json.gz")
    console: list = []
    with plugin_page(tmp_path, str(tmp_path / "logdir"), console=console) as (page, frame):
        frame.wait_for_selector("select[aria-label='Run'] option[value='compiled']", state="attached", timeout=60000)
        frame.get_by_role("tab", name="Kernel efficiency").click()
        frame.wait_for_selector(".tabulator-col[tabulator-field='fused_from']", state="visible", timeout=60000)
        cell = frame.locator(".tabulator-row", has_text="mean_mul_pow_rsqrt").first
        text = cell.inner_text()
        assert "unsafe_view_add_mean_mul_pow_rsqrt" in text or "add_mean_mul_pow_rsqrt" in text
        assert "GEMM" not in text  # a reduction fused after matmuls is not a GEMM
    assert not [m for m in console if m.startswith("error")], console
