"""The plugin under failure: dead analysis processes, a crashing scanner, corrupt or swapped cache summaries,
oversized and special files, and every failure answered as JSON."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time

import numpy as np
import pytest

from tb_gpuinsight import service as service_mod
from tb_gpuinsight.service import follow as follow_mod
from tb_gpuinsight.service import LogdirService

from .test_plugin import BERT, _ready, _wait, logdir  # noqa: F401  (fixture)


def _client(logdir, tmp_path):
    """The plugin over `logdir` (analysis in-process), once the sample runs are ready (patient: CI may be busy)."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin

    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    assert _wait(lambda: all(_ready(service, r) for r in ("bert_h100", "vit_h100")), timeout=300)
    return Client(application.TensorBoardWSGI([plugin])), plugin


def _status(service, run):
    return next((r for r in service.runs_json()["runs"] if r["run"] == run), None)


def _running_pid(service, key):
    """The process id of the worker analysing the span with this cache key, from its marker."""
    folder = service._marker_dir
    for name in os.listdir(folder) if folder and os.path.isdir(folder) else []:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                if f.read() == key:
                    return int(name)
        except OSError:
            continue
    return None


def stalling_summarize(path, *args):
    """A worker job whose analysis of bert never ends (so the test can kill its process); others run normally."""
    if os.sep + "bert_h100" + os.sep in path:
        time.sleep(600)
    return service_mod.summarize_file(path, *args)


def test_dead_worker_marks_only_its_span_and_the_pool_recovers(logdir, tmp_path):
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=2, scan_interval=0.2,
                            summarize=stalling_summarize)
    service.start()
    try:
        assert _wait(lambda: service.runs, timeout=30)
        bert = service.span_states(BERT["run"], BERT["worker"], BERT["span"])[0]
        for _ in range(service_mod.MAX_WORKER_DEATHS):  # as the OOM killer would, twice
            assert _wait(lambda: _running_pid(service, bert.key) is not None, timeout=120)
            os.kill(_running_pid(service, bert.key), signal.SIGKILL)
            assert _wait(lambda: bert.status != "loading" or _running_pid(service, bert.key) is None, 60)
        assert _wait(lambda: _status(service, "bert_h100")["status"] == "error", timeout=60)
        reason = _status(service, "bert_h100")["errors"][0]["reason"]
        assert "analysis process died, likely out of memory" in reason and "MB" in reason
        assert _wait(lambda: _ready(service, "vit_h100") and _ready(service, "minitoy_mi250"), timeout=180)
        shutil.copytree(logdir / "vit_h100", logdir / "vit_later")  # a run added after the crash still loads
        assert _wait(lambda: _ready(service, "vit_later"), timeout=180)
        assert service.span_states(BERT["run"], BERT["worker"], BERT["span"])[0].status == "error"
    finally:
        service.stop()


def test_scanner_survives_an_exception(logdir, tmp_path, monkeypatch):
    calls = []
    real = follow_mod.discover

    def flaky(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(follow_mod, "discover", flaky)  # the scan looks it up there
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.05)
    service.start()
    try:
        assert _wait(lambda: _ready(service, "bert_h100"), timeout=60)
        assert service._thread.is_alive() and len(calls) > 1
    finally:
        service.stop()


def test_every_failure_is_json_with_the_right_status(logdir, tmp_path, monkeypatch):
    from tb_gpuinsight.routes import kernels

    from .test_plugin import BASE, _get

    client, plugin = _client(logdir, tmp_path)
    assert _wait(lambda: _status(plugin.service, "broken_run")["status"] == "error")
    broken = {"run": "broken_run", "worker": "w", "span": "w.1700000000000000000.pt.trace.json"}
    for route in ("devices", "kernels", "trace"):
        response = client.get(f"{BASE}/{route}", query_string=broken)
        body = response.get_json()
        assert response.status_code == 422 and "ends early" in body["error"], route
    for method in ("post", "put", "delete"):
        response = getattr(client, method)(f"{BASE}/kernels", query_string=BERT)
        assert response.status_code == 405 and response.get_json()["error"].startswith("method not allowed")
        assert "GET" in response.headers["Allow"]
    monkeypatch.setattr(kernels, "devices", lambda eff: 1 / 0)  # a bug in a handler
    plugin2 = type(plugin)(_context(logdir), service=plugin.service)
    client2 = _wsgi(plugin2)
    code, body = _get(client2, "devices", **BERT)
    assert code == 500 and body["error"].startswith("internal error") and "ZeroDivision" not in body["error"]
    span = plugin.service.span_states(BERT["run"], BERT["worker"], BERT["span"])[0]
    span.status = "loading"
    plugin.service.generation += 1
    response = client.get(f"{BASE}/kernels", query_string=BERT)
    assert response.status_code == 503 and response.headers["Retry-After"].isdigit()
    assert "loading" in response.get_json()["error"]


