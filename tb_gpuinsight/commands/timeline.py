"""`tb-gpuinsight timeline TRACE`: the lanes of a trace's timeline with their busy time over a range, and a
viewport's level-of-detail items exported as JSON or CSV (what the Timeline tab draws for that range and width).
Given a run directory with one trace per rank, every rank is stacked on one time base (the tab's "All ranks").

    tb-gpuinsight timeline TRACE                              # lanes, busy / idle per GPU over the whole trace
    tb-gpuinsight timeline TRACE --t0 1000 --t1 5000          # the same over a range (us from the trace start)
    tb-gpuinsight timeline TRACE --width 1600 --json view.json  # export the viewport (also --csv)
    tb-gpuinsight timeline RUN_DIR --cycle -1                 # every rank's lanes, busy / idle per rank's GPU
"""
from __future__ import annotations

import csv
import json
import os
from typing import List, Union

from ..analysis.timeline import index as tl
from ..analysis.timeline.stack import Stack
from ..errors import GpuInsightError
from ..terminal import atomic_file


def register(sub) -> None:
    """Add the `timeline` subcommand."""
    p = sub.add_parser("timeline", help="timeline lanes, busy/idle over a range; export a viewport as JSON or CSV")
    p.add_argument("trace", help="a Kineto trace (.json or .json.gz), or a run directory of one trace per rank")
    p.add_argument("--cycle", type=int, default=-1, help="run directory: the n-th span of every rank (-1: latest)")
    p.add_argument("--t0", type=float, default=None, help="range start, us from the trace's first event (default 0)")
    p.add_argument("--t1", type=float, default=None, help="range end, us from the trace's first event (default end)")
    p.add_argument("--width", type=int, default=1000, help="pixels of the viewport: sets the level of detail")
    p.add_argument("--lanes", default="", help="comma-separated lane ids (default: all)")
    p.add_argument("--json", metavar="OUT", help="write the viewport (events, per-pixel bins, steps, idle) as JSON")
    p.add_argument("--csv", metavar="OUT", help="write the viewport as CSV, one row per event or run of bins")
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight timeline`."""
    from .. import timeline_index, timeline_ranks

    index = timeline_ranks(args.trace, args.cycle) if os.path.isdir(args.trace) else timeline_index(args.trace)
    if args.t0 is None and args.t1 is None and not index.duration_us > 0:
        raise GpuInsightError(f"{args.trace}: no timed events to show (the trace spans no time)")
    t0 = 0.0 if args.t0 is None else args.t0
    t1 = index.duration_us if args.t1 is None else args.t1
    lanes = [int(x) for x in args.lanes.split(",") if x] or None
    if isinstance(index, Stack):
        view = index.viewport(t0, t1, args.width, lanes)
    else:
        view = tl.viewport(index, t0, t1, args.width, lanes)
    for line in describe(index, t0, t1):
        print(line)
    if args.json:
        with atomic_file(args.json, "w", encoding="utf-8") as f:
            json.dump({"names": index.names, "classes": list(tl.CLASSES), "lanes": index.lanes, **view}, f,
                      separators=(",", ":"))
    if args.csv:
        with atomic_file(args.csv, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=tl.ROW_FIELDS)
            writer.writeheader()
            writer.writerows(tl.rows(index, view))
    return 0


def describe(index: Union[tl.TimelineIndex, Stack], t0: float, t1: float) -> List[str]:
    """Human lines: the range, each GPU's busy and idle time by class, each lane's busy time."""
    found = index.breakdown(t0, t1) if isinstance(index, Stack) else tl.breakdown(index, t0, t1)
    lines = [f"range     {t0:,.1f} .. {t1:,.1f} us ({t1 - t0:,.1f} us) of {index.duration_us:,.1f} us; "
             f"{_count(index.event_count, 'event')} in {_count(len(found['lanes']), 'lane')}; "
             f"{_count(len(index.steps), 'profiler step')}"]
    for dev in found["devices"]:
        share = dev["busy_us"] / (t1 - t0)
        lines.append(f"{dev['label']:<28} busy {dev['busy_us']:>14,.1f} us ({share:6.1%})  "
                     f"idle {dev['idle_us']:>14,.1f} us")
        for cls, us in sorted(dev["classes"].items(), key=lambda kv: -kv[1]):
            lines.append(f"    {cls:<24}{us:>14,.1f} us")
    for lane in found["lanes"]:
        lines.append(f"  lane {lane['id']:>3}  {lane['label']:<40} busy {lane['busy_us']:>14,.1f} us")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
