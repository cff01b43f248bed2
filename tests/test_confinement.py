"""The logdir's bounds and the caches' keys: symbolic links out of the logdir are not followed (N4), a trace
replaced by another of the same name, size and mtime is analysed again (N5), a cached download damaged in place is
not served (N8), and a cache that cannot be written is said without its path (N7)."""
from __future__ import annotations

import copy
import gzip
import json
import os
import shutil

import pytest

from tb_gpuinsight import logdir as logdir_mod
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store.jobs import span_job

from .test_plugin import BASE, _get, _ready, _wait
from .test_reader_errors import rocm_mm_trace
from .test_terminal_output import _run

NAME = "w.1700000000000000000.pt.trace.json"


@pytest.fixture(autouse=True)
def _default_confinement(monkeypatch):
    """The default: links out of the logdir are not followed (the suite's other tests follow them). The process's
    setting (the CLI's --follow-symlinks) goes back to "as the environment says" after each test, so a later test
    file in this worker follows the suite's links again."""
    monkeypatch.delenv(logdir_mod.FOLLOW_SYMLINKS_ENV, raising=False)
    logdir_mod.set_follow_symlinks(None)
    yield
    logdir_mod.set_follow_symlinks(None)


def _mm_text(kernel: str) -> str:
    doc = copy.deepcopy(rocm_mm_trace(1))
    doc["baseTimeNanoseconds"] = 1700000000000000000
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = kernel
    return json.dumps(doc)