def _context(logdir):
    from tensorboard.plugins import base_plugin

    return base_plugin.TBContext(logdir=str(logdir), flags=None)


def _wsgi(plugin):
    from tensorboard.backend import application
    from werkzeug.test import Client

    return Client(application.TensorBoardWSGI([plugin]))


def _summary_file(service, span):
    return os.path.join(service.store.directory, span.key)


def test_corrupt_and_swapped_summaries_are_recomputed(logdir, tmp_path):
    from .test_plugin import _get

    client, plugin = _client(logdir, tmp_path)
    service = plugin.service
    bert = service.span_states(BERT["run"], BERT["worker"], BERT["span"])[0]
    vit = service.span_states("vit_h100", "h100-node", "all")[0]
    code, good = _get(client, "kernels", **BERT, limit=5)
    assert code == 200
    # a flipped byte: fails its checksum
    fresh = _restart(logdir, tmp_path)
    with open(_summary_file(fresh, bert), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert _eventually_same(fresh, good)
    # another trace's (valid) summary under bert's name: its identity does not match
    fresh = _restart(logdir, tmp_path)
    shutil.copyfile(_summary_file(fresh, vit), _summary_file(fresh, bert))
    assert _eventually_same(fresh, good)
    assert not any(n.startswith(".tmp") for n in os.listdir(fresh.store.directory))


def _restart(logdir, tmp_path):
    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=60)
    service.scan()
    assert _ready(service, "bert_h100")  # the summary exists: ready without reading the trace
    return service


def _eventually_same(service, good):
    """The damaged summary is refused (503, never another trace's rows), then recomputed to the same answer."""
    from tb_gpuinsight.routes.kernels import kernels
    from tb_gpuinsight.service import NotReady
    from werkzeug.test import EnvironBuilder

    request = EnvironBuilder(query_string={"limit": 5}).get_request()
    with pytest.raises(NotReady, match="analysed again"):
        service.analysis(BERT["run"], BERT["worker"], BERT["span"])
    service.scan()  # workers=0: analyses inline
    body = kernels(service.analysis(BERT["run"], BERT["worker"], BERT["span"]), request)
    return [r["name"] for r in body["rows"]] == [r["name"] for r in good["rows"]] and body["total"] == good["total"]


