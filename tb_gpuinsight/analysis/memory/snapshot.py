"""The memory snapshot view: per device, allocated and reserved bytes over the recorded history, the peak and what
holds it by source line (the first frame of the user's code) and by size class, fragmentation at the peak and at
the dump, OOMs with what was alive and the request that failed, and allocations never freed (leak suspects).

`report(snap, device)` is the JSON-ready answer the CLI, the API and the `/memory_snapshot` route all give;
`compare(a, b)` puts two reports side by side (peak and per-source-line change at the peak).
Sources of each figure: allocated = replay of alloc / free_completed; reserved = the dump's segments with the
history's segment events undone; both said in `sources`.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .snapshot_model import ACTIONS, INACTIVE, NO_STACK, OOM, OTHER_ACTION, Snapshot
from .snapshot_replay import BEFORE, Replay, replay

CURVE_POINTS = 2000
TOP_ROWS = 50
STACK_FRAMES = 24
BEFORE_HISTORY = "(allocated before the recorded history)"
NO_FRAME = "(no Python frame recorded)"
SIZE_CLASSES = ((1 << 20, "<= 1 MiB (small pool)"), (10 << 20, "1-10 MiB"), (100 << 20, "10-100 MiB"),
                (1 << 30, "100 MiB-1 GiB"), (None, "> 1 GiB"))
SOURCES = {"allocated": "replay of the history's alloc / free_completed events; blocks alive at the dump that the "
                        "history never allocated are counted from its start",
           "reserved": "the dump's segments, with the history's segment_alloc / segment_free (map / unmap) undone"}


def report(snap: Snapshot, device: Optional[int] = None) -> Dict[str, Any]:
    """The view of one device (default: the device with the highest allocated peak)."""
    devices = snap.devices
    if not devices:
        return {"path": snap.path, "devices": [], "device": None, "message": "the snapshot holds no device"}
    replays = {d: replay(snap, d) for d in ([device] if device is not None else devices)}
    r = max(replays.values(), key=lambda x: int(x.allocated.max()))
    return {"path": snap.path, "devices": devices, **device_report(snap, r)}


def device_report(snap: Snapshot, r: Replay) -> Dict[str, Any]:
    h = r.history
    peak_point = int(np.argmax(r.allocated))
    peak_event = peak_point - 1  # BEFORE when the peak is the state before the first event
    alive = r.alive(peak_event)
    before = r.start == BEFORE
    times = h.time_us[np.isfinite(h.time_us)]
    t0 = float(times[0]) if len(times) else None
    counts = np.bincount(h.action, minlength=OTHER_ACTION + 1)
    return {
        "device": r.device,
        "events": len(h),
        "actions": {name: int(counts[i]) for i, name in enumerate(ACTIONS) if counts[i]},
        "start_us": t0,
        "end_us": float(times[-1]) if len(times) else None,
        "peak_allocated_bytes": int(r.allocated[peak_point]),
        "peak_time_us": _time(h, peak_event),
        "peak_event": peak_event,
        "reserved_at_peak_bytes": int(r.reserved[peak_point]),
        "peak_reserved_bytes": int(r.reserved.max()),
        "allocated_at_dump_bytes": r.allocated_at_dump,
        "reserved_at_dump_bytes": r.reserved_at_dump,
        "before_history": {"bytes": int(r.size[before].sum()), "count": int(before.sum()),
                           "note": "blocks alive at the dump that the history never allocated: counted as allocated "
                                   "from the start of the history"},
        "at_peak": by_frame(snap, r, alive)[:TOP_ROWS],
        "at_peak_by_file": by_frame(snap, r, alive, _file_key)[:TOP_ROWS],
        "at_peak_by_size": by_size(r.size[alive]),
        "fragmentation": {"at_peak": fragmentation_at(snap, r, peak_event), "at_dump": fragmentation_at_dump(snap, r)},
        "ooms": ooms(snap, r),
        "leak_suspects": by_frame(snap, r, (r.end == len(h)) & ~before)[:TOP_ROWS],
        "curve": curve(r),
        "sources": SOURCES,
    }


def by_frame(snap: Snapshot, r: Replay, mask: np.ndarray, key=None) -> List[Dict[str, Any]]:
    """Allocations of `mask` grouped by the first user frame of their stack (or by `key(snap, stack)`: the
    source file with `_file_key`), largest total first; each row with the stack of its largest allocation."""
    key = key or _frame_key
    idx = np.nonzero(mask)[0]
    if not len(idx):
        return []
    stacks = r.stack[idx]
    before = (r.start[idx] == BEFORE) & (stacks == NO_STACK)
    stacks = np.where(before, -1, stacks)  # -1: no stack and alive before the history
    uniq, inverse = np.unique(stacks, return_inverse=True)
    keys: Dict[Tuple[str, str], int] = {}
    group_of_stack = np.array([keys.setdefault(key(snap, int(s)), len(keys)) for s in uniq.tolist()])
    group = group_of_stack[inverse]
    sizes = r.size[idx]
    total = np.zeros(len(keys), dtype=np.int64)
    np.add.at(total, group, sizes)
    counts = np.bincount(group, minlength=len(keys))
    order = np.lexsort((-sizes, group))  # by group, largest first within each
    first = order[np.r_[0, np.nonzero(np.diff(group[order]))[0] + 1]]
    rows = []
    for (where, function), g in keys.items():
        largest = first[g]
        rows.append({"frame": where, "function": function, "bytes": int(total[g]), "count": int(counts[g]),
                     "largest_bytes": int(sizes[largest]), "stack": stack_text(snap, int(r.stack[idx[largest]]))})
    rows.sort(key=lambda row: (-row["bytes"], row["frame"]))
    return rows


def _frame_key(snap: Snapshot, stack: int) -> Tuple[str, str]:
    """(path:line, function) of a stack's first user frame; stack -1: alive before the history, no stack."""
    if stack < 0:
        return (BEFORE_HISTORY, "")
    frame = snap.user_frame(stack)
    return (f"{frame[0]}:{frame[1]}", frame[2]) if frame else (NO_FRAME, "")


