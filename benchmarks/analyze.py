"""Analysis speed and memory: `tb-gpuinsight analyze --format csv --top 0` next to orjson.loads of the same file and,
when installed, HTA's load + kernel breakdown and inductor's profile_analysis --analysis; then where our time goes.

    python benchmarks/analyze.py TRACE [--repeat N] [--baseline CHECKOUT] [--dtype bfloat16]

Every figure is a whole process (interpreter start, imports, reading, analysis, output), the median of --repeat
runs, with its peak RSS; ratios are against orjson.loads measured in the same run, and the runs go in rounds (each
method once per round), since a shared machine's speed drifts between runs. "memo warm" reuses the estimates memoised by an earlier run; "first time" runs with an empty
cache directory ($XDG_CACHE_HOME), as on a new machine, where estimates are computed (and torch imported only for
ops whose formula needs it). --baseline runs another checkout's code (say the main branch's) in the same run.
Each checkout's bytecode is compiled first, as pip does at install: where PYTHONDONTWRITEBYTECODE is set, every run
would otherwise compile every module again, and "imports" would time the compiler (--no-bytecode measures that).

The split times one run's stages inside the process (medians over --repeat runs): imports (every module imported,
also lazily, during the run), inflate, decode (JSON to event structs), columns (numpy tables), correlate (kernels
to ops), estimate (FLOPs and bytes, memo included), rate (against the datasheet), output (rows and CSV), other.
Targets: memo warm at most 1.0x orjson.loads, first time at most 1.5x, peak RSS at most 1.5x the JSON size.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(__file__))
from _measure import compile_bytecode, has_module, json_size, measure, print_table  # noqa: E402
from read import _READ  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ORJSON = _READ + "import orjson, sys\nd = orjson.loads(read_all(sys.argv[1]))\n"
_HTA_SETUP = ("import os, tempfile, logging\nlogging.disable(logging.WARNING)\n"
              "from hta.trace_analysis import TraceAnalysis\n"
              "d = tempfile.mkdtemp()\nos.symlink(path, os.path.join(d, os.path.basename(path)))\n")
_HTA_STEP = "ta = TraceAnalysis(trace_dir=d)\nkb = ta.get_gpu_kernel_breakdown(visualize=False)"
_INDUCTOR_SETUP = ("import sys, io, contextlib\n"
                   "from torch._inductor.analysis.profile_analysis import main as inductor_main\n")
_INDUCTOR_STEP = ("sys.argv = ['profile_analysis', '--analysis', path, dtype]\n"
                  "with contextlib.redirect_stdout(io.StringIO()):\n    inductor_main()")
STAGES = ("imports", "inflate", "decode", "columns", "correlate", "estimate", "rate", "output")

# One analysis with its stages timed (trace/stages.py); every import, also a lazy one, is charged to "imports".
_SPLIT = r"""
import contextlib, importlib._bootstrap as boot, json, os, sys, time
t0 = time.perf_counter()
from tb_gpuinsight.trace import stages
package = time.perf_counter() - t0
find = boot._find_and_load
def timed_import(*args, **kwargs):
    with stages.stage("imports"):
        return find(*args, **kwargs)
boot._find_and_load = timed_import
with stages.stage("imports"):
    from tb_gpuinsight.cli import main
with open(os.devnull, "w") as out, contextlib.redirect_stdout(out):
    code = main(["analyze", "--format", "csv", "--top", "0", sys.argv[1]])