def _bomb(path, megabytes):
    """A valid (multi-member) gzip trace of mostly empty events: about 2 KB per inflated MB (not blanks: a block
    of blank padding is refused on sight, before any cap)."""
    import gzip

    filler = gzip.compress(b"{}," * ((1 << 20) // 3), 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(b'{"traceEvents": ['))
        for _ in range(megabytes):
            f.write(filler)
        f.write(gzip.compress(b"{}]}"))


def test_gzip_bomb_stops_at_the_cap_with_a_one_line_reason(tmp_path, monkeypatch):
    import resource

    from tb_gpuinsight import TraceError, load
    from tb_gpuinsight.cli import main
    from tb_gpuinsight.trace import source

    monkeypatch.setattr(source, "_override_gb", None)  # the command's --max-trace-gb must not outlive this test

    bomb = tmp_path / "w.1.pt.trace.json.gz"
    _bomb(bomb, 512)  # 512 MiB inflated
    assert bomb.stat().st_size < 1 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # A 10 MB cap: 50 times under the bomb (the reading up to the cap is the slow part of this test).
    with pytest.raises(TraceError, match=r"inflates past 0.01 GB; raise the cap to analyse it \(--max-trace-gb, "):
        load(bomb, max_trace_gb=0.01)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, grown_mb  # stopped at the cap, not after inflating the bomb
    assert main(["analyze", str(bomb), "--max-trace-gb", "0.01"]) == 2
    small = tmp_path / "w.2.pt.trace.json.gz"
    _bomb(small, 2)  # under the cap: read whole (its empty events hold no kernel)
    assert len(load(small, max_trace_gb=0.01).kernels) == 0


def test_special_files_are_refused_without_blocking(tmp_path):
    from tb_gpuinsight import TraceError, load
    from tb_gpuinsight.trace.et import load_et
    from tb_gpuinsight.trace.tensortrace import read_tensor_trace

    fifo = tmp_path / "w.1.pt.trace.json"
    os.mkfifo(fifo)
    zero = tmp_path / "w.2.pt.trace.json"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        kind = "FIFO" if path == fifo else "device"
        for reader in (load, load_et, read_tensor_trace):
            with pytest.raises(TraceError, match=f"not a regular file \\(a {kind}\\)"):
                reader(path)


def test_corrupt_gzip_is_named_as_such(tmp_path):
    from tb_gpuinsight import TraceError, load
    from tb_gpuinsight.logdir import sniff

    bad = tmp_path / "w.1.pt.trace.json.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not deflate data" * 10)
    assert "corrupt gzip data" in sniff(bad).reason
    with pytest.raises(TraceError, match="corrupt gzip data"):
        load(bad)


def test_augment_writes_only_regular_files_or_new_paths(tmp_path):
    import stat

    from tb_gpuinsight import GpuInsightError, augment
    from tb_gpuinsight.cli import main

    from .test_plugin import SAMPLES

    src = os.path.join(SAMPLES, "bert_h100", BERT["span"])
    null_link = tmp_path / "null.json"
    null_link.symlink_to("/dev/null")
    targets = [null_link, tmp_path, tmp_path / "missing_dir" / "x.json"]
    if os.geteuid() == 0:  # a device node of our own, as root
        node = tmp_path / "node.json"
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        targets.append(node)
    for dst in targets:
        with pytest.raises(GpuInsightError):
            augment(src, dst)
        assert main(["augment", src, str(dst)]) == 2
    assert main(["augment", src, ""]) == 2
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    old = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh.json.gz"
        assert augment(src, fresh) > 0
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o640
    finally:
        os.umask(old)
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    augment(src, link)
    assert link.is_symlink() and real.read_text().startswith("{")  # written through the link, link kept
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tb-gpuinsight")) == []


def _bert_events():
    import gzip
    import json

    from .test_plugin import SAMPLES

    return json.loads(gzip.decompress(open(os.path.join(SAMPLES, "bert_h100", BERT["span"]), "rb").read()))


def _first(events, cat):
    return next(e for e in events["traceEvents"] if e.get("cat") == cat)


def _write(tmp_path, doc, raw_replace=()):
    import json

    text = json.dumps(doc, ensure_ascii=False)
    for old, new in raw_replace:
        text = text.replace(old, new, 1)
    path = tmp_path / "w.1700000000000000000.pt.trace.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    return path


@pytest.mark.parametrize("case", ["big_ids", "inf_flop_and_dur", "deep", "bad_utf8", "far_future"])
def test_malformed_kineto_content_is_repaired_or_refused_in_one_line(tmp_path, case):
    from tb_gpuinsight import GpuInsightError, analyze, load
    from tb_gpuinsight.analysis.kernels.augment import write_augmented
    from tb_gpuinsight.cli import main

    doc = _bert_events()
    kernel, op = _first(doc, "kernel"), _first(doc, "cpu_op")
    raw = []
    if case == "big_ids":
        kernel["args"].update({"device": 2 ** 40, "stream": 2 ** 70, "correlation": -(2 ** 64)})
        op["args"]["External id"] = 10 ** 30
    elif case == "inf_flop_and_dur":
        op["args"]["kernel_flop"] = "@INF@"
        kernel["dur"] = "@INF@"
        raw = [('"@INF@"', "1e999"), ('"@INF@"', "-1e999")]
    elif case == "deep":
        op["args"]["Input Dims"] = "@DEEP@"
        raw = [('"@DEEP@"', "[" * 1500 + "]" * 1500)]
    elif case == "bad_utf8":
        kernel["name"] = "kern\udcff<img src=x onerror=alert(1)>"
    elif case == "far_future":
        for e in doc["traceEvents"]:
            if "ts" in e:
                e["ts"] = 9.3e18
    path = _write(tmp_path, doc, raw)
    try:
        eff = analyze(load(path))
    except GpuInsightError as exc:
        assert "\n" not in str(exc)
        return
    assert eff.summary() is not None
    write_augmented(path, tmp_path / "out.json", eff)
    assert main(["info", str(path)]) == 0
    if case == "big_ids":
        assert load(path).meta.malformed_args >= 3  # counted, not silently kept
    if case == "inf_flop_and_dur":
        assert not np.isinf(load(path).kernels["dur"]).any()


def test_malformed_et_and_tensor_trace_are_repaired(tmp_path):
    import glob
    import json

    from tb_gpuinsight import load
    from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace
    from tb_gpuinsight.analysis.graph.build import build_graph
    from tb_gpuinsight.trace.et import load_et
    from tb_gpuinsight.trace.tensortrace import read_tensor_trace

    from .test_plugin import SAMPLES

    et_doc = json.load(open(glob.glob(os.path.join(SAMPLES, "cpu_mlp", "*.et.json"))[0]))
    et_doc["nodes"][3]["id"] = 2 ** 70
    et_doc["nodes"][4]["name"] = "op\udcff"
    et_path = tmp_path / "w.et.json"
    et_path.write_bytes(json.dumps(et_doc, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    et = load_et(et_path)
    assert et.dropped_nodes == 1 and "\ufffd" in "".join(et.names)
    untimed = _write(tmp_path, {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1}]})
    trace = load(untimed)
    graph = build_graph(et, trace, analyze_trace(trace))  # an ET linked to a trace without timed ops
    assert len(graph.units)
    tt = tmp_path / "w.tensor.trace"
    tt.write_text("[call]  1  torch.Size([99999999999999999999, 2])  8  0x10  x  f  a.py:1\n"
                  "[call]  " + "9" * 5000 + "  torch.Size([2])  8  0x10  x  f  a.py:1\n"
                  "[ret]  5\x0b\u00a0  torch.Size([2])  8  0x10  x  f  a.py:99999999999999999999999\n"
                  "[ret]  5  torch.Size([2])  8  0x10  x  f  a.py:7\n")
    parsed = read_tensor_trace(tt)
    assert len(parsed) == 2 and parsed.error_count == 2
    assert parsed.table["line"].tolist() == [-1, 7]


def test_nan_durations_answer_json(logdir, tmp_path):
    from .test_plugin import _get

    doc = _bert_events()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = "@NAN@"
    run = logdir / "nan_run"
    run.mkdir()
    _write(run, doc, [('"@NAN@"', "1e999")] * 3)
    client, plugin = _client(logdir, tmp_path)
    assert _wait(lambda: _ready(plugin.service, "nan_run"))
    span = plugin.service.span_states("nan_run", "w", "all")[0].span
    for route, query in (("devices", {"run": "nan_run", "worker": "w", "span": span}),
                         ("diff", {"a_run": "nan_run", "a_worker": "w", "b_run": "bert_h100", "b_worker": "h100-node"})):
        code, body = _get(client, route, **query)
        assert code in (200, 422), (route, body)


def test_trace_download_is_written_once_and_served_from_the_cache(logdir, tmp_path):
    import gzip
    import json

    from .test_plugin import BASE

    client, plugin = _client(logdir, tmp_path)
    first = client.get(f"{BASE}/trace", query_string=BERT)
    assert first.status_code == 200 and int(first.headers["Content-Length"]) == len(first.get_data())
    cached = [p for p in os.listdir(tmp_path / "cache") if p.endswith(".augmented.json.gz")]
    assert len(cached) == 1
    stamp = os.stat(tmp_path / "cache" / cached[0]).st_mtime_ns
    second = client.get(f"{BASE}/trace", query_string=BERT)
    assert second.get_data() == first.get_data()
    assert os.stat(tmp_path / "cache" / cached[0]).st_mtime_ns == stamp  # served, not written again
    assert any("kernel_flop" in e.get("args", {}) for e in json.loads(gzip.decompress(second.get_data()))["traceEvents"])


def test_long_kernel_names_by_key_and_paths_relative_to_the_logdir(logdir, tmp_path):
    import glob

    from .test_plugin import _get

    doc = _bert_events()
    long_name = "void cutlass::Kernel<" + "T" * 20000 + ">"
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = long_name
    run = logdir / "long_run"
    run.mkdir()
    _write(run, doc)
    et = glob.glob(str(logdir / "cpu_mlp" / "*.et.json"))[0]
    with open(et, "r+b") as f:  # a broken ET: its error names the file
        f.truncate(100_000)
    client, plugin = _client(logdir, tmp_path)
    assert _wait(lambda: _ready(plugin.service, "long_run"))
    sel = {"run": "long_run", "worker": "w", "span": "all"}
    code, body = _get(client, "kernels", **sel)
    row = next(r for r in body["rows"] if r["name"] == long_name)
    code, ops = _get(client, "kernel_ops", **sel, name_key=row["name_key"])
    assert code == 200 and ops["name"] == long_name and ops["ops"]
    assert _get(client, "kernel_ops", **sel, name_key="../x")[0] == 400
    span = os.path.basename(et).replace(".et.json", ".pt.trace.json")
    code, err = _get(client, "graph/view", run="cpu_mlp", worker="cpu-worker", span=span)
    assert code in (400, 422) and str(logdir) not in err["error"] and "cpu_mlp" in err["error"], err


def test_graph_focus_on_a_deep_chain_and_huge_device_names(tmp_path):
    import json

    import tb_gpuinsight.analysis.graph.view as gv
    from tb_gpuinsight.analysis.graph.build import build_graph
    from tb_gpuinsight.estimate.devices import MAX_NAME, match_device
    from tb_gpuinsight.trace.et import load_et

    depth = 3000
    nodes = [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "parent": 1}]
    nodes += [{"id": i, "name": f"## range{i} ##", "parent": i - 1} for i in range(2, depth + 2)]
    path = tmp_path / "deep.et.json"
    path.write_text(json.dumps({"schema": "1.0.1", "pid": 1, "nodes": nodes}))
    graph = build_graph(load_et(path))
    tree = gv.build_tree(graph)
    deepest = depth  # the last row
    expanded = set(gv.ancestors(tree, deepest)) | {deepest}
    out = gv.view_json(tree, graph, gv.figures(tree, graph), expanded)
    depths = [e["depth"] for e in out["expanded"]]
    assert depths == list(range(len(depths))) and len(depths) >= depth - 1
    match = match_device({"name": "NVIDIA H100 80GB HBM3" + " x" * 5_000_000, "totalGlobalMem": 85e9})
    assert len(match.trace_name) <= MAX_NAME


