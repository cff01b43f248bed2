"""Write a bigger Kineto trace by repeating a real trace's events N times, shifted in time and in ids.

    python benchmarks/scale_trace.py SOURCE OUT.json (--times N | --target-mb MB)

Each copy is moved past the previous one on the time axis, and its External id / correlation / Record function id
(and flow ids) are offset so that links stay unique. The output is written event by event (never held whole).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os

_ID_ARGS = ("External id", "external id", "correlation", "Record function id", "Ev Idx", "Profiler Event Index")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("out")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--times", type=int)
    group.add_argument("--target-mb", type=float)
    args = ap.parse_args()
    doc = _load(args.source)
    events = doc.pop("traceEvents")
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    one_copy = sum(len(x) + 1 for x in lines)
    times = args.times or max(1, round(args.target_mb * 1e6 / one_copy))
    write_scaled(doc, events, times, args.out)
    print(f"wrote {args.out}: {times} copies, {len(events) * times:,} events, "
          f"{os.path.getsize(args.out) / 1e6:.0f} MB")


def _load(path: str) -> dict:
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def write_scaled(header: dict, events: list, times: int, out: str) -> None:
    """Write `times` shifted copies of `events` under `header`'s other keys."""
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) + 1000
    id_step = 1 + max((int(e.get("args", {}).get(k, 0)) for e in events for k in _ID_ARGS
                       if isinstance(e.get("args", {}).get(k), int)), default=0)
    flow_step = 1 + max((e["id"] for e in events if isinstance(e.get("id"), int)), default=0)
    with open(out, "w", encoding="utf-8") as f:
        f.write("{")
        for key, value in header.items():
            f.write(f"{json.dumps(key)}:{json.dumps(value)},")
        f.write('"traceEvents":[')
        first = True
        for i in range(times):
            for e in events:
                f.write(("" if first else ",\n") + json.dumps(_shift(e, i, span, id_step, flow_step),
                                                             separators=(",", ":")))
                first = False
        f.write("]}")


def _shift(e: dict, i: int, span: float, id_step: int, flow_step: int) -> dict:
    if i == 0 or e.get("ph") == "M":
        return e
    e = dict(e)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = e["ts"] + i * span
    if isinstance(e.get("id"), int):
        e["id"] = e["id"] + i * flow_step
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int):
                args[key] = args[key] + i * id_step
        e["args"] = args
    return e


if __name__ == "__main__":
    main()