split = stages.totals()
split["imports"] = split.get("imports", 0.0) + package
print(json.dumps({"total": time.perf_counter() - t0, "split": split, "torch": "torch" in sys.modules, "code": code}))
"""
_ORJSON_SPLIT = r"""
import json, sys, time, zlib
t0 = time.perf_counter()
import orjson
t1 = time.perf_counter()
raw = open(sys.argv[1], "rb").read()
data = zlib.decompress(raw, 16 + zlib.MAX_WBITS) if raw[:2] == b"\x1f\x8b" else raw
t2 = time.perf_counter()
doc = orjson.loads(data)
t3 = time.perf_counter()
print(json.dumps({"total": t3 - t0, "split": {"imports": t1 - t0, "inflate": t2 - t1, "decode": t3 - t2}}))
"""


def run_whole(argv: Sequence[str], repeat: int, env: Optional[Dict[str, str]] = None, cwd: str = ROOT,
              fresh_cache: bool = False) -> Dict[str, float]:
    """Median wall time and peak RSS of `repeat` runs of a whole process (see run_rounds)."""
    return run_rounds([Method("", argv, env, cwd, fresh_cache)], repeat)[0][1]


class Method:
    """One whole-process command of the comparison."""

    def __init__(self, label: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None, cwd: str = ROOT,
                 fresh_cache: bool = False) -> None:
        self.label, self.argv, self.env, self.cwd, self.fresh_cache = label, list(argv), env, cwd, fresh_cache

    def run_once(self) -> Tuple[float, float, int, str]:
        """(wall seconds, CPU seconds, peak RSS bytes, error or ""). os.wait4 gives the child's own peak; it also
        counts the parent's memory at the fork, which is why this process never holds a trace."""
        cache = tempfile.mkdtemp(prefix="tbgi-bench-cache-") if self.fresh_cache else None
        run_env = {**os.environ, **(self.env or {}), **({"XDG_CACHE_HOME": cache} if cache else {})}
        t0 = time.perf_counter()
        proc = subprocess.Popen(self.argv, env=run_env, cwd=self.cwd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stderr.close()
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
        if os.waitstatus_to_exitcode(status) != 0:
            return wall, 0.0, 0, err.splitlines()[-1] if err else f"exit {os.waitstatus_to_exitcode(status)}"
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, ""


def run_rounds(methods: List[Method], repeat: int) -> List[Tuple[str, Dict[str, float]]]:
    """Each method's median wall time and peak RSS over `repeat` rounds; a round runs every method once, in turn,
    so that a shared machine's load, which drifts, weighs on all of them alike."""
    results: Dict[str, List[Tuple[float, float, int]]] = {m.label: [] for m in methods}
    errors: Dict[str, str] = {}
    for _ in range(repeat):
        for m in methods:
            if m.label in errors:
                continue
            wall, cpu, peak, err = m.run_once()
            if err:
                errors[m.label] = err
            else:
                results[m.label].append((wall, cpu, peak))
    return [(m.label, {"error": errors[m.label]} if m.label in errors else
             {key: statistics.median(r[i] for r in results[m.label])
              for i, key in enumerate(("wall_s", "cpu_s", "peak_rss"))}) for m in methods]


def run_split(code: str, path: str, repeat: int, env: Optional[Dict[str, str]] = None,
              fresh_cache: bool = False) -> Dict[str, object]:
    """Stage times of `repeat` runs of a harness, each stage's median; `torch`: whether any run imported it."""
    runs = []
    for _ in range(repeat):
        cache = tempfile.mkdtemp(prefix="tbgi-bench-cache-") if fresh_cache else None
        run_env = {**os.environ, **(env or {}), **({"XDG_CACHE_HOME": cache} if cache else {})}
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=run_env,
                             cwd=ROOT)
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
        if out.returncode != 0:
            return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = sorted({k for r in runs for k in r["split"]})
    split = {k: statistics.median(r["split"].get(k, 0.0) for r in runs) for k in names}
    total = statistics.median(r["total"] for r in runs)
    split["other"] = max(total - sum(split.values()), 0.0)
    return {"total": total, "split": split, "torch": any(r.get("torch") for r in runs)}


