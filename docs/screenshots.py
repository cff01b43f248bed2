"""Regenerate the README's screenshots (docs/img/*.png) from the samples: real TensorBoard, headless Chromium.

    python docs/screenshots.py                    # the samples; the Distributed tab needs a multi-rank run:
    python docs/screenshots.py --ranks ../shared/traces/param/dlrm_8ranks
    python docs/screenshots.py --reduce docs/img/timeline-flows.png   # a browser test's 1280x720 screenshot

Needs the test extras (playwright) and a Chromium (`/usr/bin/chromium`, or $TB_GPUINSIGHT_CHROMIUM); Pillow keeps
each image small (scaled to 960 px wide, 256 colours: about 100 KB).
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.browser import CHROMIUM_ARGS, plugin_frame, tensorboard  # noqa: E402  (the browser tests' own helpers)
OUT = os.path.join(ROOT, "docs", "img")
CHROMIUM = os.environ.get("TB_GPUINSIGHT_CHROMIUM", "/usr/bin/chromium")
WIDTH, HEIGHT, SHOWN_WIDTH = 1280, 720, 960
# (image, run, tab label, what shows the tab is drawn); the Diff compares the two H100 samples
SHOTS = [
    ("overview", "bert_h100", "Overview", ".content canvas"),
    ("kernels", "bert_h100", "Kernel efficiency", ".tabulator-row"),
    ("diff", "vit_h100", "Diff", ".content canvas"),
    ("shapes", "cpu_mlp", "Tensor shapes", ".tabulator-row"),
    ("graph", "cpu_mlp", "Execution graph", ".content canvas"),
    ("memory", "bert_h100", "Memory", ".content canvas"),
    ("timeline", "bert_h100", "Timeline", ".tl-status"),
    ("distributed", "dlrm_8ranks", "Distributed", ".content canvas"),
]


def shoot(page, frame, run: str, tab: str, ready: str, path: str) -> None:
    frame.wait_for_selector("select[aria-label='Run']", timeout=120000)
    frame.locator("select[aria-label='Run']").select_option(run)
    frame.locator("nav.tabs button", has_text=tab).click()
    if tab == "Diff":
        frame.wait_for_selector("select[aria-label='Run B']", timeout=60000)
        frame.locator("select[aria-label='Run B']").select_option("bert_h100")
    frame.wait_for_selector(ready, timeout=180000)
    frame.wait_for_function("() => !document.querySelector('.content .state-loading, .content .state-progress')",
                            timeout=180000)
    page.wait_for_timeout(2500)  # chart animations settle
    save(page.screenshot(), path)


def save(png: bytes, path: str) -> None:
    """Scaled to SHOWN_WIDTH and reduced to 256 colours: small enough to commit."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    _save_reduced(image.resize((SHOWN_WIDTH, round(image.height * SHOWN_WIDTH / image.width)), Image.LANCZOS), path)


def _save_reduced(image, path: str) -> None:
    from PIL import Image

    image.quantize(colors=256, method=Image.MEDIANCUT, dither=Image.NONE).save(path, optimize=True)
    print(f"{os.path.relpath(path, ROOT)}  {os.path.getsize(path) / 1024:.0f} KB")


def reduce_in_place(paths: List[str]) -> None:
    """Screenshots kept at their size (the 1280x720 ones the browser tests take), reduced to 256 colours."""
    from PIL import Image

    for path in paths:
        _save_reduced(Image.open(path).convert("RGB"), path)


def logdir_of(ranks: Optional[str], into: str) -> str:
    """The samples, plus a multi-rank run when given, as links in one folder."""
    logdir = os.path.join(into, "logdir")
    os.makedirs(logdir)
    samples = os.path.join(ROOT, "samples")
    for name in os.listdir(samples):
        if os.path.isdir(os.path.join(samples, name)):
            os.symlink(os.path.join(samples, name), os.path.join(logdir, name))
    if ranks:
        os.symlink(os.path.abspath(ranks), os.path.join(logdir, "dlrm_8ranks"))
    return logdir


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", help="a run of one trace per rank, for the Distributed tab's image")
    parser.add_argument("--only", nargs="*", help="image names to make (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the images that exist (make the missing ones)")
    parser.add_argument("--reduce", nargs="+", metavar="PNG",
                        help="only reduce these screenshots to 256 colours, in place, at their size")
    args = parser.parse_args(argv)
    if args.reduce:
        reduce_in_place(args.reduce)
        return 0
    from playwright.sync_api import sync_playwright

    os.makedirs(OUT, exist_ok=True)
    shots = [s for s in SHOTS if (not args.only or s[0] in args.only) and (args.ranks or s[1] != "dlrm_8ranks")
             and not (args.keep and os.path.exists(os.path.join(OUT, f"{s[0]}.png")))]
    with tempfile.TemporaryDirectory() as tmp, tensorboard(logdir_of(args.ranks, tmp), os.path.join(tmp, "c")) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(url + "#gpuinsight")
            frame = plugin_frame(page)
            for name, run, tab, ready in shots:
                shoot(page, frame, run, tab, ready, os.path.join(OUT, f"{name}.png"))
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
