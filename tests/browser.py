"""Helpers for end-to-end tests: a real `tensorboard` process and headless Debian Chromium via playwright."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, List, Optional

import pytest

CHROMIUM = os.environ.get("TB_GPUINSIGHT_CHROMIUM", "/usr/bin/chromium")
LOADED_MACHINE_WAIT_MS = 120_000
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def need_browser() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@contextmanager
def tensorboard(logdir: str, cache_dir: Optional[str], *extra: str) -> Iterator[str]:
    """Start real TensorBoard on a free port; yields its base URL; drains its output so it never blocks.
    `cache_dir` None: no cache flag, as a user starts it (the summaries go to the user's cache directory)."""
    exe = shutil.which("tensorboard") or os.path.join(os.path.dirname(sys.executable), "tensorboard")
    cache = ["--gpuinsight_cache_dir", cache_dir] if cache_dir is not None else []
    proc = subprocess.Popen([exe, "--logdir", logdir, "--host", "127.0.0.1", "--port", "0", "--load_fast=false",
                             *cache, "--gpuinsight_scan_interval", "1", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: List[str] = []
    found = threading.Event()

    def drain() -> None:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"http://127\.0\.0\.1:\d+/", line):
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not found.wait(90):
            raise RuntimeError("TensorBoard did not start:\n" + "".join(lines[-40:]))
        url = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", "".join(lines)).group(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def browser_page(console: List[str]):
    """A fresh headless Chromium page; console errors and page errors are collected into `console`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            # A loaded machine (the suite beside other work) draws slowly: a wait with no timeout of its own gets a
            # generous one (it returns as soon as its condition holds, so a fast machine loses nothing)
            page.set_default_timeout(LOADED_MACHINE_WAIT_MS)
            # Failed requests are judged by URL below ("Failed to load resource" console lines carry none):
            # TensorBoard's own font files 404 under --path_prefix, which is not this plugin's doing.
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
                    if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.on("response", lambda r: console.append(f"HTTP {r.status}: {r.url}")
                    if r.status >= 400 and "/font-roboto/" not in r.url else None)
            yield page
        finally:
            browser.close()


SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


@contextmanager
def plugin_page(tmp_path, logdir: str = SAMPLES, *tensorboard_args: str, console: Optional[List[str]] = None):
    """Real TensorBoard over `logdir`, Chromium on its GPU Insight tab: yields (page, plugin frame). Console errors
    and failed requests are collected into `console` (pass a list and assert it is empty afterwards)."""
    need_browser()
    with tensorboard(logdir, str(tmp_path / "cache"), *tensorboard_args) as url, \
            plugin_in_browser(url, console) as (page, frame):
        yield page, frame


@contextmanager
def plugin_in_browser(url: str, console: Optional[List[str]] = None):
    """A fresh Chromium on the GPU Insight tab of the TensorBoard at `url` (one a module's tests share): yields
    (page, plugin frame); console errors and failed requests are collected into `console`."""
    need_browser()
    console = console if console is not None else []
    with browser_page(console) as page:
        page.goto(url + "#gpuinsight")
        yield page, plugin_frame(page)


def plugin_frame(page, timeout: float = 60.0):
    """The plugin's iframe inside TensorBoard's page."""
    end = time.time() + timeout
    while time.time() < end:
        for frame in page.frames:
            if "plugin_entry.html?name=gpuinsight" in frame.url:
                return frame
        page.wait_for_timeout(100)
    raise AssertionError("the gpuinsight plugin iframe never appeared")


def reload_plugin_frame(page, frame, timeout: float = 60.0):
    """Reload the plugin's iframe and return it once the new document is there.

    `location.reload()` returns before the navigation starts, so a wait right after it can match the old document,
    which the navigation then destroys: mark the old document and wait until the frame's document lacks the mark."""
    frame.evaluate("() => { window.__giBeforeReload = true; location.reload(); }")
    end = time.time() + timeout
    while time.time() < end:
        current = plugin_frame(page, timeout=max(1.0, end - time.time()))
        try:
            if current.evaluate("() => window.__giBeforeReload !== true && document.readyState === 'complete'"):
                return current
        except Exception:  # the old document went away in the middle of the check: look again
            pass
        page.wait_for_timeout(100)
    raise AssertionError("the plugin iframe did not reload")