def _file_key(snap: Snapshot, stack: int) -> Tuple[str, str]:
    """(source file, "") of a stack's first user frame: the module of the user's code that allocated."""
    where, function = _frame_key(snap, stack)
    return (where.rpartition(":")[0] or where, "") if function else (where, "")


def stack_text(snap: Snapshot, stack: int) -> List[str]:
    """A stack as "file:line function" lines, innermost first (at most STACK_FRAMES)."""
    return [f"{f}:{line} {name}" for f, line, name in snap.stacks[stack][:STACK_FRAMES]]


def by_size(sizes: np.ndarray) -> List[Dict[str, Any]]:
    """Bytes and counts per size class (the allocator's small pool holds blocks up to 1 MiB)."""
    rows, low = [], 0
    for high, label in SIZE_CLASSES:
        pick = (sizes > low) & (sizes <= high) if high is not None else sizes > low
        if low == 0:
            pick |= sizes == 0
        rows.append({"size_class": label, "bytes": int(sizes[pick].sum()), "count": int(pick.sum())})
        low = high
    return rows


def fragmentation_at(snap: Snapshot, r: Replay, event: int) -> Dict[str, Any]:
    """Reserved minus allocated just after `event`, and per segment its largest free range (segment bounds from
    the dump and the history's segment events, allocations from the replay)."""
    segs = r.segments_at(snap, event)
    alive = r.alive(event)
    order = np.argsort(r.addr[alive], kind="stable")
    addr, size = r.addr[alive][order], r.size[alive][order]
    rows = []
    for start, length in segs:
        lo, hi = np.searchsorted(addr, [start, start + length])
        rows.append(_segment_row(start, length, addr[lo:hi] - start, size[lo:hi]))
    return _fragmentation(rows, int(r.allocated[event + 1]), int(r.reserved[event + 1]))


def fragmentation_at_dump(snap: Snapshot, r: Replay) -> Dict[str, Any]:
    """The same at the dump, read from the segments' blocks (allocated in block sizes, as the allocator rounds
    them: at the peak the replay's requested sizes)."""
    b = snap.blocks
    rows = []
    for s in np.nonzero(snap.seg_device == r.device)[0].tolist():
        mine = (b.segment == s) & (b.state != INACTIVE)
        rows.append(_segment_row(int(snap.seg_addr[s]), int(snap.seg_size[s]), b.addr[mine] - snap.seg_addr[s],
                                 b.size[mine]))
    return _fragmentation(rows, int(b.size[(b.state != INACTIVE) & (snap.seg_device[b.segment] == r.device)].sum()),
                          r.reserved_at_dump)


def _segment_row(start: int, length: int, offsets: np.ndarray, sizes: np.ndarray) -> Dict[str, Any]:
    order = np.argsort(offsets, kind="stable")
    offsets, sizes = offsets[order], sizes[order]
    ends = np.maximum.accumulate(offsets + sizes) if len(offsets) else offsets
    edges_lo = np.concatenate(([0], ends))
    edges_hi = np.concatenate((offsets, [length]))
    gaps = np.maximum(edges_hi - edges_lo, 0)
    return {"address": hex(start), "size": length, "allocated": int(sizes.sum()),
            "largest_free": int(gaps.max()) if len(gaps) else length}


def _fragmentation(rows: List[Dict[str, Any]], allocated: int, reserved: int) -> Dict[str, Any]:
    rows.sort(key=lambda row: -(row["size"] - row["allocated"]))
    return {"allocated_bytes": allocated, "reserved_bytes": reserved, "free_bytes": reserved - allocated,
            "segments": len(rows), "largest_free_block_bytes": max((x["largest_free"] for x in rows), default=0),
            "by_segment": rows[:TOP_ROWS]}


