"""Fuzzing: seeded mutations of real traces (samples and small corpus files: Kineto traces, Execution Traces,
tensor.trace) through the readers, the analysis and every route of the plugin. The only accepted outcomes are the
documented ones: a GpuInsightError from the API, and from a route a JSON answer with 200/400/404/422/503.

In the suite it runs for about FUZZ_SECONDS; for a long run:
    python -m tests.test_fuzz --cases 5000 --seed 1
prints the number of cases, of distinct unhandled exceptions (by type and the project frame that raised them) and
of hangs.
"""
from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from tests.fuzz_cases import WHOLE_FILES, header_case, special_entry, write_entry

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CORPUS = Path(os.environ.get("TB_GPUINSIGHT_CORPUS", ROOT.parent / "shared" / "traces"))
FUZZ_SECONDS = float(os.environ.get("TB_GPUINSIGHT_FUZZ_SECONDS", "45"))
CASE_TIMEOUT_S = 60  # generous: the machine may be shared; a hang is a case that never ends
DOCUMENTED_STATUS = {200, 400, 404, 422, 503}
BASE = "/data/plugin/gpuinsight"

# Values that broke readers before: beyond int64/int32, infinities (as JSON 1e999), far-future timestamps, odd
# strings. Tokens of the form @@RAW:...@@ are written into the JSON text as they are (not as strings).
EVIL_VALUES = [2 ** 63, 2 ** 64 + 5, -(2 ** 63) - 1, 2 ** 31, -(2 ** 31) - 1, 10 ** 30, 10 ** 400, 2 ** 70, -1, 0,
               9.3e18, 1.5e308, "@@RAW:1e999@@", "@@RAW:-1e999@@", "", "x" * 5000, "<img src=x onerror=alert(1)>",
               None, True, [], {}, [1, [2, [3]]], "\u2028\u0000", 0.5, "1e999"]
XSS = "<img src=x onerror=alert(1)>"


class Hang(BaseException):
    """A case ran past CASE_TIMEOUT_S."""


# ------------------------------------------------------------------------------------------------- seeds

def seeds() -> List[Tuple[str, Dict[str, bytes]]]:
    """(name, {file name: bytes}) groups; one file of a group is mutated per case, the others come along."""
    out = []
    for run in ("bert_h100", "vit_h100", "minitoy_mi250"):
        for p in sorted((SAMPLES / run).glob("*.json.gz")):
            out.append((run, {"w.1700000000000000000.pt.trace.json": gzip.decompress(p.read_bytes())}))
    cpu = sorted((SAMPLES / "cpu_mlp").iterdir())
    if cpu:
        stem = cpu[0].name.split(".pt.trace")[0].split(".et.json")[0].split(".tensor.trace")[0]
        group = {p.name.replace(stem, "w.1700000000000000000"): p.read_bytes() for p in cpu if p.name.startswith(stem)}
        out.append(("cpu_mlp", group))
    for rel, name in (("hta/benchmark_simple_add_trace.json.gz", "w.1700000000000000000.pt.trace.json"),
                      ("hta/triton_example.json.gz", "w.1700000000000000000.pt.trace.json"),
                      ("hta/event_sync_trace.json.gz", "w.1700000000000000000.pt.trace.json")):
        path = CORPUS / rel
        if path.is_file():
            out.append((rel, {name: gzip.decompress(path.read_bytes())}))
    et = CORPUS / "hta/benchmark_simple_add_et.json.gz"
    trace = CORPUS / "hta/benchmark_simple_add_trace.json.gz"
    if et.is_file() and trace.is_file():
        out.append(("hta/simple_add+et", {"w.1700000000000000000.et.json": gzip.decompress(et.read_bytes()),
                                          "w.1700000000000000000.pt.trace.json": gzip.decompress(trace.read_bytes())}))
    return out


# ------------------------------------------------------------------------------------------------- mutations

def _dump(obj) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, allow_nan=True)
    while "\"@@RAW:" in text:
        start = text.index("\"@@RAW:")
        end = text.index("@@\"", start + 7)
        text = text[:start] + text[start + 7:end] + text[end + 3:]
    return text.encode("utf-8", "surrogatepass")


