"""Reading speed and memory: stdlib json.loads, orjson.loads and tb_gpuinsight.load on the same trace, side by side.

    python benchmarks/read.py TRACE [--repeat N] [--workers 1 2]

Each method runs in a fresh process and includes reading (and inflating) the file, as a user's load would.
--workers adds a row per count of decoding processes (`load_kineto(workers=N)`: the event array split at event
boundaries, parts decoded in forked workers; a part is at least 50,000 events, so small traces stay on one).
Targets: our load at most 1.0x orjson's wall time, peak RSS at most 2x the uncompressed JSON size.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _measure import has_module, json_size, measure, print_table  # noqa: E402

# Baselines read the file the plain way a user would: whole bytes, inflated with gzip when compressed.
_READ = ("import gzip\n"
         "def read_all(p):\n"
         "    raw = open(p, 'rb').read()\n"
         "    return gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="*", default=[], help="decoding processes to compare (1 2 ...)")
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    setup_read = _READ + f"path = {path!r}\n"
    json_bytes = json_size(path)  # block by block: the parent must not hold the trace (children's RSS)
    rows = [("json.loads (stdlib)", measure("import json\n" + setup_read, "d = json.loads(read_all(path))",
                                            args.repeat))]
    if has_module("orjson"):
        rows.append(("orjson.loads", measure("import orjson\n" + setup_read, "d = orjson.loads(read_all(path))",
                                             args.repeat)))
    rows.append(("tb_gpuinsight.load", measure(f"import tb_gpuinsight\npath = {path!r}",
                                               "t = tb_gpuinsight.load(path)", args.repeat)))
    for n in args.workers:
        rows.append((f"tb_gpuinsight.load, {n} process{'es' if n > 1 else ''}",
                     measure(f"import tb_gpuinsight\npath = {path!r}", "t = tb_gpuinsight.load(path)", args.repeat,
                             env={"TB_GPUINSIGHT_DECODE_WORKERS": str(n)})))
    print(f"trace: {path}\nJSON size: {json_bytes / 1e6:.1f} MB (file {os.path.getsize(path) / 1e6:.1f} MB)\n")
    print_table("read", rows, json_bytes, "orjson.loads" if "orjson.loads" in dict(rows) else "json.loads (stdlib)")


if __name__ == "__main__":
    main()