# ------------------------------------------------------------------------------------------------------------------
# Numbers outside sane ranges are dropped at read time (with their reason); every command answers in one line.

def _mm_trace(tmp_path, name="w.1700000000000000000.pt.trace.json", edit=None, raw=()):
    """The ROCm aten::mm trace of test_reader_errors, with `edit(doc)` applied and `raw` text replacements."""
    import copy
    import json

    from .test_reader_errors import rocm_mm_trace

    doc = copy.deepcopy(rocm_mm_trace(1))
    doc["baseTimeNanoseconds"] = 1700000000000000000
    if edit:
        edit(doc)
    text = json.dumps(doc)
    for old, new in raw:
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


_HUGE = "1" + "0" * 400
_READ_TIME_CASES = {  # case -> (edit, raw replacements, the dropped field's reason in `info`)
    "numSms": (None, [('"numSms": 304', f'"numSms": {_HUGE}')], "deviceProperties numSms: outside"),
    "totalGlobalMem": (None, [('"totalGlobalMem": 205822885888', f'"totalGlobalMem": {_HUGE}')],
                       "deviceProperties totalGlobalMem: outside"),
    "computeMajor": (None, [('"computeMajor": 9', f'"computeMajor": {_HUGE}')], "deviceProperties computeMajor"),
    "numSms1e999": (None, [('"numSms": 304', '"numSms": 1e999')], "deviceProperties numSms: outside"),
    "warpSize5000digits": (None, [('"warpSize": 64', '"warpSize": 1' + "0" * 5000)],
                           "deviceProperties warpSize: outside"),
    "baseTime": (None, [("1700000000000000000", _HUGE)], "baseTimeNanoseconds: outside"),
    "dur1e308": (None, [('"dur": 20', '"dur": 1e308'), ('"dur": 50', '"dur": 1e308')], "kernels dur: not finite"),
    "dur1e400": (None, [('"dur": 20', '"dur": 1e400')], "event 'dur': number out of range"),
    "rank": (lambda d: d.update(distributedInfo={"rank": 2 ** 70, "world_size": 2, "backend": "nccl"}), (),
             "distributedInfo rank: outside"),
}
_COMMANDS = (["info"], ["analyze"], ["augment", "{out}/a.json"], ["diff", "{ref}"], ["shapes"], ["overview"],
             ["memory"], ["timeline"], ["critical-path"])


