"""`tb-gpuinsight` command line: inspect traces and logdirs, analyse kernel efficiency, augment and diff traces.

Every failure the user can cause ends with one line on stderr and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence

from . import logdir as logdir_mod
from .errors import GpuInsightError
from .progress import terminal_progress

EXIT_BAD_INPUT = 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return args.func(args) or 0
    except GpuInsightError as exc:
        print(f"tb-gpuinsight: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into `head`
        return 0
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-gpuinsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(title="commands")
    for register in COMMANDS:
        register(sub)
    return parser


# ------------------------------------------------------------------------------------------------------- info

def _register_info(sub) -> None:
    p = sub.add_parser("info", help="what a trace file is: kind, era, devices, event counts, time span")
    p.add_argument("path")
    p.add_argument("--extra-arg", action="append", default=[], metavar="NAME",
                   help="also decode this event arg (repeatable), reported as present/absent")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args) -> int:
    from . import load

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
    labels = {logdir_mod.ET: "Execution Trace", logdir_mod.TENSOR_TRACE: "tensor.trace"}
    label = labels.get(sniffed.kind)
    if label is None:
        raise GpuInsightError(f"{path}: not a trace file ({sniffed.reason})")
    print(f"file      {path}")
    print(f"kind      {label}")
    return 0


def describe_trace(trace) -> List[str]:
    """Human lines describing a loaded Kineto trace (used by `info`)."""
    m = trace.meta
    lines = [
        f"file      {m.path}",
        f"kind      Kineto trace, {_mb(m.json_bytes)} of JSON ({_mb(m.file_bytes)} on disk)",
        f"era       {m.era}; vendor {m.vendor}",
    ]
    if m.distributed:
        lines.append(f"rank      {m.distributed.get('rank', '?')} of {m.distributed.get('world_size', '?')}"
                     f" ({m.distributed.get('backend', '?')})")
    lines.append(f"span      {_span(m)}")
    if trace.devices:
        for d in trace.devices:
            mem = d.get("totalGlobalMem")
            memtxt = f", {mem / 2**30:.0f} GiB" if isinstance(mem, (int, float)) else ""
            lines.append(f"device    {d.get('id')}: {d.get('name') or '(no name)'}"
                         f"{_sm(d)}{memtxt}")
    else:
        lines.append("device    none listed (CPU-only run or a trace without deviceProperties)")
    lines.append(f"events    {m.event_count:,}" + (f" ({m.malformed_events} malformed, skipped)"
                                                   if m.malformed_events else ""))
    for cat, count in m.category_counts.items():
        lines.append(f"  {cat:<24}{count:>10,}")
    tables = ", ".join(f"{name} {len(t):,}" for name, t in trace.tables().items())
    lines.append(f"tables    {tables}")
    lines.append(f"shapes    {'yes' if m.record_shapes else 'no'} ({len(trace.shapes):,} distinct signatures)")
    lines.append("ET links  " + _et_links(m))
    for name in m.extra_args:
        present = sum(int(sum(v is not None for v in t[name])) for t in trace.tables().values())
        lines.append(f"arg       {name!r}: on {present:,} events")
    return lines


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
        when = datetime.datetime.fromtimestamp(start / 1e6, tz=datetime.timezone.utc).strftime(
            " from %Y-%m-%d %H:%M:%S UTC")
    return f"{m.duration_us / 1000:,.3f} ms{when}"


def _mb(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------------------- ls

def _register_ls(sub) -> None:
    p = sub.add_parser("ls", help="runs, workers, spans and companion files of a logdir")
    p.add_argument("logdir")
    p.set_defaults(func=_cmd_ls)


def _cmd_ls(args) -> int:
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
            lines.append(f"    {span.name}  {_mb(span.trace.size)}")
            for companion in span.execution_traces + span.tensor_traces:
                lines.append(f"      + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for companion in run.execution_traces + run.tensor_traces:
        lines.append(f"  + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for bad in run.unreadable:
        lines.append(f"  ! {os.path.basename(bad.path)}: {bad.reason}")
    return lines


def _kind_label(kind: str) -> str:
    return {logdir_mod.ET: "Execution Trace", logdir_mod.TENSOR_TRACE: "tensor.trace"}.get(kind, kind)


COMMANDS: List[Callable] = [_register_info, _register_ls]

if __name__ == "__main__":
    sys.exit(main())