def _linked_logdir(tmp_path):
    """logdir/inside (a run), logdir/out -> a folder outside, logdir/files/ holding a link to a trace outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / NAME).write_text(_mm_text("secret_kernel"))
    root = tmp_path / "logdir"
    (root / "inside").mkdir(parents=True)
    (root / "inside" / NAME).write_text(_mm_text("gemm_kernel"))
    os.symlink(outside, root / "out")
    (root / "files").mkdir()
    os.symlink(outside / NAME, root / "files" / NAME)
    os.symlink(root / "inside", root / "alias")  # a link that stays inside is followed (its folder seen once)
    return root


def test_discovery_skips_links_out_of_the_logdir_unless_asked(tmp_path):
    root = _linked_logdir(tmp_path)
    assert [r.name for r in logdir_mod.discover(root)] in (["alias"], ["inside"])  # one folder, seen once
    followed = sorted(r.name for r in logdir_mod.discover(root, follow_symlinks=True))
    assert "out" in followed and "files" in followed
    code, out, _ = _run(["ls", str(root)])
    assert code == 0 and "out" not in out.split() and "files" not in out.split()
    code, out, _ = _run(["ls", str(root), "--follow-symlinks"])
    assert code == 0 and "run out" in out and "run files" in out


def _plugin(root, cache, **kwargs):
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin

    service = LogdirService(str(root), cache_dir=str(cache), workers=0, scan_interval=0.1, **kwargs)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(root), flags=None), service=service)
    return Client(application.TensorBoardWSGI([plugin])), service


def test_the_plugin_lists_and_serves_nothing_outside_the_logdir(tmp_path):
    root = _linked_logdir(tmp_path)
    client, service = _plugin(root, tmp_path / "cache")
    try:
        assert _wait(lambda: _ready(service, "inside") or _ready(service, "alias"), timeout=120)
        runs = [r["run"] for r in service.runs_json()["runs"]]
        assert "out" not in runs and "files" not in runs
        for run in ("out", "files"):
            response = client.get(f"{BASE}/trace", query_string={"run": run, "worker": "w", "span": NAME})
            assert response.status_code in (400, 404), response.status_code
            code, body = _get(client, "kernels", run=run, worker="w", span=NAME)
            assert code in (400, 404) and "secret_kernel" not in json.dumps(body)
    finally:
        service.stop()


def _same_size_same_mtime(path, text):
    """Write `text` (as long as the file's content) over `path`, with the old mtime put back."""
    st = os.stat(path)
    assert len(text.encode()) == st.st_size
    os.unlink(path)  # a run deleted and written again: a new inode too
    with open(path, "w") as f:
        f.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _forget_digests():
    try:
        from tb_gpuinsight.trace import digest
    except ImportError:  # an engine without content digests: nothing to forget
        return
    digest._memo.clear()


def test_a_same_name_size_and_mtime_replacement_is_analysed_again(tmp_path):
    root = tmp_path / "logdir" / "run"
    root.mkdir(parents=True)
    trace = root / NAME
    trace.write_text(_mm_text("kernel_AAAA"))

    def kernels():
        client, service = _plugin(root.parent, tmp_path / "cache")
        try:
            assert _wait(lambda: _ready(service, "run"), timeout=120)
            code, body = _get(client, "kernels", run="run", worker="w", span=NAME)
            assert code == 200, body
            return {r["name"] for r in body["rows"]}
        finally:
            service.stop()

    assert "kernel_AAAA" in kernels()
    _same_size_same_mtime(trace, _mm_text("kernel_BBBB"))
    _forget_digests()  # a new process: nothing remembered but the store on disk
    assert "kernel_BBBB" in kernels()  # after a restart, the cached summary of the old file is not served


def test_job_keys_follow_content_not_stat(tmp_path):
    trace = tmp_path / NAME
    trace.write_text(_mm_text("kernel_AAAA"))

    def key():
        run = logdir_mod.discover(tmp_path)[0]
        return span_job(str(tmp_path), run, run.spans()[0]).key

    first = key()
    assert key() == first  # nothing changed: the same key
    _same_size_same_mtime(trace, _mm_text("kernel_BBBB"))
    assert key() != first


def test_a_cached_download_damaged_in_place_is_written_again(tmp_path):
    root = tmp_path / "logdir" / "run"
    root.mkdir(parents=True)
    (root / NAME).write_text(_mm_text("kernel_AAAA"))
    client, service = _plugin(root.parent, tmp_path / "cache")
    try:
        assert _wait(lambda: _ready(service, "run"), timeout=120)
        query = {"run": "run", "worker": "w", "span": NAME}
        first = client.get(f"{BASE}/trace", query_string=query)
        assert first.status_code == 200
        good = first.get_data()
        assert client.get(f"{BASE}/trace", query_string=query).get_data() == good  # checked, and remembered
        cached = next(p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".augmented.json.gz"))
        st = os.stat(cached)
        with open(cached, "r+b") as f:  # damaged in place, size and mtime kept
            f.seek(st.st_size // 2)
            f.write(b"\0" * 16)
        os.utime(cached, ns=(st.st_atime_ns, st.st_mtime_ns))
        second = client.get(f"{BASE}/trace", query_string=query)
        # Written again: the same trace (its gzip header's time may differ by the second it was written in).
        assert second.status_code == 200 and gzip.decompress(second.get_data()) == gzip.decompress(good)
        json.loads(gzip.decompress(second.get_data()))
    finally:
        service.stop()


def test_a_cache_that_cannot_be_written_is_said_without_its_path(tmp_path, monkeypatch):
    from tb_gpuinsight.analysis.kernels import augment

    root = tmp_path / "logdir" / "run"
    root.mkdir(parents=True)
    (root / NAME).write_text(_mm_text("kernel_AAAA"))
    cache = tmp_path / "cache"
    client, service = _plugin(root.parent, cache)
    try:
        assert _wait(lambda: _ready(service, "run"), timeout=120)

        def read_only(*args, dir=None, **kwargs):  # the cache directory made read-only (root ignores chmod)
            raise PermissionError(13, "Permission denied", os.path.join(str(dir), ".tb-gpuinsight-x.tmp"))

        monkeypatch.setattr(augment.tempfile, "mkstemp", read_only)
        response = client.get(f"{BASE}/trace", query_string={"run": "run", "worker": "w", "span": NAME})
        body = response.get_data(as_text=True)
        assert response.status_code == 422 and "Permission denied" in body
        assert str(tmp_path) not in body and "/cache" not in body
    finally:
        service.stop()
