"""List the distinct GPU kernel names of a folder of Kineto traces, one per naming family, with the class the
classifier gives today: the source of the corpus rows of kernel_classes.tsv (each row's expected class is then
checked by hand, never copied from this output).

    python tests/data/harvest_kernel_names.py [FOLDER]     (default: ../shared/traces)

Prints `name<TAB>class<TAB>trace` for the names with the most kernel time in each family (the name with numbers and
template arguments removed), most time first.
"""
from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's classifier, not an installed one

from tb_gpuinsight.analysis.kernels.names import kernel_class, normalize  # noqa: E402
_DIGITS = re.compile(r"\d+")


def kernel_times(path: Path) -> Counter:
    """Kernel time per name in one trace (empty for files that are no Kineto trace)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return Counter()
    times: Counter = Counter()
    for event in data.get("traceEvents", []) if isinstance(data, dict) else []:
        if str(event.get("cat", "")).lower() == "kernel" and isinstance(event.get("name"), str):
            times[event["name"]] += float(event.get("dur") or 0)
    return times


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "traces"
    best = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        for name, time in kernel_times(path).items():
            family = _DIGITS.sub("#", normalize(name))[:80]
            if family not in best or time > best[family][1]:
                best[family] = (name, time, str(path.relative_to(folder)))
    for name, _, trace in sorted(best.values(), key=lambda row: -row[1]):
        print(f"{name}\t{kernel_class(name)}\t{trace}")


if __name__ == "__main__":
    main()
