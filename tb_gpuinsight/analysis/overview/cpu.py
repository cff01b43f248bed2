"""The step split of a span without GPU activity (a CPU-only run: gloo collectives, CPU training or inference):
what the CPU did, never GPU idle causes (there is no GPU to be idle).

Each instant of a step goes to one category, the first that holds (so the categories sum to the step's wall time):
  1. data loading: the host is inside a DataLoader `__next__`;
  2. CPU ops: some CPU op runs on any thread (the collectives' own markers aside: `c10d::` ops and
     `record_param_comms` only hand the work to the communication threads);
  3. collectives (exposed): a collective is in progress (gloo:/nccl:/... annotations on gloo's worker threads) and
     no CPU op runs: the rank waits for its peers or for the transfer;
  4. idle threads: nothing of the above on any thread (sleeping, blocked outside the profiler's view).
Collective time under CPU ops is `comm_overlapped_us`, as on GPU runs. The Distributed view's per-rank split of a
CPU rank is this one.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from ...trace.kineto import KinetoTrace
from ..ranks import collectives as coll
from ..ranks.waits import length, merged, overlap
from . import host

CPU_BUSY: Tuple[Tuple[str, str], ...] = (("cpu_data_loading", "data loading"), ("cpu_ops", "CPU ops"),
                                         ("cpu_collectives", "collectives (exposed)"))
CPU_IDLE: Tuple[Tuple[str, str], ...] = (("cpu_idle", "idle threads"),)
CPU_CATEGORIES: Tuple[str, ...] = tuple(k for k, _ in CPU_BUSY + CPU_IDLE)
CPU_LABELS: Dict[str, str] = dict(CPU_BUSY + CPU_IDLE)


def compute_ops(trace: KinetoTrace) -> host.Intervals:
    """CPU ops other than the collectives' own markers."""
    ops = trace.ops
    names = ops.strings.get("name", [])
    if not len(ops) or not names:
        return host.Intervals.empty()
    marker = np.array([bool(coll.canonical_kind(n)) or n == "record_param_comms" for n in names], dtype=bool)
    keep = ~marker[ops["name"]]
    return host.Intervals(ops["ts"][keep], (ops["ts"] + ops["dur"])[keep])


def collective_intervals(trace: KinetoTrace) -> host.Intervals:
    """Collectives in progress: the CPU collective instances of the trace (`collectives.extract`)."""
    table, _ = coll.extract(trace)
    return host.Intervals(table["ts"], table["ts"] + table["dur"]) if len(table) else host.Intervals.empty()


def split_cpu_steps(windows: Tuple[np.ndarray, np.ndarray], dataloader: host.Intervals, ops: host.Intervals,
                    comm: host.Intervals) -> Tuple[np.ndarray, np.ndarray]:
    """(steps x CPU_CATEGORIES matrix of microseconds, collective time overlapped by CPU ops per step)."""
    starts, ends = windows
    out = np.zeros((len(starts), len(CPU_CATEGORIES)))
    covered = np.zeros(len(starts))
    for i, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist())):
        dl = merged(dataloader.start, dataloader.end, lo, hi)
        op = merged(ops.start, ops.end, lo, hi)
        cm = merged(comm.start, comm.end, lo, hi)
        before = merged(np.r_[dl[0], op[0]], np.r_[dl[1], op[1]], lo, hi)
        busy = merged(np.r_[before[0], cm[0]], np.r_[before[1], cm[1]], lo, hi)
        out[i] = (length(dl), length(before) - length(dl), length(busy) - length(before), (hi - lo) - length(busy))
        covered[i] = overlap(cm, op)
    return out, covered


__all__ = ["CPU_BUSY", "CPU_IDLE", "CPU_CATEGORIES", "CPU_LABELS", "compute_ops", "collective_intervals",
           "split_cpu_steps"]
