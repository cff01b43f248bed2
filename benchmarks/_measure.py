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


def has_module(name: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode == 0


def print_table(title: str, rows: List[Tuple[str, Dict[str, float]]], size_bytes: int,
                reference: str) -> None:
    """Rows of (method, measurement), with ratios against the `reference` row and the JSON size."""
    ref = dict(rows).get(reference, {})
    print(title)
    print(f"{'method':<34}{'wall s':>9}{'peak RSS MB':>13}{'RSS/JSON':>10} {'time/' + reference:>18}"
          f"{'RSS/' + reference:>17}")
    for name, m in rows:
        if "error" in m:
            print(f"{name:<34}  failed: {m['error']}")
            continue
        rss = m["peak_rss_kb"] * 1024
        t_ratio = m["wall_s"] / ref["wall_s"] if ref.get("wall_s") else float("nan")
        r_ratio = m["peak_rss_kb"] / ref["peak_rss_kb"] if ref.get("peak_rss_kb") else float("nan")
        print(f"{name:<34}{m['wall_s']:>9.3f}{rss / 1e6:>13.1f}{rss / size_bytes:>10.2f}{t_ratio:>18.2f}"
              f"{r_ratio:>17.2f}")
