"""The plugin follows its logdir and never serves stale or damaged data: deleted runs and spans disappear (404),
changed files are analysed again, cached downloads are verified before they are served, and the analysis workers
run only while TensorBoard serves."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap

from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_gpuinsight.plugin import GpuInsightLoader, GpuInsightPlugin
from tb_gpuinsight.service import LogdirService
from tb_gpuinsight.store import verified

from .test_plugin import BASE, BERT, SAMPLES, _get, _wait

CPU = {"run": "cpu_mlp", "worker": "cpu-worker", "span": "cpu-worker.1795250381957840523.pt.trace.json"}
CPU_LATER = dict(CPU, span="cpu-worker.1795250381965892228.pt.trace.json")


def _served(tmp_path, runs=("bert_h100", "cpu_mlp")):
    """A plugin over a temp logdir holding copies of sample runs; scans only when the test says so."""
    root = tmp_path / "logdir"
    for run in runs:
        shutil.copytree(os.path.join(SAMPLES, run), root / run)
    service = LogdirService(str(root), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=3600)
    service.scan()
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(root), flags=None), service=service)
    return Client(application.TensorBoardWSGI([plugin])), service, root


def _run_names(client):
    code, body = _get(client, "runs")
    assert code == 200
    return {r["run"]: r for r in body["runs"]}


def test_deleted_run_and_span_are_dropped_and_answer_404(tmp_path):
    client, service, root = _served(tmp_path)
    assert _get(client, "kernels", **BERT)[0] == 200
    assert _get(client, "kernels", **CPU_LATER)[0] == 200
    service.analysis(CPU["run"], CPU["worker"], "all")  # the combined analysis is held in memory too
    held = [k for k in service._loaded if service.runs["bert_h100"].spans[("h100-node", BERT["span"])].key in k]
    assert held

    shutil.rmtree(root / "bert_h100")
    os.unlink(root / "cpu_mlp" / CPU_LATER["span"])
    for _ in range(2):
        service.scan()

    runs = _run_names(client)
    assert "bert_h100" not in runs
    spans = [s["span"] for w in runs["cpu_mlp"]["workers"] for s in w["spans"]]
    assert spans == [CPU["span"]]
    for route in ("kernels", "overview", "devices"):
        code, body = _get(client, route, **BERT)
        assert code == 404 and "bert_h100" in body["error"]
        code, body = _get(client, route, **CPU_LATER)
        assert code == 404 and "no span" in body["error"]
    assert client.get(f"{BASE}/trace", query_string=BERT).status_code == 404
    assert _get(client, "kernels", **CPU)[0] == 200  # what is still there is still served
    assert not [k for k in service._loaded if any(h in k for h in held)]  # its analyses are released
    assert not any(CPU_LATER["span"] in k or "+" in k for k in service._loaded)


def test_changed_file_is_analysed_again(tmp_path):
    client, service, root = _served(tmp_path, runs=("bert_h100",))
    code, before = _get(client, "kernels", **BERT)
    assert code == 200 and sum(r["count"] for r in before["rows"]) == 61
    path = root / "bert_h100" / BERT["span"]
    doc = json.loads(gzip.decompress(path.read_bytes()))
    first = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    del doc["traceEvents"][first]  # the profiler wrote it again, one kernel fewer
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    old_key = service.runs["bert_h100"].spans[("h100-node", BERT["span"])].key
    service.scan()
    state = service.runs["bert_h100"].spans[("h100-node", BERT["span"])]
    assert state.key != old_key and state.status == "ready"  # workers=0: analysed during the scan
    assert old_key not in service._loaded and old_key not in service._sections
    code, after = _get(client, "kernels", **BERT)
    assert code == 200 and sum(r["count"] for r in after["rows"]) == 60


def test_truncated_download_is_rebuilt_also_after_restart(tmp_path):
    client, service, _ = _served(tmp_path, runs=("bert_h100",))
    first = client.get(f"{BASE}/trace", query_string=BERT)
    assert first.status_code == 200
    good = gzip.decompress(first.get_data())  # (the gzip header's time changes when it is written again)
    (cached,) = [n for n in os.listdir(tmp_path / "cache") if n.endswith(".augmented.json.gz")]
    path = tmp_path / "cache" / cached
    assert os.path.isfile(str(path) + verified.RECORD_SUFFIX)

    with open(path, "r+b") as f:  # cut short, as by a full disk or a crash
        f.truncate(os.path.getsize(path) // 2)
    again = client.get(f"{BASE}/trace", query_string=BERT)
    assert again.status_code == 200 and gzip.decompress(again.get_data()) == good
    json.loads(good)

    data = bytearray(path.read_bytes())  # same size, one byte flipped, then a new server process
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))
    restarted = LogdirService(service.logdir, cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=3600)
    restarted.scan()
    client = Client(application.TensorBoardWSGI([GpuInsightPlugin(
        base_plugin.TBContext(logdir=service.logdir, flags=None), service=restarted)]))
    verified._checked.clear()  # what a fresh process knows
    third = client.get(f"{BASE}/trace", query_string=BERT)
    assert third.status_code == 200 and gzip.decompress(third.get_data()) == good

    os.unlink(str(path) + verified.RECORD_SUFFIX)  # written, but its record never was: not trusted
    assert gzip.decompress(client.get(f"{BASE}/trace", query_string=BERT).get_data()) == good
    assert verified.intact(str(path))


def test_verified_file_records(tmp_path):
    path = str(tmp_path / "f.bin")
    assert not verified.intact(path)
    with open(path, "wb") as f:
        f.write(b"x" * 3_000_000)
    assert not verified.intact(path)  # no record yet
    assert verified.record(path) and verified.intact(path)
    with open(path + verified.RECORD_SUFFIX, "wb") as f:
        f.write(b"\x00garbage")
    assert not verified.intact(path)
    verified.discard(path)
    assert not os.path.exists(path) and not os.path.exists(path + verified.RECORD_SUFFIX)


def test_own_service_analyses_only_once_tensorboard_serves(tmp_path):
    root = tmp_path / "logdir"
    shutil.copytree(os.path.join(SAMPLES, "bert_h100"), root / "bert_h100")
    parser = __import__("argparse").ArgumentParser()
    GpuInsightLoader().define_flags(parser)
    flags = parser.parse_args(["--gpuinsight_cache_dir", str(tmp_path / "cache"), "--gpuinsight_workers", "0",
                               "--gpuinsight_scan_interval", "0.05"])
    plugin = GpuInsightLoader().load(base_plugin.TBContext(logdir=str(root), flags=flags))
    try:
        assert _wait(lambda: plugin.service.runs_json()["runs"], timeout=30)  # discovered...
        status = lambda: plugin.service.runs_json()["runs"][0]["workers"][0]["spans"][0]["status"]  # noqa: E731
        assert not _wait(lambda: status() != "pending", timeout=0.5)  # ...but not analysed
        assert not os.path.exists(tmp_path / "cache") or not os.listdir(tmp_path / "cache")
        assert plugin.is_active()  # TensorBoard's plugin listing: the server answers
        assert _wait(lambda: status() == "ready", timeout=60)
    finally:
        plugin.service.stop()


def test_unbound_tensorboard_leaves_no_analysis_running(tmp_path):
    """TensorBoard builds its plugins, then fails to bind its port: the process exits at once, nothing analysed."""
    root = tmp_path / "logdir"
    shutil.copytree(os.path.join(SAMPLES, "vit_h100"), root / "vit_h100")
    script = textwrap.dedent(f"""
        import json, socket, sys, time
        from tensorboard import default, program
        from tb_gpuinsight.plugin import GpuInsightLoader
        built = []
        class Loader(GpuInsightLoader):
            def load(self, context):
                built.append(super().load(context))
                return built[-1]
        busy = socket.socket(); busy.bind(("127.0.0.1", 0)); busy.listen()
        tb = program.TensorBoard(plugins=default.get_static_plugins() + [Loader()])
        tb.configure(argv=["tensorboard", "--logdir", {str(root)!r}, "--host", "127.0.0.1", "--port",
                           str(busy.getsockname()[1]), "--load_fast=false", "--gpuinsight_workers", "2",
                           "--gpuinsight_cache_dir", {str(tmp_path / "cache")!r},
                           "--gpuinsight_scan_interval", "0.05"])
        code = tb.main()
        service = built[0].service
        while not service.runs:  # discovery goes on: the runs are listed
            time.sleep(0.05)
        time.sleep(0.5)  # several more scans
        spans = [s.status for r in service.runs.values() for s in r.spans.values()]
        print(json.dumps({{"code": code, "spans": spans, "pool": service._pool is not None}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ERROR" in done.stderr  # TensorBoard said it could not bind
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] != 0 and report["spans"] == ["pending"] and not report["pool"]
    cache = tmp_path / "cache"
    assert not cache.exists() or not [n for n in os.listdir(cache) if n.endswith(".npz")]


def test_stop_ends_running_analyses(tmp_path):
    """`stop` (also run at interpreter exit) ends the worker processes: no analysis outlives the server."""
    root = tmp_path / "logdir"
    shutil.copytree(os.path.join(SAMPLES, "vit_h100"), root / "vit_h100")
    service = LogdirService(str(root), cache_dir=str(tmp_path / "cache"), workers=1, scan_interval=3600)
    service.scan()
    pool = service._pool
    processes = list(pool._processes.values())
    assert processes
    service.stop()
    # The pool's own manager thread reaps its processes too: a `join` racing it can return while `is_alive`
    # still reads True, so wait until the reaped exit code is recorded.
    assert _wait(lambda: not any(p.is_alive() for p in processes), timeout=60)
    assert all(p.exitcode is not None for p in processes)
    states = [s for r in service.runs.values() for s in r.spans.values()]
    assert _wait(lambda: all(s.status in ("pending", "ready") for s in states), timeout=30)
    assert not service.store.failure_keys()  # being stopped is no failure of the trace


def _memo_round_trip(path):
    from tb_gpuinsight.estimate.flops import OpEstimate
    from tb_gpuinsight.estimate.memo import EstimateMemo

    memo = EstimateMemo(str(path))
    sig = ("aten::mm", "[[4, 8], [8, 2]]", "['float', 'float']", "")
    memo.put_many({sig: OpEstimate(128.0, "2*M*N*K", 112.0, "inputs + output", "fp32")})
    return EstimateMemo(str(path)).get_many([sig]).get(sig)


def test_garbage_estimates_database_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.delenv("TB_GPUINSIGHT_NO_MEMO", raising=False)
    path = tmp_path / "estimates.sqlite"
    path.write_bytes(os.urandom(64) * 256)  # not a database at all
    (tmp_path / "estimates.sqlite-journal").write_bytes(b"\x00" * 512)
    assert _memo_round_trip(path).flops == 128.0
    import sqlite3
    with sqlite3.connect(str(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    data = bytearray(path.read_bytes())  # a real database whose pages were damaged
    for i in range(100, len(data), 97):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))
    assert _memo_round_trip(path).flops == 128.0