def _run(argv):
    """Exit status and stderr lines of one CLI run in this process (an exception escaping main fails the test)."""
    import contextlib
    import io

    from tb_gpuinsight.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue().strip().splitlines()


@pytest.mark.parametrize("case", sorted(_READ_TIME_CASES))
def test_insane_numbers_are_dropped_at_read_time_and_every_command_answers(tmp_path, case):
    """The reproducers of the reliability probe: a 401-digit numSms / totalGlobalMem / computeMajor /
    baseTimeNanoseconds, durations of 1e308 and 1e400, a rank of 2**70. Each is dropped once at read time with
    its reason (shown by `info`); every command exits 0 (or 2 with one line); the mm keeps its FLOPs."""
    import tb_gpuinsight

    edit, raw, reason = _READ_TIME_CASES[case]
    run = tmp_path / "run"
    run.mkdir()
    path = _mm_trace(run, edit=edit, raw=raw)
    ref = _mm_trace(tmp_path, name="ref.pt.trace.json")
    trace = tb_gpuinsight.load(path)
    assert any(k.startswith(reason) for k in trace.meta.dropped_fields), trace.meta.dropped_fields
    assert trace.meta.base_time_ns is None or trace.meta.base_time_ns == 1700000000000000000
    assert all(abs(float(x)) < 1e12 for x in trace.kernels["dur"])
    for d in trace.devices:
        assert all(abs(v) < 2 ** 53 for v in d.values() if isinstance(v, (int, float)))
    assert float(tb_gpuinsight.analyze(trace).by_name()["flops"][0]) == 2 * 128 * 256 * 64
    code, out, _ = _run(["info", str(path)])
    assert code == 0 and reason in out
    for argv in _COMMANDS:
        full = [argv[0], str(path)] + [a.format(out=tmp_path, ref=ref) for a in argv[1:]]
        code, _, err = _run(full)
        assert code == 0 or code == 2 and len(err) == 1, (full, code, err)
    store = tmp_path / "store"
    assert _run(["summarize", str(run), "--store", str(store), "--workers", "0"])[0] == 0
    code, _, err = _run(["export-parquet", str(store), str(tmp_path / "parquet")])
    assert code == 0 or code == 2 and len(err) == 1, err