def _paths(obj, prefix=()) -> List[tuple]:
    """Every (container path, key) of a JSON value, sampled so that huge files stay cheap."""
    out = []
    stack = [(obj, prefix)]
    while stack and len(out) < 20000:
        node, path = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append(path + (k,))
            if isinstance(v, (dict, list)):
                stack.append((v, path + (k,)))
    return out


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _mutate_json(obj, rng: random.Random):
    paths = _paths(obj)
    if not paths:
        return obj
    # The trace's own description (deviceProperties, baseTimeNanoseconds, distributedInfo) is a few paths among
    # thousands of events: picked on purpose a quarter of the time.
    header = [p for p in paths if p[0] not in ("traceEvents", "nodes")]
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(header if header and rng.random() < 0.25 else paths)
        try:
            parent = _get(obj, path[:-1])
            key = path[-1]
            op = rng.random()
            if op < 0.55:
                parent[key] = rng.choice(EVIL_VALUES)
            elif op < 0.65:
                depth = rng.choice((50, 1200, 5000))
                deep = value = []
                for _ in range(depth):
                    value.append([])
                    value = value[0]
                parent[key] = deep
            elif op < 0.8 and isinstance(parent, dict):
                del parent[key]
            elif op < 0.9 and isinstance(parent, list):
                parent.extend(parent[: rng.randint(1, 50)])
            elif isinstance(parent[key], str):
                parent[key] = parent[key] + XSS + "\udcff"  # a lone surrogate: invalid UTF-8 once written
            else:
                parent[key] = str(parent[key])
        except (KeyError, IndexError, TypeError):
            continue
    return obj


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    op = rng.random()
    if op < 0.3:
        cut = rng.randrange(len(data) + 1)
        return data[:cut]
    if op < 0.6:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if out:
                out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if op < 0.8:
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice([b"\xff\xfe", b"[" * 3000, b"{\"a\":" * 2000, b"\x00", b"1e999",
                                       b"99999999999999999999999"]) + data[at:]
    return data + data[: rng.randrange(len(data) + 1)]


