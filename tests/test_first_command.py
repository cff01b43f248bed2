"""README's first command as a user runs it: `tensorboard --logdir samples`, no plugin flag. The plugin loads (its
summary store defaults to the user's cache directory) and serves the samples' runs."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from .browser import SAMPLES, tensorboard


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


def test_tensorboard_without_plugin_flags_serves_the_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # inherited by the TensorBoard process
    with tensorboard(SAMPLES, None) as url:
        _, listing = _get(f"{url}data/plugins_listing")
        assert "gpuinsight" in listing  # the plugin loaded (a failing loader leaves it out)
        deadline, runs = time.monotonic() + 120, []
        while time.monotonic() < deadline:
            code, body = _get(f"{url}data/plugin/gpuinsight/runs")
            runs = [r["run"] for r in (body or {}).get("runs", [])] if code == 200 else []
            if "bert_h100" in runs:
                break
            time.sleep(0.5)
    assert {"bert_h100", "cpu_mlp"} <= set(runs)