def test_events_that_are_no_objects_do_not_crash_critical_path(tmp_path):
    path = tmp_path / "w.1700000000000000000.pt.trace.json"
    path.write_text('{"traceEvents":[1,2,3]}')
    for argv in (["critical-path", str(path)], ["critical-path", str(path), "--json"], ["critical-path", str(tmp_path)],
                 ["timeline", str(path)], ["overview", str(path)]):
        code, _, err = _run(argv)
        assert code == 0 or code == 2 and len(err) == 1, (argv, code, err)


def test_file_names_with_invalid_utf8_are_carried_everywhere(tmp_path):
    """A file name with byte 0xff (a lone surrogate in Python): text, JSON and Parquet output all work; JSON and the
    terminal get an escape, Parquet U+FFFD."""
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'tb_gpuinsight[parquet]')")
    import io
    import json

    run = tmp_path / "run"
    run.mkdir()
    path = _mm_trace(run, name="w\udcff.1700000000000000000.pt.trace.json")
    for argv in (["info", str(path)], ["critical-path", str(path)], ["critical-path", str(run), "--json"],
                 ["analyze", str(path), "--format", "csv"], ["overview", str(path)], ["ls", str(run)]):
        code, _, err = _run(argv)
        assert code == 0, (argv, err)
    code, out, _ = _run(["critical-path", str(path), "--json"])
    assert code == 0 and json.loads(out)
    store = tmp_path / "store"
    assert _run(["summarize", str(run), "--store", str(store), "--workers", "0"])[0] == 0
    assert _run(["export-parquet", str(store), str(tmp_path / "parquet")])[0] == 0
    pd = pytest.importorskip("pandas")
    kernels = pd.read_parquet(tmp_path / "parquet" / "kernels.parquet")
    assert kernels["worker"].tolist() == ["w\ufffd"]
    # A terminal that encodes strictly: the name is escaped, not a UnicodeEncodeError.
    import sys

    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved = sys.stdout
    sys.stdout = strict
    try:
        from tb_gpuinsight.cli import main

        assert main(["info", str(path)]) == 0
        strict.flush()
    finally:
        sys.stdout = saved
    assert b"w\\udcff." in strict.buffer.getvalue()


def test_routes_answer_insane_values_and_odd_selections_without_500(logdir, tmp_path):
    """The HTTP 500s of the reliability probe: /diff and /ranks_compare on 1e308 and 1e400 durations; /op_shapes,
    /tensors and /shape_distribution on a 401-digit baseTimeNanoseconds; /kernels for "all workers" of a one-worker
    run; /ranks for a cycle the run does not have (404, not 503 "retry later")."""
    from .test_plugin import _get

    doc = _bert_events()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[::2]:
        e["dur"] = 1e308
    kernels[1]["dur"] = "@INF@"
    doc["baseTimeNanoseconds"] = "@HUGE@"
    run = logdir / "insane_run"
    run.mkdir()
    _write(run, doc, [('"@INF@"', "1e400"), ('"@HUGE@"', _HUGE)])
    client, plugin = _client(logdir, tmp_path)
    assert _wait(lambda: _ready(plugin.service, "insane_run"), timeout=300)
    span = plugin.service.span_states("insane_run", "w", "all")[0].span
    sel = {"run": "insane_run", "worker": "w", "span": span}
    op = "aten::mm"
    for route, query in (("diff", {"a_run": "insane_run", "a_worker": "w", "b_run": "bert_h100",
                                   "b_worker": "h100-node"}),
                         ("diff", {"a_run": "bert_h100", "a_worker": "h100-node", "b_run": "insane_run",
                                   "b_worker": "w", "by": "op"}),
                         ("ranks_compare", {"run": "insane_run", "rank": "0"}),
                         ("op_shapes", sel), ("tensors", sel), ("shape_distribution", {**sel, "op": op}),
                         ("kernels", {**sel, "worker": "*", "span": "all"}),
                         ("kernels", {"run": "bert_h100", "worker": "*", "span": "all"})):
        code, body = _get(client, route, **query)
        assert code in (200, 404, 422), (route, query, code, body)
    assert _get(client, "kernels", run="bert_h100", worker="*", span="all")[0] == 200
    code, body = _get(client, "ranks", run="bert_h100", cycle="5")
    assert code == 404 and "cycle 5" in body["error"], body


