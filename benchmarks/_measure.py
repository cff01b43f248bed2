"""Run one measured step in a fresh interpreter and report wall time and peak RSS, for side-by-side benchmarks.

Each method runs in its own subprocess so that peak RSS (ru_maxrss) belongs to that method alone; the figure
includes the interpreter and the method's imports, as a user would see it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

_RUNNER = r"""
import json, resource, sys, time
setup, step = sys.argv[1], sys.argv[2]
env = {}
exec(setup, env)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
exec(step, env)
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall_s": wall, "peak_rss_kb": peak, "base_rss_kb": base}))
"""


def measure(setup: str, step: str, repeat: int = 1, env: Optional[Dict[str, str]] = None) -> Dict[str, float]:
    """Best wall time and its peak RSS over `repeat` fresh processes (the step runs after `setup`)."""
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _RUNNER, setup, step], capture_output=True, text=True,
                             env={**os.environ, **(env or {})}, cwd=os.path.dirname(os.path.dirname(__file__)))
        if out.returncode != 0:
            return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or result["wall_s"] < best["wall_s"]:
            best = result
    return best


def compile_bytecode(checkout: str) -> None:
    """Write the checkout's bytecode caches (__pycache__, ignored by git), as an installed package has them: where
    PYTHONDONTWRITEBYTECODE is set, every run would otherwise compile what it imports, and time the compiler."""
    import compileall

    compileall.compile_dir(os.path.join(checkout, "tb_gpuinsight"), quiet=1)


def json_size(path: str) -> int:
    """The uncompressed size of a (gzipped) JSON file, inflated block by block: a benchmark's parent process must
    not hold the trace, since a child's peak RSS (os.wait4) counts the parent's memory at the fork."""
    import zlib

    size = 0
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return os.path.getsize(path)
        f.seek(0)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        for block in iter(lambda: f.read(1 << 20), b""):
            data = block
            while data:
                size += len(inflater.decompress(data, 1 << 24))
                data = inflater.unconsumed_tail
                if inflater.eof and inflater.unused_data:  # a further gzip member
                    data = inflater.unused_data
                    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return size


def has_module(name: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode == 0


def print_table(title: str, rows: List[Tuple[str, Dict[str, float]]], size_bytes: int,
                reference: str) -> None:
    """Rows of (method, measurement), with ratios against the `reference` row and the JSON size. Rows that carry
    `cpu_s` (user + system CPU seconds of the whole process) also get its ratio: on a machine shared with other
    work it drifts less than wall time."""
    ref = dict(rows).get(reference, {})
    cpu = any("cpu_s" in m for _, m in rows)
    print(title)
    print(f"{'method':<34}{'wall s':>9}{'peak RSS MB':>13}{'RSS/JSON':>10} {'time/' + reference:>18}"
          f"{'RSS/' + reference:>17}" + (f"{'cpu s':>9}{'cpu/' + reference:>17}" if cpu else ""))
    for name, m in rows:
        if "error" in m:
            print(f"{name:<34}  failed: {m['error']}")
            continue
        rss = m["peak_rss_kb"] * 1024
        t_ratio = m["wall_s"] / ref["wall_s"] if ref.get("wall_s") else float("nan")
        r_ratio = m["peak_rss_kb"] / ref["peak_rss_kb"] if ref.get("peak_rss_kb") else float("nan")
        line = (f"{name:<34}{m['wall_s']:>9.3f}{rss / 1e6:>13.1f}{rss / size_bytes:>10.2f}{t_ratio:>18.2f}"
                f"{r_ratio:>17.2f}")
        if cpu and "cpu_s" in m:
            c_ratio = m["cpu_s"] / ref["cpu_s"] if ref.get("cpu_s") else float("nan")
            line += f"{m['cpu_s']:>9.3f}{c_ratio:>17.2f}"
        elif cpu:
            line += f"{'-':>9}{'-':>17}"
        print(line)