def _cli(checkout: str) -> Tuple[List[str], Dict[str, str], str]:
    """argv, env and cwd that run a checkout's CLI on its own code (cwd first on sys.path, so it wins)."""
    return [sys.executable, "-m", "tb_gpuinsight.cli"], {"PYTHONPATH": checkout}, checkout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="another checkout whose CLI runs in the same benchmark (e.g. main's)")
    ap.add_argument("--dtype", default="bfloat16", help="inductor's default dtype argument")
    ap.add_argument("--no-peers", action="store_true", help="skip HTA and inductor")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="do not compile the checkouts' bytecode first (each run then compiles what it imports when "
                         "PYTHONDONTWRITEBYTECODE is set)")
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    size = json_size(path)
    command = ["analyze", "--format", "csv", "--top", "0", path]
    methods = [Method("orjson.loads", [sys.executable, "-c", _ORJSON, path])] if has_module("orjson") else []
    checkouts = [("", ROOT)] + ([(" [baseline]", os.path.abspath(args.baseline))] if args.baseline else [])
    for label, checkout in checkouts:
        if not args.no_bytecode:
            compile_bytecode(checkout)
        argv, env, cwd = _cli(checkout)
        Method("fill", argv + command, env, cwd).run_once()  # fills the estimates memo: later runs find it warm
        methods.append(Method(f"analyze, memo warm{label}", argv + command, env, cwd))
        methods.append(Method(f"analyze, first time{label}", argv + command, env, cwd, fresh_cache=True))
    rows = run_rounds(methods, args.repeat)
    if not args.no_peers:
        where = f"path = {path!r}\ndtype = {args.dtype!r}\n"
        if has_module("hta"):
            rows.append(("HTA load + kernel breakdown", _step(measure(where + _HTA_SETUP, _HTA_STEP, 1))))
        rows.append(("inductor profile_analysis (step)", _step(measure(where + _INDUCTOR_SETUP, _INDUCTOR_STEP, 1))))
    print(f"trace: {path}\nJSON size: {size / 1e6:.1f} MB (file {os.path.getsize(path) / 1e6:.1f} MB)")
    print(f"bytecode: {'as found' if args.no_bytecode else 'compiled first, as installed'}\n")
    _print_whole(rows, size)
    splits = [("orjson.loads", run_split(_ORJSON_SPLIT, path, args.repeat)),
              ("ours, memo warm", run_split(_SPLIT, path, args.repeat)),
              ("ours, first time", run_split(_SPLIT, path, args.repeat, fresh_cache=True))]
    _print_split(splits)


def _step(m: Dict[str, float]) -> Dict[str, float]:
    """A measure() result (the step after its imports) in run_whole's units."""
    return m if "error" in m else {"wall_s": m["wall_s"], "peak_rss": m["peak_rss_kb"] * 1024}


def _print_whole(rows: List[Tuple[str, Dict[str, float]]], size: int) -> None:
    kb = [(name, m if "error" in m else {**m, "peak_rss_kb": m["peak_rss"] / 1024}) for name, m in rows]
    print_table("whole processes, median of runs", kb, size, "orjson.loads")


def _print_split(splits: List[Tuple[str, Dict[str, object]]]) -> None:
    print("\nwhere the time goes (seconds inside the process, median of runs)")
    print(f"{'stage':<12}" + "".join(f"{name:>20}" for name, _ in splits))
    for stage in STAGES + ("other",):
        cells = []
        for _, s in splits:
            value = s.get("split", {}).get(stage) if "error" not in s else None
            cells.append(f"{value:>20.3f}" if value is not None else f"{'-':>20}")
        print(f"{stage:<12}" + "".join(cells))
    print(f"{'total':<12}" + "".join(f"{s['total']:>20.3f}" if "error" not in s else f"{'failed':>20}"
                                     for _, s in splits))
    for name, s in splits:
        if "error" in s:
            print(f"{name}: failed: {s['error']}")
        elif "torch" in s:
            print(f"{name}: torch imported: {'yes' if s['torch'] else 'no'}")


if __name__ == "__main__":
    main()