def _mutate_tensor_trace(data: bytes, rng: random.Random) -> bytes:
    lines = data.decode("utf-8", "replace").splitlines()
    for _ in range(rng.randint(1, 5)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        parts = lines[i].split("  ")
        j = rng.randrange(len(parts))
        parts[j] = rng.choice(["99999999999999999999999999", "-1", "torch.Size([99999999999999999999, 2])",
                               "torch.Size([", "0x" + "f" * 40, XSS, "", "\t", "\u00a0", "a" * 10000, "nan"])
        sep = rng.choice(["  ", "\t", " \x0b ", "\u2028", "   "])
        lines[i] = sep.join(parts)
    return "\n".join(lines).encode("utf-8", "surrogatepass") + rng.choice([b"\n", b"", b"\r\n\x00"])


def make_case(group: Dict[str, bytes], rng: random.Random, rename: bool = False) -> Dict[str, object]:
    """A copy of a seed group with one file mutated: a random mutation (structural, at byte level, and/or gzipped),
    or one of tests/fuzz_cases.py's targeted cases (a reproducer of the probe, a whole-file replacement, a
    filesystem oddity under the file's name or beside it). With `rename`, sometimes also the file's name (an
    invalid UTF-8 byte)."""
    files: Dict[str, object] = dict(group)
    name = rng.choice(sorted(files))
    data = files[name]
    pick = rng.random()
    if pick < 0.04:
        data = rng.choice(WHOLE_FILES)
    elif pick < 0.09:
        special = special_entry(data, rng)
        if rng.random() < 0.5:  # beside the real file, under another worker's name: listed first
            files[name.replace("w.", "v.", 1)] = special
        else:
            data = special
    elif pick < 0.3 and ".pt.trace.json" in name:
        data = header_case(data, rng, _dump)
    elif name.endswith(".tensor.trace"):
        data = _mutate_tensor_trace(data, rng)
    elif rng.random() < 0.75:
        try:
            data = _dump(_mutate_json(json.loads(data), rng))
        except (ValueError, RecursionError):
            data = _mutate_bytes(data, rng)
    else:
        data = _mutate_bytes(data, rng)
    if name.endswith(".json") and isinstance(data, bytes) and rng.random() < 0.2:
        data = gzip.compress(data, compresslevel=1)
        if rng.random() < 0.3:
            data = _mutate_bytes(data, rng)
        del files[name]
        name += ".gz"
    if rename and rng.random() < 0.05:  # a file name with an invalid UTF-8 byte (kept by Python as a lone surrogate)
        files.pop(name, None)
        name = name.replace("w.", "w\udcff.", 1)
    files[name] = data
    return files


# ------------------------------------------------------------------------------------------------- running

def _where(exc: BaseException) -> str:
    """The deepest frame of the project in a traceback: what makes two failures the same bug."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tb_gpuinsight" in f.filename]
    frame = frames[-1] if frames else (traceback.extract_tb(exc.__traceback__) or [None])[-1]
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.filename)}:{frame.name}"


class _Captured(logging.Handler):
    """Tracebacks the plugin logs for its 500 answers."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: List[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def _api_stage(folder: Path, failures: List[str]) -> None:
    """The Python API on every file of the case: load, analyse, augment, ET, tensor.trace, graph."""
    from tb_gpuinsight import GpuInsightError, load
    from tb_gpuinsight.analysis.kernels.augment import augmented_args, augmented_chunks
    from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace

    trace_path = next((p for p in folder.iterdir() if ".pt.trace.json" in p.name), None)
    et_path = next((p for p in folder.iterdir() if ".et.json" in p.name), None)
    tt_path = next((p for p in folder.iterdir() if p.name.endswith(".tensor.trace")), None)
    steps: List[Tuple[str, Callable]] = []
    state: Dict[str, object] = {}
    if trace_path is not None:
        steps.append(("load", lambda: state.__setitem__("trace", load(trace_path))))
        steps.append(("analyze", lambda: state.__setitem__("eff", analyze_trace(state["trace"]))))
        steps.append(("augment", lambda: [len(c) for c in augmented_chunks(str(trace_path),
                                                                           augmented_args(state["eff"]))]))
    if et_path is not None:
        from tb_gpuinsight.trace.et import load_et

        steps.append(("et", lambda: state.__setitem__("et", load_et(et_path))))
        if trace_path is not None:
            from tb_gpuinsight.analysis.graph.build import build_graph

            steps.append(("graph", lambda: build_graph(state["et"], state.get("trace"), state.get("eff"))))
    if tt_path is not None:
        from tb_gpuinsight.trace.tensortrace import read_tensor_trace

        steps.append(("tensor.trace", lambda: read_tensor_trace(tt_path).table.to_pandas()))
    for stage, step in steps:
        try:
            step()
        except GpuInsightError as exc:
            if "\n" in str(exc):
                failures.append(f"{stage}: multi-line error message")
            if stage in ("load", "analyze", "et"):
                if stage != "et":
                    return
                state.pop("et", None)
                return
        except (Hang, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 (what the fuzzer hunts)
            failures.append(f"{stage}: {type(exc).__name__} at {_where(exc)}")
            return


def _route_stage(logdir: Path, reference: Path, cache: Path, failures: List[str]) -> None:
    """Every route of the plugin over the case's run (and the reference run, for /diff)."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    service = LogdirService(str(logdir), cache_dir=str(cache), workers=0, scan_interval=3600)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    try:
        service.serve()  # analyse what the scan finds (workers=0: in the scanning thread), as when serving
        service.scan()
        _settle(service)
        client = Client(application.TensorBoardWSGI([plugin]))
        client.settle = lambda: _settle(service)
        _ask(client, "runs", failures)
        _ask(client, "index.js", failures)
        states = list(service.runs["fz"].spans.values()) if "fz" in service.runs else []
        if not states:
            return  # not recognised as a trace: listed as unreadable, nothing else to ask
        for state in states:
            if state.reason.startswith("internal error"):
                failures.append(f"analysis: {state.reason.split(':')[1].strip()} (worker)")
        _check_sections(service, states, failures)
        sel = {"run": "fz", "worker": states[0].worker}
        span = states[0].span
        first = _ask(client, "kernels", failures, **sel, span=span, limit=3)
        name = (first.get("rows") or [{}])[0].get("name") if isinstance(first, dict) else None
        ops = _ask(client, "op_shapes", failures, **sel, span=span, limit=3)
        op = (ops.get("rows") or [{}])[0].get("op") if isinstance(ops, dict) else None
        _ask(client, "devices", failures, **sel, span="all")
        _ask(client, "kernels", failures, **sel, span="all", group="op", dtype="fp16", sort="tflops")
        _ask(client, "kernels", failures, run="fz", worker="*", span="all")
        _ask(client, "roofline", failures, **sel, span=span, dtype="bf16")
        _ask(client, "diff", failures, a_run="fz", a_worker=sel["worker"], a_span=span, b_run="ref", b_worker="w",
             by="op")
        _ask(client, "tensors", failures, **sel, span=span)
        if name:
            _ask(client, "kernel_ops", failures, **sel, span=span, name=name[:500])
        if op:
            _ask(client, "shape_distribution", failures, **sel, span=span, op=op[:500])
        for route, extra in (("graph/view", {"focus": "1"}), ("graph/node", {"id": "0"}), ("graph/search", {"q": "a"})):
            _ask(client, route, failures, **sel, span=span, **extra)
        memory = _ask(client, "memory", failures, **sel, span=span)
        devices = memory.get("devices") if isinstance(memory, dict) else None
        device = str(devices[0].get("device")) if devices and isinstance(devices[0], dict) else "cuda:0"
        for route, extra in (("overview", {}), ("memory_curve", {"device": device, "width": "300"}),
                             ("memory_allocations", {"device": device, "which": "never_freed"}),
                             ("memory_ops", {"device": device}), ("timeline/meta", {}),
                             ("timeline/view", {"t0": "0", "t1": "1e12", "width": "500"}),
                             ("timeline/range", {"t0": "0", "t1": "1e12"}), ("timeline/find", {"name": name or "a"}),
                             ("timeline/event", {"index": "0"})):
            _ask(client, route, failures, **sel, span=span, **extra)
        for route in ("ranks", "ranks_heatmap", "ranks_compare"):
            _ask(client, route, failures, run="fz", rank="0")
        _ask(client, "ranks", failures, run="fz", cycle="5")
        _ask(client, "critical_path", failures, **sel, span=span)
        _ask(client, "critical_path", failures, **sel, span="all", step="#0", limit="10")
        _ask(client, "critical_path/ranks", failures, run="fz")
        _ask(client, "diff/suggest", failures, **sel, span=span)
        _ask(client, "trace", failures, **sel, span=span)
    finally:
        service.stop()


def _check_sections(service, states, failures: List[str]) -> None:
    """A view's builder that raised on this content is a bug hidden in its section (the span still loads)."""
    from tb_gpuinsight.sections import SECTION_BUILDERS

    for state in states:
        if state.status != "ready":
            continue
        for name in SECTION_BUILDERS:
            for _, section in service.sections("fz", state.worker, state.span, name):
                if section.error.startswith("internal error"):
                    failures.append(f"section {name}: {section.error.split(':')[1].strip()}")


def _settle(service, timeout: float = CASE_TIMEOUT_S) -> None:
    """Wait until the service's scanning thread has analysed every span it found (none pending or loading)."""
    end = time.time() + timeout
    while time.time() < end:
        with service._lock:
            busy = any(s.status in ("pending", "loading") for r in service.runs.values() for s in r.spans.values())
        if not busy:
            return
        time.sleep(0.02)


# Over every request of the route fuzz (benchmarks/fuzz.py's table): route -> {HTTP status or "exception": count},
# and the slowest request.
ROUTE_STATUS: Dict[str, Dict[str, int]] = {}
SLOWEST_ROUTE: List[Tuple[float, str]] = [(0.0, "")]


def _ask(client, route: str, failures: List[str], **query) -> object:
    """A route's JSON answer (None for none); a failure when it is no documented status, a 503 without
    Retry-After or one that asking again once the analysis settled does not resolve, or an error of several lines."""
    from tb_gpuinsight.trace.text import safe_text

    tally = ROUTE_STATUS.setdefault(route, {})
    query = {k: safe_text(str(v)) for k, v in query.items()}  # as a browser's URLSearchParams: U+FFFD for bad bytes
    start = time.perf_counter()
    try:
        response = client.get(f"{BASE}/{route}", query_string=query)
        if response.status_code == 503 and hasattr(client, "settle"):
            if not response.headers.get("Retry-After"):
                failures.append(f"route /{route}: 503 without Retry-After")
            client.settle()
            response = client.get(f"{BASE}/{route}", query_string=query)
            if response.status_code == 503:
                failures.append(f"route /{route}: 503 that a retry does not resolve")
        body = response.get_data()
    except (Hang, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001  (an exception escaping a route is an HTML 500)
        tally["exception"] = tally.get("exception", 0) + 1
        failures.append(f"route /{route}: {type(exc).__name__} at {_where(exc)}")
        return None
    SLOWEST_ROUTE[0] = max(SLOWEST_ROUTE[0], (time.perf_counter() - start, f"/{route}"))
    tally[str(response.status_code)] = tally.get(str(response.status_code), 0) + 1
    if response.status_code not in DOCUMENTED_STATUS:
        failures.append(f"route /{route}: HTTP {response.status_code}")
        return None
    if route in ("trace", "index.js") and response.status_code == 200:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        failures.append(f"route /{route}: not JSON")
        return None
    if response.status_code != 200 and "\n" in str(answer.get("error") if isinstance(answer, dict) else answer):
        failures.append(f"route /{route}: error of several lines")
    return answer


def _write_group(folder: Path, files: Dict[str, object]) -> None:
    """A case's files in a fresh folder, dated an hour ago (settled: a parse failure is final, not "being written")."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    old = time.time() - 3600
    for name, data in files.items():
        write_entry(str(folder / name), data)
        try:
            os.utime(folder / name, (old, old), follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass


def run_case(files: Dict[str, bytes], work: Path, reference_files: Dict[str, bytes]) -> List[str]:
    """The failures (unhandled exceptions, undocumented answers) of one case."""
    run, ref = work / "logdir" / "fz", work / "logdir" / "ref"
    _write_group(run, files)
    if not ref.is_dir():  # written once: its summary stays cached across cases
        _write_group(ref, reference_files)
    failures: List[str] = []
    captured = _Captured()
    logging.getLogger("tb_gpuinsight").addHandler(captured)
    try:
        _api_stage(run, failures)
        _route_stage(work / "logdir", ref, work / "cache", failures)
    finally:
        logging.getLogger("tb_gpuinsight").removeHandler(captured)
    failures += [f"route (logged 500): {type(e).__name__} at {_where(e)}" for e in captured.errors]
    return failures


def fuzz(cases: Optional[int], seconds: Optional[float], seed: int, work: Path,
         report: Callable[[str], None] = lambda line: None) -> Tuple[int, Dict[str, int], int]:
    """Run cases until `cases` or `seconds` is reached: (cases run, {distinct failure: count}, hangs)."""
    rng = random.Random(seed)
    groups = seeds()
    reference = groups[0][1]
    distinct: Dict[str, int] = {}
    hangs = done = 0
    start = time.time()

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    run_case(dict(reference), work, reference)  # warm-up (imports, reference summary): not timed, not counted
    ROUTE_STATUS.clear()
    try:
        while (cases is None or done < cases) and (seconds is None or time.time() - start < seconds):
            name, group = groups[done % len(groups)]
            files = make_case(group, rng)
            signal.alarm(CASE_TIMEOUT_S)
            try:
                failures = run_case(files, work, reference)
            except Hang:
                hangs += 1
                failures = []
                report(f"case {done} ({name}): hang")
            finally:
                signal.alarm(0)
            for f in set(failures):
                if f not in distinct:
                    report(f"case {done} ({name}): {f}")
                distinct[f] = distinct.get(f, 0) + 1
            done += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    return done, distinct, hangs


def test_fuzz_only_documented_errors(tmp_path):
    logging.getLogger("tb_gpuinsight").setLevel(logging.ERROR)
    done, distinct, hangs = fuzz(None, FUZZ_SECONDS, seed=int(os.environ.get("TB_GPUINSIGHT_FUZZ_SEED", "12")),
                                 work=tmp_path / "case")
    assert done > 0
    assert not distinct and not hangs, (done, distinct, hangs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        done, distinct, hangs = fuzz(args.cases, None, args.seed, Path(tmp) / "case",
                                     report=lambda line: print(line, flush=True))
    print(f"cases {done}; distinct unhandled {len(distinct)}; failing cases "
          f"{sum(distinct.values())}; hangs {hangs}")
    for f, n in sorted(distinct.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {f}")


if __name__ == "__main__":
    main()