def test_et_node_with_a_bad_value_keeps_its_other_fields(tmp_path):
    """As in Kineto traces: an ET node's rf_id written as a string is read as the number, a list where an int
    belongs is dropped (counted), a node that is no object is skipped; every other node is as before."""
    import glob
    import json

    from tb_gpuinsight.trace.et import load_et

    from .test_plugin import SAMPLES

    src = glob.glob(os.path.join(SAMPLES, "cpu_mlp", "*.et.json"))[0]
    doc = json.load(open(src))
    base = load_et(src)
    node = doc["nodes"][3]
    node["rf_id"] = str(node.get("rf_id", 17))
    doc["nodes"][4]["tid"] = [1]
    doc["nodes"][5] = 7
    path = tmp_path / "w.et.json"
    path.write_text(json.dumps(doc))
    et = load_et(path)
    assert len(et) == len(base) - 1 and et.dropped_nodes == 1
    assert et.coerced_fields == {"node 'rf_id': string read as number": 1}
    assert et.dropped_fields == {"node 'tid': array where int | null was expected": 1}
    for row, node_id in enumerate(et.ids.tolist()):
        mine, theirs = et.node(row), base.node(base.row_of[node_id])
        if node_id != doc["nodes"][4]["id"]:
            assert mine == theirs
    code, out, _ = _run(["info", str(path)])
    assert code == 0 and "node 'tid'" in out


@pytest.mark.parametrize("arg, value", [("Input type", 2 ** 64 + 5), ("Input Dims", "x"), ("Concrete Inputs", 7),
                                        ("Input Dims", [[1, [2]], None]), ("Input type", {"a": 1})])
def test_raw_args_of_any_json_type_answer_every_command(tmp_path, arg, value):
    """Shapes, types and concrete inputs stay raw JSON until used: a value of the wrong JSON type reaches the shapes
    table, the estimates and the overview as it is, and each answers (the fuzz found `shapes` failing on an int)."""
    def edit(doc):
        doc["traceEvents"][0]["args"][arg] = value

    path = _mm_trace(tmp_path, edit=edit)
    for argv in (["shapes", str(path)], ["shapes", str(path), "--format", "json"], ["analyze", str(path)],
                 ["overview", str(path)], ["critical-path", str(path)]):
        code, _, err = _run(argv)
        assert code == 0, (argv, err)


