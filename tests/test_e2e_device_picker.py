"""End to end: the device picker on the MI250 sample, whose trace names only "AMD Radeon Graphics" (matched from its
properties, so ambiguous): pre-selected, applied to every route as device_name (Tensor shapes, Execution graph,
Memory and Timeline included), remembered per run, forgotten."""
from __future__ import annotations

from .browser import plugin_in_browser


def test_device_picker_rates_the_run_as_the_picked_device(tmp_path, samples_tensorboard):
    console: list = []
    with plugin_in_browser(samples_tensorboard, console) as (page, frame):
        page.set_viewport_size({"width": 1280, "height": 720})
        frame.wait_for_selector("select[aria-label='Run'] option[value='minitoy_mi250']", state="attached",
                                timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("minitoy_mi250")
        picker = frame.locator(".device-picker")
        picker.wait_for(timeout=60000)
        assert "does not name its GPU clearly" in picker.inner_text()
        assert "gfx90a" in picker.inner_text()
        select = frame.locator("select.device-select")
        assert select.input_value() == "AMD Instinct MI250 (one GCD)"  # what its properties matched
        page.screenshot(path=str(tmp_path / "device_picker_1280.png"))

        with page.expect_request(lambda r: "device_name=AMD+Instinct+MI300X" in r.url, timeout=60000):
            select.select_option("AMD Instinct MI300X")
            picker.locator("button:has-text('Use this device')").click()
        frame.wait_for_selector(".device-picker:has-text('Rated as AMD Instinct MI300X')", timeout=60000)
        stored = frame.evaluate("() => localStorage.getItem('gpuinsight.deviceOverride.minitoy_mi250')")
        assert stored == "AMD Instinct MI300X"
        # Every tab that rates against a device asks with the picked one.
        for tab, route in (("Tensor shapes", "/op_shapes?"), ("Execution graph", "/graph/view?"),
                           ("Memory", "/memory?"), ("Timeline", "/timeline/view?")):
            with page.expect_request(lambda r: route in r.url and "device_name=AMD+Instinct+MI300X" in r.url,
                                     timeout=60000):
                frame.locator("nav.tabs button", has_text=tab).click()
        frame.locator("nav.tabs button", has_text="Overview").click()

        frame.locator("select[aria-label='Run']").select_option("bert_h100")  # names its GPU: no picker
        frame.wait_for_function("() => !document.querySelector('.device-picker')", timeout=60000)
        frame.locator("select[aria-label='Run']").select_option("minitoy_mi250")  # the pick is remembered
        frame.wait_for_selector(".device-picker:has-text('Rated as AMD Instinct MI300X')", timeout=60000)
        frame.locator(".device-picker button:has-text('Forget')").click()
        frame.wait_for_selector(".device-picker:has-text('does not name its GPU')", timeout=60000)
        assert frame.evaluate("() => localStorage.getItem('gpuinsight.deviceOverride.minitoy_mi250')") is None

        # A kept pick the datasheet no longer has (the server answers 400 for it) is dropped, not sent forever.
        frame.evaluate("() => localStorage.setItem('gpuinsight.deviceOverride.bert_h100', 'Gone GPU 9000')")
        frame.locator("select[aria-label='Run']").select_option("bert_h100")
        frame.wait_for_function(
            "() => localStorage.getItem('gpuinsight.deviceOverride.bert_h100') === null", timeout=60000)
        frame.wait_for_function("() => !document.querySelector('.device-picker')", timeout=60000)
    # Only the stale pick's first request may have been refused.
    assert all("device_name=Gone+GPU+9000" in line for line in console), console
