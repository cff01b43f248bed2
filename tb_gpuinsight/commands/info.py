"""`tb-gpuinsight info TRACE` and `tb-gpuinsight ls LOGDIR`: what a trace file is, and what a logdir holds.

    tb-gpuinsight info TRACE          # kind, era, devices, event counts, time span, fields the reader coerced
    tb-gpuinsight ls LOGDIR           # runs, workers, spans and companion files
"""
from __future__ import annotations

import datetime
import os
from typing import Dict, List

from .. import logdir as logdir_mod
from ..errors import GpuInsightError
from ..progress import terminal_progress
from ..trace.text import safe_text
from .text import size

_KIND_LABELS = {logdir_mod.ET: "Execution Trace", logdir_mod.TENSOR_TRACE: "tensor.trace"}


def register(sub) -> None:
    """Add the `info` and `ls` subcommands."""
    p = sub.add_parser("info", help="what a trace file is: kind, era, devices, event counts, time span")
    p.add_argument("path", help="a Kineto trace, Execution Trace or tensor.trace file")
    p.add_argument("--extra-arg", action="append", default=[], metavar="NAME",
                   help="also decode this event arg (repeatable), reported as present/absent")
    p.set_defaults(func=info)
    p = sub.add_parser("ls", help="runs, workers, spans and companion files of a logdir")
    p.add_argument("logdir", help="logdir path or URL (s3://bucket/prefix, gs://...)")
    p.set_defaults(func=ls)


# ------------------------------------------------------------------------------------------------------- info

def info(args) -> int:
    """Entry of `tb-gpuinsight info`."""
    from .. import load

    sniffed = logdir_mod.sniff(args.path)
    if sniffed.kind == logdir_mod.UNREADABLE:
        raise GpuInsightError(f"{args.path}: {sniffed.reason}")
    if sniffed.kind != logdir_mod.KINETO:
        return _info_other(args.path, sniffed)
    trace = load(args.path, extra_args=args.extra_arg, progress=terminal_progress(os.path.basename(args.path)))
    for line in describe_trace(trace):
        print(line)
    return 0


def _info_other(path: str, sniffed: logdir_mod.Sniffed) -> int:
    label = _KIND_LABELS.get(sniffed.kind)
    if label is None:
        raise GpuInsightError(f"{path}: not a trace file ({sniffed.reason})")
    print(f"file      {path}")
    print(f"kind      {label}")
    if sniffed.kind == logdir_mod.ET:
        from ..trace.et import load_et

        et = load_et(path)
        print(f"schema    {et.schema}")
        print(f"nodes     {len(et):,}" + (f" ({et.dropped_nodes:,} unusable, skipped)" if et.dropped_nodes else ""))
        for line in _field_lines("coerced", et.coerced_fields) + _field_lines("dropped", et.dropped_fields):
            print(line)
    return 0


def describe_trace(trace) -> List[str]:
    """Human lines describing a loaded Kineto trace (used by `info`)."""
    m = trace.meta
    lines = [
        f"file      {m.path}",
        f"kind      Kineto trace, {size(m.json_bytes)} of JSON ({size(m.file_bytes)} on disk)",
        f"era       {m.era}; vendor {m.vendor}",
    ]
    if m.distributed:
        lines.append(f"rank      {_rank(m.distributed)}")
    lines.append(f"span      {_span(m)}")
    lines += _device_lines(trace.devices, trace.tables())
    lines.append(f"events    {m.event_count:,}" + (f" ({m.malformed_events} malformed, skipped)"
                                                   if m.malformed_events else ""))
    for cat, count in m.category_counts.items():
        lines.append(f"  {cat:<24}{count:>10,}")
    lines += _field_lines("coerced", m.coerced_fields) + _field_lines("dropped", m.dropped_fields)
    tables = ", ".join(f"{name} {len(t):,}" for name, t in trace.tables().items())
    lines.append(f"tables    {tables}")
    lines.append(f"shapes    {'yes' if m.record_shapes else 'no'} ({len(trace.shapes):,} distinct signatures)")
    lines.append("ET links  " + _et_links(m))
    for name in m.extra_args:
        present = sum(int(sum(v is not None for v in t[name])) for t in trace.tables().values())
        lines.append(f"arg       {name!r}: on {present:,} events")
    return lines