@contextlib.contextmanager
def _served(logdir, tmp_path):
    """A WSGI client of the plugin over `logdir` once every span found is analysed (in-process, one scan)."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin

    from .test_fuzz import _settle

    service = LogdirService(str(logdir), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=3600)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    try:
        service.serve()
        service.scan()
        _settle(service)
        yield Client(application.TensorBoardWSGI([plugin]))
    finally:
        service.stop()


def _settled_files(logdir, files):
    """{(run, name): bytes} written under `logdir`, dated an hour ago (a parse failure is final)."""
    for (run, name), data in files.items():
        (logdir / run).mkdir(parents=True, exist_ok=True)
        (logdir / run / name).write_bytes(data)
        os.utime(logdir / run / name, (time.time() - 3600,) * 2)


def test_ranks_compare_without_step_times_and_shapes_of_a_failed_span(tmp_path):
    """Found by the route fuzz once it let the spans be analysed: /ranks_compare of a run where no rank has a step
    time (a kernel-only trace whose duration was dropped) answered 500, not 404; /op_shapes and /tensors of a span
    whose analysis failed answered 503 "retry later" for a failure that is final, not 422."""
    from .test_plugin import _get

    kernel_only = (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, '
                   b'"dur": 1e308, "args": {"device": 0}}]}')  # its one duration dropped: no step at all
    logdir = tmp_path / "logdir"
    _settled_files(logdir, {("nosteps", "w.1700000000000000000.pt.trace.json"): kernel_only,
                            ("broken", "w.1700000000000000000.pt.trace.json"): b'{"traceEvents": [{"ph": "X"},]}'})
    with _served(logdir, tmp_path) as client:
        code, body = _get(client, "ranks_compare", run="nosteps", rank="0")
        assert code == 404 and "median" in body["error"], (code, body)
        for route in ("op_shapes", "tensors"):
            code, body = _get(client, route, run="broken", worker="w", span="all")
            assert code == 422 and "invalid JSON" in body["error"], (route, code, body)


def test_runs_and_workers_named_with_invalid_utf8_are_reachable_from_a_browser(tmp_path):
    """A run folder and a trace file whose names hold byte 0xff: /runs lists them (JSON escapes), and a browser,
    whose URLSearchParams sends U+FFFD for such a character, still reaches them (it got 404 before)."""
    from .test_plugin import _get

    logdir = tmp_path / "logdir"
    _settled_files(logdir, {("run\udcff", "w\udcff.1700000000000000000.pt.trace.json"):
                            _mm_trace(tmp_path).read_bytes()})
    with _served(logdir, tmp_path) as client:
        code, body = _get(client, "runs")
        assert code == 200 and [r["run"] for r in body["runs"]] == ["run\udcff"], body
        worker = body["runs"][0]["workers"][0]["worker"]
        assert worker == "w\udcff"
        sel = {"run": "run\ufffd", "worker": "w\ufffd"}
        for route in ("kernels", "overview", "op_shapes", "ranks"):
            code, body = _get(client, route, **sel, span="all")
            assert code == 200, (route, code, body)
        code, body = _get(client, "kernels", run="run\ufffd", worker="w\ufffd", span="all")
        assert body["rows"] and body["rows"][0]["flops"] == 2 * 128 * 256 * 64, body["rows"][:1]


def test_one_bad_summary_never_fails_the_whole_parquet_export(tmp_path):
    """A store holding a summary with a rank of 2**70 (written before ranks were checked at read time) and one
    whose collectives lack their arrays: the export writes every other trace, the rank as unknown, and names the
    skipped one with why."""
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'tb_gpuinsight[parquet]')")
    from tb_gpuinsight.store.envelope import load_summary, to_bytes
    from tb_gpuinsight.store.summaries import open_store

    from .fuzz_cli import run_cli

    run = tmp_path / "run"
    run.mkdir()
    for worker in ("a", "b", "c"):
        _mm_trace(run, name=f"{worker}.1700000000000000000.pt.trace.json")
    store = tmp_path / "store"
    assert run_cli(["summarize", str(run), "--store", str(store), "--workers", "0"])[0] == "exit 0"
    source = open_store(str(store))
    for key, data in source.summaries():
        summary = load_summary(data)
        worker = summary.identity["path"].rsplit("/", 1)[-1][0]
        if worker == "a":
            summary.sections["distributed"].info["distributed"] = {"rank": 2 ** 70, "world_size": 3}
        elif worker == "b":
            summary.sections["distributed"].arrays.clear()
        else:
            continue
        assert source.put(key, to_bytes(summary.eff, summary.meta, summary.sections, summary.identity))
    code, out, err = _run(["export-parquet", str(store), str(tmp_path / "parquet")])
    assert code == 0, err
    assert "2 trace(s)" in out and "skipped   b.1700000000000000000.pt.trace.json: KeyError" in out, out
    pd = pytest.importorskip("pandas")
    kernels = pd.read_parquet(tmp_path / "parquet" / "kernels.parquet")
    assert sorted(kernels["worker"].unique()) == ["a", "c"]
    assert kernels.loc[kernels["worker"] == "a", "rank"].isna().all()


def test_stopping_a_service_ends_its_scanner_thread(tmp_path):
    """stop() waits for the scanner: no thread keeps rescanning a logdir its service no longer serves."""
    import threading

    from tb_gpuinsight.service import LogdirService

    service = LogdirService(str(tmp_path), cache_dir=str(tmp_path / "cache"), workers=0, scan_interval=0.05)
    service.start()
    scanner = service._thread
    assert scanner is not None and scanner.is_alive()
    service.stop()
    assert not scanner.is_alive()
    assert scanner not in threading.enumerate()


def test_concurrent_first_requests_load_a_summary_once(tmp_path):
    """Requests that arrive together for a span just analysed (every open tab asks at once) wait for one thread
    to read and rate its summary instead of each doing that work: the store is read once, all get the same answer."""
    import json
    import threading

    from .test_reader_errors import rocm_mm_trace

    run = tmp_path / "logdir" / "run"
    run.mkdir(parents=True)
    (run / "w.1700000000000000000.pt.trace.json").write_text(json.dumps(rocm_mm_trace(1)))
    service = LogdirService(str(tmp_path / "logdir"), cache_dir=str(tmp_path / "cache"), workers=0,
                            scan_interval=3600)
    service.scan()  # workers=0: analysed during the scan
    assert _ready(service, "run")
    service._loaded.clear()
    service._sections.clear()
    reads, get = [], service.store.get

    def slow_get(key):
        reads.append(key)
        time.sleep(0.2)  # a big summary: the other requests arrive while it is read
        return get(key)

    service.store.get = slow_get
    answers, start = [], threading.Barrier(8)

    def ask():
        start.wait()
        answers.append(service.analysis("run", "w", "all"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    service.stop()
    assert len(answers) == 8 and len(reads) == 1 and all(a is answers[0] for a in answers)