def ooms(snap: Snapshot, r: Replay) -> List[Dict[str, Any]]:
    """Each OOM entry: the request that failed, what CUDA still had free, and what was alive then."""
    h = r.history
    out = []
    for i in np.nonzero(h.action == OOM)[0].tolist():
        out.append({"event": i, "time_us": _time(h, i), "requested_bytes": int(h.size[i]),
                    "device_free_bytes": int(h.addr[i]), "allocated_bytes": int(r.allocated[i]),
                    "reserved_bytes": int(r.reserved[i]), "stack": stack_text(snap, int(h.stack[i])),
                    "alive": by_frame(snap, r, r.alive(i - 1))[:10]})
    return out


def curve(r: Replay) -> Dict[str, List]:
    """Allocated and reserved after each event, at most CURVE_POINTS points (the maximum of each bucket, so no
    peak is lost); `t_us` the time of the bucket's first event (the event index where entries carry no time)."""
    h = r.history
    n = len(r.allocated)
    t = np.concatenate(([h.time_us[0] if len(h) else 0.0], h.time_us)) if len(h) else np.zeros(1)
    if not np.isfinite(t).all():
        t = np.arange(n, dtype=np.float64)
    cuts = np.unique(np.linspace(0, n, min(n, CURVE_POINTS) + 1).astype(np.int64)[:-1])
    return {"t_us": t[cuts].tolist(), "allocated": np.maximum.reduceat(r.allocated, cuts).tolist(),
            "reserved": np.maximum.reduceat(r.reserved, cuts).tolist()}


def _time(h, event: int) -> Optional[float]:
    if not len(h):
        return None
    t = float(h.time_us[max(event, 0)])
    return t if t == t else None


EPOCH_US = 1e15  # a time above this (2001 onward, in µs) is on the Unix clock, as the snapshot's `time_us` is


def align_steps(spans: List[Tuple[List[Dict[str, Any]], float]], start_us: Optional[float],
                end_us: Optional[float]) -> Dict[str, Any]:
    """Profiler steps of a run's traces on the snapshot's clock. `spans`: per trace its steps ({name, ts, dur} in
    the trace's µs) and its base time in µs (baseTimeNanoseconds / 1000, 0 when absent). Kineto writes Unix-clock
    µs (with a base time since 2024); the snapshot records Unix-clock µs too, so the steps inside the snapshot's
    history line up with it. `clock` says when they do not, and why."""
    if start_us is None or end_us is None:
        return {"steps": [], "clock": "the snapshot's entries carry no time: nothing to line up"}
    steps = [{"name": st["name"], "t_us": float(st["ts"]) + base, "dur_us": float(st["dur"])}
             for found, base in spans for st in found]
    if not steps:
        return {"steps": [], "clock": "the run's traces have no ProfilerStep ranges to line up"}
    if all(st["t_us"] < EPOCH_US for st in steps):
        return {"steps": [], "clock": "the traces' times are relative and they record no baseTimeNanoseconds: "
                                      "no common clock with the snapshot"}
    inside = [st for st in steps if st["t_us"] < end_us and st["t_us"] + st["dur_us"] > start_us]
    if not inside:
        lo, hi = min(st["t_us"] for st in steps), max(st["t_us"] + st["dur_us"] for st in steps)
        return {"steps": [], "clock": f"no profiler step of the run's traces falls in the snapshot's history: the "
                                      f"steps span {(hi - lo) / 1e6:.3f} s and start {_gap(lo - start_us)} its "
                                      f"first entry (recorded at another time)"}
    inside.sort(key=lambda st: st["t_us"])
    return {"steps": inside, "clock": f"{len(inside)} profiler steps of the run's traces fall in the snapshot's "
                                      f"history (both on the Unix clock)"}


def _gap(us: float) -> str:
    seconds = abs(us) / 1e6
    amount = f"{seconds / 86400:,.1f} days" if seconds >= 86400 else f"{seconds:,.3f} s"
    return f"{amount} {'before' if us < 0 else 'after'}"


def compare(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """Two reports side by side: the peaks and, per source line, bytes alive at each peak and the change."""
    rows: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for side, rep in (("a", a), ("b", b)):
        for row in rep["at_peak"]:
            key = (row["frame"], row["function"])
            rows.setdefault(key, {"frame": key[0], "function": key[1], "a_bytes": 0, "b_bytes": 0, "a_count": 0,
                                  "b_count": 0})
            rows[key][f"{side}_bytes"] += row["bytes"]
            rows[key][f"{side}_count"] += row["count"]
    lines = [{**row, "change_bytes": row["b_bytes"] - row["a_bytes"]} for row in rows.values()]
    lines.sort(key=lambda row: (-abs(row["change_bytes"]), -row["b_bytes"], row["frame"]))
    peaks = {k: {"a": a[k], "b": b[k], "change": _change(a[k], b[k])}
             for k in ("peak_allocated_bytes", "peak_reserved_bytes", "allocated_at_dump_bytes")}
    return {"a": os.fspath(a["path"]), "b": os.fspath(b["path"]), "a_device": a["device"], "b_device": b["device"],
            **peaks, "at_peak": lines}


def _change(x: Optional[int], y: Optional[int]) -> Optional[int]:
    return None if x is None or y is None else y - x
