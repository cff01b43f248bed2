"""Analysis speed and memory: our analyze (read + FLOP/byte attribution + efficiency table) next to orjson.loads
of the same file and, when installed, HTA's load + kernel breakdown and inductor's profile_analysis --analysis.

    python benchmarks/analyze.py TRACE [--repeat N] [--dtype bfloat16]

Targets: at most 1.5x orjson.loads wall time, at least 5x faster than HTA, peak RSS at most 2x the JSON size.
"tb_gpuinsight analyze" reuses estimates memoised by earlier runs (the best of --repeat runs); the row below it
is a first analysis, which imports torch for its FLOP formulas when the trace has shapes (about 1 s, 150 MB).
Each method runs in a fresh process; a method that fails prints its one-line error instead of figures.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _measure import has_module, measure, print_table  # noqa: E402
from read import _READ, _json_size  # noqa: E402

_OURS = ("from tb_gpuinsight import analyze\nfrom tb_gpuinsight.analysis.kernels.rows import group_rows\n")
_OURS_STEP = "eff = analyze(path)\nrows = group_rows(eff.by_name())\nops = group_rows(eff.by_op())"
_HTA_SETUP = ("import os, tempfile, logging\nlogging.disable(logging.WARNING)\n"
              "from hta.trace_analysis import TraceAnalysis\n"
              "d = tempfile.mkdtemp()\nos.symlink(path, os.path.join(d, os.path.basename(path)))\n")
_HTA_STEP = "ta = TraceAnalysis(trace_dir=d)\nkb = ta.get_gpu_kernel_breakdown(visualize=False)"
_INDUCTOR_SETUP = ("import sys, io, contextlib\n"
                   "from torch._inductor.analysis.profile_analysis import main as inductor_main\n")
_INDUCTOR_STEP = ("sys.argv = ['profile_analysis', '--analysis', path, dtype]\n"
                  "with contextlib.redirect_stdout(io.StringIO()):\n    inductor_main()")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16", help="inductor's default dtype argument")
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    where = f"path = {path!r}\ndtype = {args.dtype!r}\n"
    rows = []
    if has_module("orjson"):
        rows.append(("orjson.loads", measure("import orjson\n" + _READ + where, "d = orjson.loads(read_all(path))",
                                             args.repeat)))
    rows.append(("tb_gpuinsight analyze", measure(_OURS + where, _OURS_STEP, args.repeat)))
    # Without the persistent estimate memo: a first analysis of these shapes, which imports torch for its formulas.
    rows.append(("  (first time: no estimate memo)", measure(_OURS + where, _OURS_STEP, args.repeat,
                                                        env={"TB_GPUINSIGHT_NO_MEMO": "1"})))
    if has_module("hta"):
        rows.append(("HTA load + kernel breakdown", measure(where + _HTA_SETUP, _HTA_STEP, 1)))
    rows.append(("inductor profile_analysis", measure(where + _INDUCTOR_SETUP, _INDUCTOR_STEP, 1)))
    size = _json_size(path)
    print(f"trace: {path}\nJSON size: {size / 1e6:.1f} MB (file {os.path.getsize(path) / 1e6:.1f} MB)\n")
    print_table("analyze", rows, size, rows[0][0])
    ours = dict(rows)["tb_gpuinsight analyze"]
    hta = dict(rows).get("HTA load + kernel breakdown", {})
    if "wall_s" in ours and "wall_s" in hta:
        print(f"\nHTA / ours wall time: {hta['wall_s'] / ours['wall_s']:.1f}x")


if __name__ == "__main__":
    main()