def _rank(info: Dict) -> str:
    """ "34 of 300 (gloo)"; what distributedInfo leaves out is said, not shown as "?" (old traces give the rank
    alone)."""
    text = str(info.get("rank", "unknown"))
    text += f" of {info['world_size']}" if info.get("world_size") else ""
    text += f" ({info['backend']})" if info.get("backend") else ""
    missing = [what for what, key in (("world size", "world_size"), ("backend", "backend")) if not info.get(key)]
    return text + (f" ({' and '.join(missing)} not recorded)" if missing else "")


def _device_lines(devices: List[Dict], tables: Dict) -> List[str]:
    if not devices:
        used = sorted({int(d) for name in ("kernels", "memops") if name in tables for d in tables[name]["device"]
                       if d >= 0})
        if used:  # GPU work without deviceProperties (traces before PyTorch 1.10 or so)
            return [f"device    none listed (no deviceProperties); GPU activity on device "
                    f"{', '.join(map(str, used))}"]
        return ["device    none listed, and no GPU activity (a CPU-only run)"]
    lines = []
    for d in devices:
        mem = d.get("totalGlobalMem")
        memtxt = f", {mem / 2**30:.0f} GiB" if isinstance(mem, (int, float)) else ""
        lines.append(f"device    {d.get('id')}: {d.get('name') or '(no name)'}{_sm(d)}{memtxt}")
    return lines


def _field_lines(what: str, counts: Dict[str, int]) -> List[str]:
    """Values the reader read after a conversion, or left out, with how many and why (most frequent first)."""
    if not counts:
        return []
    lines = [f"fields    {sum(counts.values()):,} {what}" + (" (absent for every analysis)" if what == "dropped" else "")]
    return lines + [f"  {count:>8,}  {safe_text(why)[:200]}" for why, count in counts.items()]


def _et_links(m) -> str:
    if m.has_record_function_ids:
        return "Record function id present (links to ET rf_id)"
    if m.has_external_ids:
        return "External id only (ET links by External id / name order)"
    return "none"


def _sm(d: Dict) -> str:
    sms = d.get("numSms")
    major = d.get("computeMajor")
    parts = []
    if sms:
        parts.append(f"{sms} SMs")
    if major is not None:
        parts.append(f"compute {major}.{d.get('computeMinor', 0)}")
    return f" ({', '.join(parts)})" if parts else ""


def _span(m) -> str:
    if m.start_us is None:
        return "no timed events"
    start = m.start_us + (m.base_time_ns or 0) / 1000
    when = ""
    if start > 1e15:  # absolute microseconds since the epoch
        try:
            when = datetime.datetime.fromtimestamp(start / 1e6, tz=datetime.timezone.utc).strftime(
                " from %Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):  # beyond any calendar date: a corrupt timestamp
            when = f" from {start:.6g} us after the epoch (not a valid date)"
    return f"{m.duration_us / 1000:,.3f} ms{when}"


# --------------------------------------------------------------------------------------------------------- ls

def ls(args) -> int:
    """Entry of `tb-gpuinsight ls`."""
    runs = logdir_mod.discover(args.logdir)
    if not runs:
        print(f"no traces under {args.logdir}")
        return 0
    for run in runs:
        for line in describe_run(run):
            print(line)
    return 0


def describe_run(run: logdir_mod.Run) -> List[str]:
    """Human lines describing one discovered run (used by `ls`)."""
    lines = [f"run {run.name}"]
    for worker in sorted(run.workers):
        spans = run.workers[worker]
        lines.append(f"  worker {worker}: {len(spans)} span{'s' if len(spans) != 1 else ''}")
        for span in spans:
            lines.append(f"    {span.name}  {size(span.trace.size)}")
            for companion in span.execution_traces + span.tensor_traces:
                lines.append(f"      + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for companion in run.execution_traces + run.tensor_traces:
        lines.append(f"  + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for capture in run.captures:
        lines.append(f"  + {logdir_mod.capture_label(capture.path)} (graph capture)")
    for bad in run.unreadable:
        lines.append(f"  ! {os.path.basename(bad.path)}: {bad.reason}")
    return lines


def _kind_label(kind: str) -> str:
    return _KIND_LABELS.get(kind, kind)
