"""Critical path of an execution graph: the longest path by time through its ET ops' dependencies.

This op-level path is what the Execution graph view highlights on its ET nodes. The step's critical path over
the trace's CPU and GPU events (kernels, streams, syncs, collectives), with causes, is `critical_path/path.py`;
its segments carry the ET node ids (`et_id`) that this view can highlight instead.

Each op (a top-level ET operator) is two vertices: its CPU part (the op's time on its thread) and, when it launched
GPU work, its GPU part (the busy time of its kernels). Dependencies, all pointing forward in program order:
- program order on a CPU thread: cpu(i) -> cpu(next op of the thread), weighted by the idle gap between them;
- launch: cpu(i) -> gpu(i), weighted by the launch gap: how long the stream sat idle after the op returned and
  after its previous kernel ended, before this op's first kernel started (GPU waiting on the host);
- stream order: gpu(i) -> gpu(next op with kernels on the same stream), weighted like the launch edge;
- data: the producer's last part -> the consumer's GPU part when it has one (the device waits for the data),
  else the producer's CPU part -> the consumer's CPU part (host-side dependency, across threads).
With timings, an edge whose target started before its source ended is dropped (the timings contradict it). The path
length is the sum of vertex and edge weights along it; it can exceed the step's wall time a little, since a kernel
may overlap the tail of the op that launched it. Without timings every op weighs 1 (op count).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

CPU_OP, GPU_KERNEL, LAUNCH_GAP, HOST_GAP = "cpu_op", "gpu_kernel", "launch_gap", "host_gap"
CAUSES = (CPU_OP, GPU_KERNEL, LAUNCH_GAP, HOST_GAP)
_SLACK_US = 1.0  # timestamps are whole microseconds in older traces


@dataclass
class OpTimes:
    """Per op (in program order): CPU start and duration (us), thread key, GPU start / end / busy time and stream
    (NaN / -1 without GPU work). `timed` is False when nothing was linked to a Kineto trace."""
    cpu_ts: np.ndarray
    cpu_dur: np.ndarray
    thread: np.ndarray
    gpu_ts: np.ndarray
    gpu_end: np.ndarray
    gpu_busy: np.ndarray
    stream: np.ndarray
    timed: bool = True

    def __len__(self) -> int:
        return len(self.cpu_dur)


@dataclass
class Step:
    """One piece of the critical path: op index, what it is (a cause) and its time."""
    op: int
    cause: str
    us: float


@dataclass
class CriticalPath:
    steps: List[Step]
    length_us: float
    step_us: float  # wall time from the first op's start to the last end (0 when untimed)
    timed: bool
    by_cause: Dict[str, float] = field(default_factory=dict)

    def ops(self) -> List[int]:
        """The ops on the path, in order, each once."""
        seen: List[int] = []
        for s in self.steps:
            if not seen or seen[-1] != s.op:
                seen.append(s.op)
        return seen

    def summary(self) -> Dict[str, object]:
        """JSON-ready: length, step time, and per cause its time and share of the path."""
        total = self.length_us or 1.0
        return {"timed": self.timed, "length_us": self.length_us, "step_us": self.step_us,
                "ops": len(self.ops()),
                "causes": {c: {"us": self.by_cause.get(c, 0.0), "share": self.by_cause.get(c, 0.0) / total}
                           for c in CAUSES}}


def critical_path(times: OpTimes, data_edges: Sequence[Tuple[int, int]]) -> CriticalPath:
    """Longest path through the op graph described in the module docstring; `data_edges` are (producer,
    consumer) op indices with producer < consumer."""
    n = len(times)
    if n == 0:
        return CriticalPath([], 0.0, 0.0, times.timed)
    cpu_w, gpu_w = _weights(times)
    has_gpu = gpu_w > 0
    edges = _edges(times, data_edges, has_gpu)
    best, back = _longest(n, cpu_w, gpu_w, edges)
    end = int(np.argmax(best))
    steps = _walk(end, back, cpu_w, gpu_w)
    by_cause: Dict[str, float] = {}
    for s in steps:
        by_cause[s.cause] = by_cause.get(s.cause, 0.0) + s.us
    return CriticalPath(steps, float(best[end]), _wall(times), times.timed, by_cause)


def _weights(times: OpTimes) -> Tuple[np.ndarray, np.ndarray]:
    if not times.timed:
        return np.ones(len(times)), np.zeros(len(times))
    return np.nan_to_num(times.cpu_dur), np.nan_to_num(times.gpu_busy)


# An edge: (from vertex, to vertex, weight, cause). Vertex 2*i is op i's CPU part, 2*i+1 its GPU part.
Edge = Tuple[int, int, float, str]


def _edges(times: OpTimes, data_edges: Sequence[Tuple[int, int]], has_gpu: np.ndarray) -> List[Edge]:
    cpu_end = times.cpu_ts + times.cpu_dur
    edges: List[Edge] = []
    last_on_thread: Dict[int, int] = {}
    last_on_stream: Dict[int, int] = {}
    for i in range(len(times)):
        prev = last_on_thread.get(int(times.thread[i]))
        if prev is not None:
            gap = times.cpu_ts[i] - cpu_end[prev] if times.timed else 0.0
            edges.append((2 * prev, 2 * i, _positive(gap), HOST_GAP))
        last_on_thread[int(times.thread[i])] = i
        if has_gpu[i]:
            edges.extend(_gpu_edges(times, i, cpu_end[i], last_on_stream))
    for p, c in data_edges:
        edges.append((2 * p + int(has_gpu[p]), 2 * c + 1, 0.0, LAUNCH_GAP) if has_gpu[c] else
                     (2 * p, 2 * c, 0.0, HOST_GAP))
    return [e for e in edges if _causal(times, e)] if times.timed else edges


def _causal(times: OpTimes, edge: Edge) -> bool:
    """A timed dependency holds only if its target started after its source ended (else the timings contradict
    it, and following it would count overlapping time twice). A launch edge always holds: the kernel runs while
    or after its op runs."""
    (p, p_gpu), (c, c_gpu) = divmod(edge[0], 2), divmod(edge[1], 2)
    if p == c:
        return True
    src_end = times.gpu_end[p] if p_gpu else times.cpu_ts[p] + times.cpu_dur[p]
    dst_start = times.gpu_ts[c] if c_gpu else times.cpu_ts[c]
    return bool(dst_start >= src_end - _SLACK_US)


def _gpu_edges(times: OpTimes, i: int, cpu_end: float, last_on_stream: Dict[int, int]) -> List[Edge]:
    """Launch and stream-order edges into op i's GPU part. The launch edge carries the time the stream sat idle
    before the kernel, once the op had returned and the previous kernel had ended (the GPU waiting on the host);
    the stream-order edge carries nothing, so that idle time is counted once."""
    stream = int(times.stream[i])
    prev = last_on_stream.get(stream)
    last_on_stream[stream] = i
    ready = cpu_end if prev is None else max(cpu_end, times.gpu_end[prev])
    out: List[Edge] = [(2 * i, 2 * i + 1, _positive(times.gpu_ts[i] - ready), LAUNCH_GAP)]
    if prev is not None:
        out.append((2 * prev + 1, 2 * i + 1, 0.0, LAUNCH_GAP))
    return out


def _positive(x: float) -> float:
    return float(x) if x == x and x > 0 else 0.0


def _longest(n: int, cpu_w: np.ndarray, gpu_w: np.ndarray, edges: List[Edge]):
    """Longest path ending at each vertex; vertices in index order are a topological order (edges go forward)."""
    weight = np.empty(2 * n)
    weight[0::2], weight[1::2] = cpu_w, gpu_w
    incoming: List[List[Edge]] = [[] for _ in range(2 * n)]
    for e in edges:
        incoming[e[1]].append(e)
    best = np.zeros(2 * n)
    back: List[Optional[Edge]] = [None] * (2 * n)
    for v in range(2 * n):
        top, arg = 0.0, None
        for e in incoming[v]:
            cand = best[e[0]] + e[2]
            if cand > top or (arg is None and cand == top and cand > 0):
                top, arg = cand, e
        best[v] = top + weight[v]
        back[v] = arg
    return best, back


def _walk(end: int, back: List[Optional[Edge]], cpu_w: np.ndarray, gpu_w: np.ndarray) -> List[Step]:
    steps: List[Step] = []
    v: Optional[int] = end
    while v is not None:
        op, is_gpu = divmod(v, 2)
        us = float(gpu_w[op] if is_gpu else cpu_w[op])
        steps.append(Step(op, GPU_KERNEL if is_gpu else CPU_OP, us))
        e = back[v]
        if e is not None and e[2] > 0:
            steps.append(Step(e[1] // 2, e[3], e[2]))
        v = e[0] if e is not None else None
    steps.reverse()
    return [s for s in steps if s.us > 0]


def _wall(times: OpTimes) -> float:
    if not times.timed:
        return 0.0
    ends = np.concatenate([times.cpu_ts + times.cpu_dur, times.gpu_end])
    ends = ends[~np.isnan(ends)]
    starts = times.cpu_ts[~np.isnan(times.cpu_ts)]
    return float(ends.max() - starts.min()) if len(ends) and len(starts) else 0.0
