"""`tb-gpuinsight critical-path TRACE|RUN`: the critical path of every step, by cause, and its ordered segments.

    tb-gpuinsight critical-path TRACE                  # per-step cause table, then the path's 20 longest segments
    tb-gpuinsight critical-path TRACE --step 12 --top 50
    tb-gpuinsight critical-path RUN_DIR [--worker W]   # every span of every (or one) worker
    tb-gpuinsight critical-path RUN_DIR --ranks        # every rank's path side by side: the longest, and why
    tb-gpuinsight critical-path TRACE --json           # as the plugin's /critical_path route answers
"""
from __future__ import annotations

import json
from typing import Any, List

import numpy as np

from ..analysis.graph.critical_path.path import CriticalPath, CriticalPathReport
from ..analysis.graph.critical_path.deps import CAUSES, NO_GPU
from ..errors import GpuInsightError
from .text import elide


def register(sub) -> None:
    """Add the `critical-path` subcommand."""
    p = sub.add_parser("critical-path", help="critical path of each step over CPU ops, launches, kernels, "
                                             "syncs and collectives, by cause")
    p.add_argument("path", help="a Kineto trace, or a run directory")
    p.add_argument("--step", help="only this step (its number, or a label such as ProfilerStep#12)")
    p.add_argument("--top", type=int, default=20, metavar="K",
                   help="list the K longest segments of each step, in path order (default 20; 0: all)")
    p.add_argument("--worker", help="only this worker of a run directory")
    p.add_argument("--ranks", action="store_true", help="compare the ranks of a run directory")
    p.add_argument("--json", action="store_true", help="print JSON (the plugin's answer) instead of tables")
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight critical-path`."""
    from .. import critical_path, critical_path_ranks

    if args.ranks:
        frame = critical_path_ranks(args.path)
        if args.json:
            print(json.dumps({"ranks": frame.to_dict("records"), **frame.attrs}, indent=1, default=str))
        else:
            print("\n".join(render_ranks(frame)))
        return 0
    report = critical_path(args.path, step=args.step, worker=args.worker)
    if args.step is not None and report.paths and all(cp.step_index(str(args.step)) is None
                                                      for _, _, cp in report.paths):
        known = sorted({s["step"] for _, _, cp in report.paths for s in cp.steps})
        shown = ", ".join(known[:8]) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
        raise GpuInsightError(f"no step {args.step!r} in {args.path}; its steps: {shown or 'none'}")
    if args.json:
        print(json.dumps(report.to_json(args.step, args.top or None), indent=1))
        return 0
    print("\n".join(render(report, args.step, args.top)))
    return 0


def _ms(us: float) -> str:
    return f"{us / 1000:,.3f}"


def render(report: CriticalPathReport, step: Any = None, top: int = 20) -> List[str]:
    """The text report: per trace, one row per step (wall, path, % of the step per cause), then each step's
    longest segments in path order."""
    out: List[str] = []
    for worker, span, cp in report.paths:
        out.append(f"== {worker + ' · ' if worker else ''}{span}  ({_source(cp)})")
        chosen = range(len(cp.steps)) if step is None else [i for i in [cp.step_index(str(step))] if i is not None]
        if not chosen:
            out.append("   no such step" if step is not None else "   no timed events")
            continue
        out.append(f"   {'step':<20}{'wall ms':>11}{'path ms':>11}" + "".join(f"{c:>15}" for c in CAUSES))
        for i in chosen:
            s = cp.steps[i]
            wall = s["wall_us"] or 1.0
            out.append(f"   {elide(s['step'], 20):<20}{_ms(s['wall_us']):>11}{_ms(s['path_us']):>11}"
                       + "".join(f"{100 * s['causes'][c] / wall:>14.1f}%" for c in CAUSES))
        for i in chosen:
            out.extend(_segments(cp, i, top))
    return out


def _source(cp: CriticalPath) -> str:
    """How the path was built: "Kineto only; cross-stream waits: 3 (cuda_sync events), host syncs: 2 of 5 waited
    on GPU work"."""
    notes = cp.notes
    et = "with its Execution Trace" if cp.has_et else "Kineto only"
    if notes.get("stream_wait_source", NO_GPU) == NO_GPU:  # a CPU-only trace: the graph has no stream
        return f"{et}; no GPU activity: no cross-stream waits or host syncs"
    source = notes["stream_wait_source"]
    waits = source if source.startswith("none") else f"{notes.get('stream_waits', 0)} ({source})"
    syncs = notes.get("host_syncs", 0)
    return (f"{et}; cross-stream waits: {waits}, host syncs: "
            + (f"{notes.get('host_syncs_waiting', 0)} of {syncs} waited on GPU work" if syncs else "none"))


def _segments(cp: CriticalPath, step: int, top: int) -> List[str]:
    rows = np.flatnonzero(cp.seg["step"] == step)
    if top > 0:  # the longest `top` (the first of equals), in path order: only those are made into rows
        rows = np.sort(rows[np.argsort(-cp.seg["dur"][rows], kind="stable")[:top]])
    label = cp.steps[step]["step"]
    count = int(np.count_nonzero(cp.seg["step"] == step))
    out = [f"   {label}: {count} segment(s)" + (f", the {len(rows)} longest in path order:" if top else ":")]
    for s in cp.segment_rows(rows):
        where = f"stream {s['stream']}" if s["stream"] is not None else \
            f"thread {s['thread']}" if s["thread"] is not None else ""
        out.append(f"     {s['start_us'] / 1000:>10.3f} ms  {_ms(s['dur_us']):>9} ms {100 * s['share']:5.1f}%  "
                   f"{s['cause']:<13} {s['kind']:<11} {where:<14} {elide(s['display_name'], 100)}")
    return out


def render_ranks(frame) -> List[str]:
    """One row per rank: wall, path, % of the wall per cause, the longest segment; then why."""
    out = [f"{'worker':<24}{'rank':>5}{'wall ms':>11}{'path ms':>11}" + "".join(f"{c:>15}" for c in CAUSES)
           + "  longest segment"]
    for r in frame.to_dict("records"):
        wall = r["wall_us"] or 1.0
        out.append(f"{elide(str(r['worker']), 24):<24}{r['rank']:>5}{_ms(r['wall_us']):>11}{_ms(r['path_us']):>11}"
                   + "".join(f"{100 * r[c + '_us'] / wall:>14.1f}%" for c in CAUSES)
                   + f"  {(r['top_name'] or '')[:50]} ({_ms(r['top_dur_us'] or 0)} ms)")
    out.append("")
    out.append(str(frame.attrs.get("why", "")))
    return out
