"""Where each step's wall time goes: GPU time by kernel class and GPU idle time by cause, summing to the step's
wall time exactly.

How (documented for users in README "Overview: how a step's time is split"):
- The span's time is cut into elementary segments at every step boundary and every start and end of a GPU
  activity or host interval. Each segment gets exactly one category, so a step's categories sum to its wall time
  (up to floating-point rounding).
- GPU busy: the union of all kernels, memcpys and memsets (every stream and device). Where activities overlap, the
  segment goes to the first category in BUSY order: compute classes first (GEMM, attention, convolution,
  elementwise, reduction/norm, other kernels), then communication, memcpy, memset. Multi-stream overlap is thus
  counted once, and "communication" in the sum is the *exposed* part; communication that ran under compute is
  reported beside it as `comm_overlapped_us`.
- GPU idle: segments with no activity get a cause, first rule that holds:
  1. other: the next GPU activity had already been launched (its launch call had returned) - the GPU waited on a
     dependency (another stream, an event, a peer), not on the host;
  2. data loading: the host was inside a DataLoader `__next__`;
  3. synchronisation: the host was blocked in a sync call (cuda*Synchronize, a synchronous memcpy), or had not
     yet queued new work since one returned (the sync drained the queue: `.item()`, `.cpu()`);
  4. launch-bound: the idle gap (the whole run of idle time it belongs to) is shorter than LAUNCH_GAP_US - the
     queue ran dry between back-to-back launches;
  5. host-bound: the host was inside a CPU op (framework or model code on the CPU, nothing queued);
  6. other: none of the above is visible in the trace.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from ...sections import Section, SectionContext
from ...trace.table import Table, unique_keys
from ..kernels.coverage import compute_mask
from ..kernels.names import kernel_class
from . import host
from .cpu import CPU_BUSY, CPU_CATEGORIES, CPU_IDLE, collective_intervals, compute_ops, split_cpu_steps
from .steps import SOURCE_SPAN, StepWindows, serving_arrays, step_windows

# A kernel launch costs the host ~5-10 us in the CUDA runtime plus ~10-40 us of eager PyTorch dispatch per op:
# a GPU gap shorter than this is the host issuing the next launch while the queue is empty.
LAUNCH_GAP_US = 50.0

BUSY: Tuple[Tuple[str, str], ...] = (
    ("gemm", "GEMM"), ("attention", "attention"), ("convolution", "convolution"), ("elementwise", "elementwise"),
    ("reduction", "reduction/norm"), ("other_kernels", "other kernels"), ("communication", "communication (exposed)"),
    ("memcpy", "memcpy"), ("memset", "memset"))
IDLE: Tuple[Tuple[str, str], ...] = (
    ("data_loading", "idle: data loading"), ("sync", "idle: synchronisation"), ("launch_bound", "idle: launch-bound"),
    ("host_bound", "idle: host-bound"), ("idle_other", "idle: other"))
CATEGORIES: Tuple[str, ...] = tuple(k for k, _ in BUSY + IDLE)
# Every category's label and kind, those of a CPU-only span's split (cpu.py) included.
LABELS: Dict[str, str] = dict(BUSY + IDLE + CPU_BUSY + CPU_IDLE)
KINDS: Dict[str, str] = {**{k: "busy" for k, _ in BUSY + CPU_BUSY}, **{k: "idle" for k, _ in IDLE + CPU_IDLE}}
COMPUTE = ("gemm", "attention", "convolution", "elementwise", "reduction", "other_kernels")
_CLASS_KEY = {"GEMM": "gemm", "attention": "attention", "conv": "convolution", "elementwise": "elementwise",
              "reduction": "reduction", "norm": "reduction", "communication": "communication", "other": "other_kernels",
              "memcpy": "memcpy", "memset": "memset"}  # kernels that copy or fill (KV-cache writes, ROCm blit kernels)
_IDX = {k: i for i, k in enumerate(CATEGORIES)}


def activity_categories(acts: Table) -> np.ndarray:
    """Index into CATEGORIES of each activity (kernel class from kernels/names.py; memcpy and memset by kind)."""
    if not len(acts):
        return np.empty(0, dtype=np.int32)
    kinds, names, ops = acts.strings["kind"], acts.strings["name"], acts.strings["op_name"]
    uniq, inverse = unique_keys(acts, ("kind", "name", "op_name"))
    cats = np.empty(len(uniq), dtype=np.int32)
    for i, (k, n, o) in enumerate(uniq.tolist()):
        kind = kinds[k]
        if kind in ("memcpy", "memset"):
            cats[i] = _IDX[kind]
        else:
            cats[i] = _IDX[_CLASS_KEY[kernel_class(names[n], kind, ops[o] if o >= 0 else None)]]
    return cats[inverse.reshape(-1)]


# ------------------------------------------------------------------------------------------------ the sweep

def _coverage(bounds: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per elementary segment (between consecutive bounds), whether any interval covers it."""
    n = len(bounds)
    if not len(start):
        return np.zeros(n - 1, dtype=bool)
    i0 = np.searchsorted(bounds, start)
    i1 = np.searchsorted(bounds, end)
    delta = np.bincount(i0, minlength=n + 1) - np.bincount(i1, minlength=n + 1)
    return np.cumsum(delta)[: n - 1] > 0


