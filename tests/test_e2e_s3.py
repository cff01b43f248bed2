"""End to end: real TensorBoard pointed at an s3:// logdir (moto's S3 server on 127.0.0.1) with an s3:// summary
store filled by `summarize`: routes over HTTP, a trace download fetched from S3 on demand, and headless Chromium on
the Distributed tab showing the same per-rank view as the local copy does."""
from __future__ import annotations

import json
import os
import urllib.request
from unittest import mock

from tb_gpuinsight.store.batch import summarize

from .browser import browser_page, need_browser, plugin_frame, tensorboard
from .corpus import corpus_path
from .s3server import s3_server, upload


def _get(url: str):
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, response.headers, response.read()


def test_tensorboard_on_s3_logdir_and_store(tmp_path):
    need_browser()
    dlrm = corpus_path("param/dlrm_8ranks")
    with s3_server() as s3:
        upload(s3["endpoint"], "logs", str(dlrm), "exp/dlrm")
        assert summarize("s3://logs/exp", "s3://logs/store", workers=0).done == 8
        console: list = []
        with mock.patch.dict(os.environ, s3["env"]), \
                tensorboard("s3://logs/exp", str(tmp_path / "cache"), "--gpuinsight_store", "s3://logs/store",
                            "--gpuinsight_workers", "1") as url, browser_page(console) as page:
            base = url + "data/plugin/gpuinsight/"
            runs = json.loads(_get(base + "runs")[2])
            assert runs["remote_traces"] is True
            # ready at the first scan: served from the store's summaries
            assert [r["status"] for r in runs["runs"]] == ["ready"], runs
            assert "s3://" not in json.dumps(runs)  # file names relative to the logdir, as for a local one
            ranks = json.loads(_get(base + "ranks?run=dlrm&span=all")[2])
            assert len(ranks["ranks"]) == 8
            span = runs["runs"][0]["workers"][0]["spans"][0]["span"]
            status, headers, body = _get(base + f"trace?run=dlrm&worker=worker0_step_12&span={span}")
            assert status == 200 and body[:2] == b"\x1f\x8b" and int(headers["Content-Length"]) == len(body)

            page.goto(url + "#gpuinsight")
            frame = plugin_frame(page)
            frame.wait_for_selector("select[aria-label='Run']", timeout=60000)
            frame.get_by_role("tab", name="Distributed").click()
            frame.wait_for_function("() => document.querySelectorAll('.ranks-per-rank tbody tr').length === 8",
                                    timeout=120000)
            straggler = frame.locator(".ranks-straggler").inner_text()
            assert "Straggler: rank 7" in straggler and "arrived last at 5 of 8" in straggler, straggler
            assert "all_reduce" in frame.locator(".ranks-collectives").inner_text()
            # the download menu says what a download of a trace in object storage fetches first
            link = frame.locator(".menu-list li a").first.text_content()
            assert "kB from object storage first" in link, link
            page.screenshot(path=str(tmp_path / "distributed_s3.png"), full_page=True)
        assert not console, console
