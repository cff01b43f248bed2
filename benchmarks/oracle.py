"""Agreement table of our per-op FLOPs and bytes with AMD TraceLens's published per-op reports
(../shared/oracles/tracelens), per op class; `-v` also lists every check that is not an agreement.

    python benchmarks/oracle.py [-v]     (run from the project root; corpus from $TB_GPUINSIGHT_CORPUS)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.oracle import AGREE, TRACES, agreement_table, available, checks_for  # noqa: E402


def main() -> None:
    if not available():
        sys.exit("oracle: TraceLens reports or their traces not found (set TB_GPUINSIGHT_CORPUS)")
    checks, unjoined = [], []
    for name in TRACES:
        mine, missing = checks_for(name)
        checks += mine
        unjoined += [f"{name}: {m}" for m in missing]
    for line in agreement_table(checks):
        print(line)
    print(f"peer rows that joined no op: {len(unjoined)}")
    if "-v" in sys.argv[1:]:
        for c in checks:
            if c.outcome != AGREE:
                print(f"  [{c.outcome}] {c.describe()}")
        for m in unjoined:
            print(f"  [unjoined] {m}")


if __name__ == "__main__":
    main()