def _clip(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> Tuple[np.ndarray, np.ndarray]:
    s, e = np.clip(start, lo, hi), np.clip(end, lo, hi)
    keep = e > s
    return s[keep], e[keep]


def split_steps(windows: Tuple[np.ndarray, np.ndarray], act_start: np.ndarray, act_end: np.ndarray,
                act_category: np.ndarray, act_launch_end: np.ndarray, dataloader: host.Intervals,
                sync: host.Intervals, cpu: host.Intervals,
                launch_gap_us: float = LAUNCH_GAP_US) -> Tuple[np.ndarray, np.ndarray]:
    """(steps x CATEGORIES matrix of microseconds, communication overlapped with compute per step).

    `windows`: contiguous step windows (start, end); activities: start, end, category index, end of their launch
    call (NaN when unknown); host intervals: DataLoader calls, sync calls with their drain tails, CPU ops."""
    w_start, w_end = windows
    n_steps = len(w_start)
    out = np.zeros((n_steps, len(CATEGORIES)))
    if not n_steps:
        return out, np.zeros(0)
    lo, hi = float(w_start[0]), float(w_end[-1])
    gpu = _clip(act_start, act_end, lo, hi)
    a_cat = act_category[(np.clip(act_end, lo, hi) > np.clip(act_start, lo, hi))]
    hosts = [_clip(iv.start, iv.end, lo, hi) for iv in (dataloader, sync, cpu)]
    bounds = np.unique(np.concatenate([w_start, w_end, *gpu, *(x for pair in hosts for x in pair)]))
    seg_start, seg_len = bounds[:-1], np.diff(bounds)
    label = np.full(len(seg_len), -1, dtype=np.int32)
    cover = {}
    for key, _ in BUSY:
        c = _IDX[key]
        cover[key] = _coverage(bounds, gpu[0][a_cat == c], gpu[1][a_cat == c])
        label[(label < 0) & cover[key]] = c
    compute = np.logical_or.reduce([cover[k] for k in COMPUTE])
    overlapped = cover["communication"] & compute
    idle = label < 0
    label[idle] = _idle_causes(bounds, idle, act_start, act_launch_end, hosts, launch_gap_us)[idle]
    step = np.searchsorted(w_start, seg_start, side="right") - 1
    inside = (step >= 0) & (seg_start < w_end[np.clip(step, 0, n_steps - 1)])
    flat = step[inside] * len(CATEGORIES) + label[inside]
    out += np.bincount(flat, weights=seg_len[inside], minlength=out.size).reshape(out.shape)
    comm_overlap = np.bincount(step[inside], weights=np.where(overlapped, seg_len, 0)[inside], minlength=n_steps)
    return out, comm_overlap


def _idle_causes(bounds: np.ndarray, idle: np.ndarray, act_start: np.ndarray, act_launch_end: np.ndarray,
                 hosts: List[Tuple[np.ndarray, np.ndarray]], launch_gap_us: float) -> np.ndarray:
    seg_start, seg_end, seg_len = bounds[:-1], bounds[1:], np.diff(bounds)
    cause = np.full(len(seg_len), _IDX["idle_other"], dtype=np.int32)
    dl, sync, cpu = (_coverage(bounds, s, e) for s, e in hosts)
    run = np.cumsum(np.r_[True, ~idle[:-1]] & idle)  # id of the idle run each segment belongs to
    gap = np.bincount(run, weights=np.where(idle, seg_len, 0))[run]
    order = np.argsort(act_start, kind="stable")
    starts, launched = act_start[order], act_launch_end[order]
    nxt = np.searchsorted(starts, seg_end, side="left")
    has_next = nxt < len(starts)
    queued = np.zeros(len(seg_len), dtype=bool)
    queued[has_next] = launched[nxt[has_next]] <= seg_start[has_next]  # NaN compares False: not queued
    rules = ((queued, "idle_other"), (dl, "data_loading"), (sync, "sync"), (gap < launch_gap_us, "launch_bound"),
             (cpu, "host_bound"))
    decided = np.zeros(len(seg_len), dtype=bool)
    for mask, key in rules:
        hit = mask & ~decided
        cause[hit] = _IDX[key]
        decided |= hit
    return cause


# ------------------------------------------------------------------------------------------------ section

def _per_step(windows: StepWindows, ts: np.ndarray, values: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Sums of `values` over the activities that start in each step."""
    step = np.searchsorted(windows.start, ts, side="right") - 1
    ok = (step >= 0) & (ts < windows.end[np.clip(step, 0, max(len(windows) - 1, 0))]) if len(windows) else \
        np.zeros(len(ts), dtype=bool)
    return [np.bincount(step[ok], weights=v[ok], minlength=len(windows)) for v in values]


def _median_per_step(windows: StepWindows, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    out = np.full(len(windows), np.nan)
    for i, (s, e) in enumerate(zip(windows.start.tolist(), windows.end.tolist())):
        d = dur[(ts >= s) & (ts < e)]
        if len(d):
            out[i] = float(np.median(d))
    return out


def build_section(ctx: SectionContext) -> Section:
    """The `overview` section of one span: step windows, the time split, per-step kernel figures and the host
    evidence the recommendations need."""
    trace, acts = ctx.trace, ctx.eff.activities
    correlation = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    if len(correlation) != len(acts):  # activities no longer mirror the tables: launch times unknown
        correlation = np.full(len(acts), -1, dtype=np.int64)
    launch_start, launch_end = host.launch_times(trace, correlation)
    start, end = acts["ts"], acts["ts"] + acts["dur"]
    windows = step_windows(trace, end, launch_start)
    category = activity_categories(acts)
    sync = host.sync_intervals(trace)
    cpu_only = not len(acts) and bool(len(trace.ops))  # no GPU: the split says what the CPU did
    if cpu_only:
        categories = CPU_CATEGORIES
        matrix, overlap = split_cpu_steps((windows.start, windows.end), host.dataloader_intervals(trace),
                                          compute_ops(trace), collective_intervals(trace))
    else:
        categories = CATEGORIES
        matrix, overlap = split_steps((windows.start, windows.end), start, end, category, launch_end,
                                      host.dataloader_intervals(trace), sync, host.cpu_op_intervals(trace))
    kinds = acts.strings.get("kind", [])
    is_kernel = np.array([kinds[k] == "kernel" for k in acts["kind"]], dtype=bool) if len(acts) else \
        np.zeros(0, dtype=bool)
    kts, kdur, kflops = acts["ts"][is_kernel], acts["dur"][is_kernel], acts["flops"][is_kernel]
    known = ~np.isnan(kflops)
    compute = compute_mask(acts)[is_kernel]  # the FLOP coverage's compute kernels (kernels/coverage.py)
    count, kernel_us, flops, compute_us, flops_us = _per_step(
        windows, kts, [np.ones(len(kts)), kdur, np.where(known, kflops, 0), np.where(compute, kdur, 0),
                       np.where(compute & known, kdur, 0)])
    sync_mask = host.sync_calls(trace)
    sync_count, = _per_step(windows, trace.launches["ts"][sync_mask], [np.ones(int(sync_mask.sum()))])
    py_start, py_count = _python_calls(trace)
    python_count, = _per_step(windows, py_start, [py_count])
    arrays = {"step_start": windows.start, "step_end": windows.end, "step_number": windows.number.astype(np.int64),
              "comm_overlapped_us": overlap, "kernel_count": count, "kernel_us": kernel_us, "flops": flops,
              "compute_kernel_us": compute_us, "flops_kernel_us": flops_us, "kernel_median_us": _median_per_step(windows, kts, kdur),
              "sync_calls": sync_count, "python_events": python_count}
    arrays.update({f"t_{key}": matrix[:, i] for i, key in enumerate(categories)})
    arrays.update(serving_arrays(windows))
    info = {"source": windows.source, "labels": windows.labels, "categories": list(categories), "cpu_only": cpu_only,
            "phases": [m["phase"] for m in windows.meta],
            "launch_gap_us": LAUNCH_GAP_US, "has_cpu_ops": bool(len(trace.ops)), "gpu_activities": int(len(acts)),
            "sync_evidence": host.sync_evidence(trace), "missing": _missing(trace, windows, len(acts)),
            "python_events": int((trace.meta.category_counts or {}).get("python_function", 0)),
            "duration_us": float(trace.meta.duration_us or 0.0)}
    return Section("overview", info, arrays)


def _python_calls(trace) -> Tuple[np.ndarray, np.ndarray]:
    """(bucket middle time, python_function events) of the reader's per-bucket counts (reader.PYTHON_BUCKET_US)."""
    from ...trace.reader import PYTHON_BUCKET_US

    calls = getattr(trace.meta, "python_calls", None) or {}
    start = np.fromiter(calls.keys(), dtype=np.float64, count=len(calls))
    return (start + 0.5) * PYTHON_BUCKET_US, np.fromiter(calls.values(), dtype=np.float64, count=len(calls))


def _missing(trace, windows: StepWindows, n_acts: int) -> List[str]:
    """What the trace lacks for a full overview, and how to record it."""
    out = []
    if not n_acts:
        out.append("no GPU activities: the breakdown is CPU time (CPU ops, collectives, data loading, idle threads); "
                   "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a GPU run for GPU "
                   "figures")
    if windows.source == SOURCE_SPAN:
        out.append("no ProfilerStep#N annotations: the whole span is one step. Record with "
                   "torch.profiler.profile(schedule=torch.profiler.schedule(...)) and call prof.step() once per "
                   "training iteration")
    if not len(trace.ops):
        out.append("no CPU ops: host-bound, data-loading and synchronisation idle cannot be told apart "
                   "(profile ProfilerActivity.CPU too)")
    return out
