"""`tb-gpuinsight memory SNAPSHOT [B]`: the memory snapshot part of the `memory` command (see commands/memory.py).

    tb-gpuinsight memory snapshot.pickle              # peak, what holds it by source line, fragmentation, OOMs
    tb-gpuinsight memory runs/exp1                    # the snapshot (*.pickle[.gz]) of a run directory
    tb-gpuinsight memory snapshot.pickle --format json
    tb-gpuinsight memory a.pickle b.pickle            # peak and per-source-line change at the peak
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional

from ..analysis.memory.snapshot_read import looks_like_snapshot
from ..errors import ConfigError
from ..logdir import memory_snapshots
from ..trace.text import safe_text
from .text import binary_size as _size, print_csv, render_table

FRAME_COLUMNS = (("source line", "frame", 50), ("function", "function", 24), ("size", "size", 12),
                 ("allocs", "count", 7), ("largest", "largest", 12))
CHANGE_COLUMNS = (("source line", "frame", 50), ("function", "function", 24), ("A", "a", 12), ("B", "b", 12),
                  ("change", "change", 13))
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def snapshot_path(path: str) -> Optional[str]:
    """The snapshot `path` names: itself when it is one (by name, or a pickle's first byte), the first
    `*.pickle[.gz]` of a directory; None otherwise."""
    if os.path.isdir(path):
        found = memory_snapshots(path)
        return found[0] if found else None
    if looks_like_snapshot(path):
        return path
    if not os.path.isfile(path):  # a FIFO or a device: opening one to sniff it would wait for a writer
        return None
    try:
        with open(path, "rb") as f:
            return path if f.read(1) == b"\x80" else None
    except OSError:
        return None


def run(args) -> int:
    """Print one snapshot's report, or two compared."""
    from .. import compare_memory_snapshots, memory_snapshot

    paths = [_resolve(p) for p in [args.trace] + ([args.other] if args.other else [])]
    device = _device(args.device)
    if len(paths) == 2:
        result = compare_memory_snapshots(paths[0], paths[1], device=device)
        if args.format == "json":
            print(json.dumps(result, indent=1))
        elif args.format == "csv":
            print_csv(result["at_peak"])
        else:
            _print_compare(result, args.top)
        return 0
    rep = memory_snapshot(paths[0], device=device)
    if args.format == "json":
        print(json.dumps(rep, indent=1))
    elif args.format == "csv":
        print_csv([{k: v for k, v in r.items() if k != "stack"} for r in rep["at_peak"]])
    else:
        _print_report(rep, args.top)
    return 0


def _resolve(path: str) -> str:
    found = snapshot_path(path)
    if found is None:
        raise ConfigError(f"{path}: no memory snapshot (*.pickle or *.pickle.gz) here")
    return found


def _device(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    digits = text.rpartition(":")[2]
    if not digits.isdigit():
        raise ConfigError(f"--device {text!r}: a snapshot's devices are numbers (0, cuda:1, ...)")
    return int(digits)


def _print_report(rep: Dict[str, Any], top: int) -> None:
    if rep.get("device") is None:
        print(f"note: {rep.get('message')}")
        return
    frag = rep["fragmentation"]
    print(f"== {_clean(rep['path'])}: device {rep['device']} of {rep['devices']}, {rep['events']:,} history events "
          f"({', '.join(f'{k} {v:,}' for k, v in rep['actions'].items()) or 'none'})")
    print(f"peak allocated  {_size(rep['peak_allocated_bytes'])} at {_offset(rep, rep['peak_time_us'])} "
          f"(reserved then {_size(rep['reserved_at_peak_bytes'])}); peak reserved {_size(rep['peak_reserved_bytes'])}")
    print(f"at the dump     allocated {_size(rep['allocated_at_dump_bytes'])}, "
          f"reserved {_size(rep['reserved_at_dump_bytes'])}")
    before = rep["before_history"]
    if before["count"]:
        print(f"before history  {before['count']:,} blocks, {_size(before['bytes'])} ({before['note']})")
    for when in ("at_peak", "at_dump"):
        f = frag[when]
        print(f"fragmentation   {when.replace('_', ' ')}: free in segments {_size(f['free_bytes'])} of "
              f"{_size(f['reserved_bytes'])} reserved, largest free block {_size(f['largest_free_block_bytes'])}, "
              f"{f['segments']:,} segments")
    _table("alive at the peak, by source line", rep["at_peak"], top)
    _table("alive at the peak, by source file", rep["at_peak_by_file"], top)
    print("-- alive at the peak, by size class")
    for row in rep["at_peak_by_size"]:
        print(f"  {row['size_class']:<24} {_size(row['bytes']):>12}  {row['count']:,} allocations")
    for oom in rep["ooms"]:
        print(f"-- OOM at {_offset(rep, oom['time_us'])}: requested {_size(oom['requested_bytes'])}, CUDA free "
              f"{_size(oom['device_free_bytes'])}, allocated {_size(oom['allocated_bytes'])}, "
              f"reserved {_size(oom['reserved_bytes'])}")
        for line in oom["stack"][:3]:
            print(f"     {_clean(line)}")
        _table("alive at this OOM", oom["alive"], top)
    _table("never freed in the history (leak suspects)", rep["leak_suspects"], top)


def _table(title: str, rows: List[Dict[str, Any]], top: int) -> None:
    shown = rows if top <= 0 else rows[:top]
    print(f"-- {title} ({len(rows):,} lines)")
    display = [{"frame": _short(r["frame"]), "function": _clean(r["function"]), "size": _size(r["bytes"]),
                "count": r["count"], "largest": _size(r["largest_bytes"])} for r in shown]
    for line in render_table(display, FRAME_COLUMNS):
        print(line)


def _print_compare(result: Dict[str, Any], top: int) -> None:
    print(f"== A {_clean(result['a'])} (device {result['a_device']})  vs  B {_clean(result['b'])} "
          f"(device {result['b_device']})")
    for key in ("peak_allocated_bytes", "peak_reserved_bytes", "allocated_at_dump_bytes"):
        v = result[key]
        print(f"{key.replace('_bytes', '').replace('_', ' '):<16} A {_size(v['a'])}  B {_size(v['b'])}  "
              f"change {_signed(v['change'])}")
    rows = result["at_peak"] if top <= 0 else result["at_peak"][:top]
    print(f"-- alive at the peak, change by source line ({len(result['at_peak']):,} lines)")
    display = [{"frame": _short(r["frame"]), "function": _clean(r["function"]), "a": _size(r["a_bytes"]),
                "b": _size(r["b_bytes"]), "change": _signed(r["change_bytes"])} for r in rows]
    for line in render_table(display, CHANGE_COLUMNS):
        print(line)


def _short(frame: str) -> str:
    """A source line with the last three parts of its path (the JSON output keeps the whole path)."""
    return _clean("/".join(re.split(r"[\\/]", frame)[-3:]))


def _clean(text: str) -> str:
    """Trace text made safe for a terminal: no control characters, no unencodable code points."""
    return _CONTROL.sub("?", safe_text(str(text)))


def _offset(rep: Dict[str, Any], t: Optional[float]) -> str:
    if t is None or rep.get("start_us") is None:
        return "an unknown time"
    return f"{(t - rep['start_us']) / 1e3:,.3f} ms"


def _signed(value: Optional[int]) -> str:
    return "?" if value is None else ("+" if value > 0 else "") + _size(value)
