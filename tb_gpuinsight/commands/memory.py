"""`tb-gpuinsight memory TRACE`: peak memory per device, what was live at the peak, allocations by op.

    tb-gpuinsight memory TRACE                        # per device: peak, live at peak, top ops by bytes allocated
    tb-gpuinsight memory TRACE --format json          # everything (summary, by op, live at peak, never freed)
    tb-gpuinsight memory TRACE --format csv --what ops   # one table as CSV: ops, live, never-freed or events
    tb-gpuinsight memory SNAPSHOT [B] [--format json]    # a CUDA memory snapshot (.pickle[.gz]) or two compared
                                                         # (commands/memory_snapshot.py)
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional

from ..analysis.memory import events as mem
from .text import binary_size as _size, print_csv, render_table

OP_COLUMNS = (("op", "op", 36), ("input shapes", "shape", 30), ("module", "module", 20), ("allocs", "allocations", 7),
              ("size", "mb", 12), ("max", "max_mb", 11), ("never freed", "never_freed", 11),
              ("mean life ms", "life_ms", 12), ("at peak", "peak_mb", 11))
LIVE_COLUMNS = (("t ms", "t_ms", 10), ("size", "mb", 12), ("op", "op", 36), ("input shapes", "shape", 30),
                ("module", "module", 20), ("life ms", "life_ms", 10))
TABLES = {"ops": "by_op", "live": "live_at_peak", "never-freed": "never_freed", "events": "events"}


def register(sub) -> None:
    """Add the `memory` subcommand."""
    p = sub.add_parser("memory", help="memory per device from profile_memory=True traces: peak, live at peak, by op; "
                                      "or from a CUDA memory snapshot: peak by source line, fragmentation, OOMs")
    p.add_argument("trace", metavar="TRACE", help="a Kineto trace (.json or .json.gz), or a memory snapshot "
                                                  "(.pickle[.gz]) or a run directory holding one")
    p.add_argument("other", metavar="B", nargs="?", help="a second memory snapshot: compare the two")
    p.add_argument("--device", help="only this device (cuda:0, cpu, ...)")
    p.add_argument("--what", choices=tuple(TABLES), default="ops", help="the table written by --format csv")
    p.add_argument("--top", type=int, default=15, help="rows per table in the text output (0 = all)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight memory`."""
    from .. import memory as memory_api
    from . import memory_snapshot

    if args.other or memory_snapshot.snapshot_path(args.trace):
        return memory_snapshot.run(args)
    report = memory_api(args.trace)
    devices = [d for d in report.summary["devices"] if not args.device or d["device"] == args.device]
    if report.summary["message"]:
        print(f"note: {report.summary['message']}", file=sys.stderr)
    if args.device and not devices:  # a mistyped or absent device is an error, as the plugin answers it
        known = ", ".join(d["device"] for d in report.summary["devices"]) or "none (no memory events)"
        print(f"tb-gpuinsight: error: no memory events of device {args.device!r}; devices in this trace: {known}", file=sys.stderr)
        return 2
    frames = {k: _frame(getattr(report, k), args.device) for k in TABLES.values()}
    if args.format == "json":
        print(json.dumps({"path": args.trace, "summary": {**report.summary, "devices": devices},
                          **{k: _records(v) for k, v in frames.items() if k != "events"}}, indent=1))
    elif args.format == "csv":
        print_csv(_records(frames[TABLES[args.what]]))
    else:
        tables = {k: _by_device(frames[k]) for k in ("by_op", "live_at_peak")}  # split once, not once per device
        for d in devices:
            _print_device(d, tables, args.top, report.summary["start_us"])
    return 0


def _frame(df, device):
    return df[df["device"] == device] if device and len(df) else df


def _by_device(df) -> Dict[str, List[Dict[str, Any]]]:
    """A table's records by device, made once (a frame per device costs a trace of thousands of devices minutes)."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for r in _records(df):
        out.setdefault(r["device"], []).append(r)
    return out


def _records(df) -> List[Dict[str, Any]]:
    return [{k: (None if v != v else v) for k, v in r.items()} for r in df.to_dict("records")] if len(df) else []


def _print_device(d: Dict[str, Any], frames, top: int, start_us: float) -> None:
    pk = d["peak"] or {}
    print(f"== {d['device']}: {d['events']:,} events ({d['allocations']:,} allocations, {d['frees']:,} frees)")
    print(f"peak allocated  {_size(pk.get('allocated'))} at {(pk.get('ts', start_us) - start_us) / 1e3:,.3f} ms"
          f" (reserved then {_size(pk.get('reserved'))}); peak reserved {_size(d['peak_reserved'])}")
    if pk.get("before_span") is not None:
        print(f"live at peak    {pk['live_count']:,} allocations, {_size(pk['live_bytes'])}; "
              f"{mem.BEFORE_SPAN} {_size(pk['before_span'])}")
    if d["never_freed"] is not None:
        print(f"never freed     {d['never_freed']:,} allocations, {_size(d['never_freed_bytes'])} (inside the span)")
    print(f"sources         allocated: {d['allocated_source']}; reserved: {d['reserved_source']}; "
          f"live: {d['live_source']}")
    _print_rows(frames["by_op"].get(d["device"]), "bytes", OP_COLUMNS, "allocations by op", top)
    _print_rows(frames["live_at_peak"].get(d["device"]), "bytes", LIVE_COLUMNS, "live at the peak", top)
    print()


def _print_rows(records: Optional[List[Dict[str, Any]]], sort: str, columns, title: str, top: int) -> None:
    if not records:
        return
    part = sorted(records, key=lambda r: -(r[sort] or 0))
    rows = [_display(r) for r in (part if top <= 0 else part[:top])]
    print(f"-- {title} ({len(part):,})")
    for line in render_table(rows, columns):
        print(line)


def _display(r: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: (v if v != "" else None) for k, v in r.items()}
    for src, dst in (("bytes", "mb"), ("max_bytes", "max_mb"), ("live_at_peak_bytes", "peak_mb")):
        if src in r:
            out[dst] = _size(r[src])
    for src in ("mean_lifetime_us", "lifetime_us"):
        if src in r:
            out["life_ms"] = None if r[src] is None else f"{r[src] / 1000:,.3f}"
    if r.get("t_ms") is not None:
        out["t_ms"] = f"{r['t_ms']:,.3f}"
    return out
