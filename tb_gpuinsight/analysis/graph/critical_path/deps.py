"""The joint CPU + GPU dependency graph of one Kineto trace, for the critical path (`path.py` walks it).

Events: CPU ops, CPU user annotations (record_function ranges; `ProfilerStep#N` is the step itself, not an event)
and runtime/driver calls, nested per thread by time; GPU kernels, memcpys and memsets. Every event has a start and
an end point. For each point the graph keeps the one dependency that arrived last (its *critical predecessor*)
and what the time between them was spent on (a cause, a kind and the event it is charged to). The rules, all typed
edges of HTA's critical-path model (CPU nesting, launch, stream order, sync):

- CPU nesting, per thread: an event's start follows its previous sibling's end (the time between is its parent's
  own time; between top-level events, host time no op covers: cause "idle", kind "host_gap"), or its parent's
  start when it is the first child. An event's end follows its last child's end (the parent's own time), or its
  own start when it has no children (its whole duration).
- Launch: a GPU activity's start depends on its launch call's start (runtime `correlation`); CUDA/HIP graph
  replays share the `cudaGraphLaunch` call's correlation, so every replayed kernel depends on that one call. The
  time from the call to the activity is "launch" (the GPU waiting for the host to launch).
- Stream order: an activity's start depends on the end of the previous activity on its (device, stream); the gap
  between them is charged to that previous activity (HTA's kernel-kernel delay).
- Cross-stream waits: a `Stream Wait Event` sync event (Kineto 2024+: `wait_on_stream`,
  `wait_on_cuda_event_record_corr_id`) makes the first activity launched on its stream after the
  `cudaStreamWaitEvent` call depend on the end of the last activity launched on `wait_on_stream` before the
  `cudaEventRecord` call it names. Older traces lack these args; when their process called
  `cudaStreamWaitEvent` / `hipStreamWaitEvent`, an activity that started more than `WAIT_GAP_US` after all its
  known dependencies, within `WAIT_GAP_US` of the end of an activity on another stream of its device, is taken to
  have waited for it (kind "stream_wait", inferred). Cause "sync_wait".
- Thread joins: a CPU event that starts more than `WAIT_GAP_US` after its own thread's last dependency (or an
  annotation whose own time ends so), within `THREAD_WAKE_US` of another thread of its process finishing an event,
  waited for that thread: the main thread blocked in `backward()` while the autograd thread works, a worker
  thread started or joined. Its start (the annotation's end) depends on that event's end: "sync_wait", kind
  "thread_wait" (inferred: Kineto records no such link).
- Host syncs: a blocking call (`cuda|hip` Stream/Device/Event `Synchronize`, synchronous `Memcpy`, or any runtime
  call whose own GPU activity finished inside it, e.g. a `cudaMemcpyAsync` to pageable memory) ends when the GPU
  work it waited for ended, when that was after the call began: the stream of its `Stream Sync` event, the device
  of its `Context Sync` event, the recorded work of its `Event Sync` event, else the last GPU activity of the
  process to end inside the call. The call's remaining time is "sync_wait".
- Collectives: NCCL/RCCL kernels and CPU collective ops (`record_param_comms`, `c10d::`, `nccl:` and `gloo:`
  ranges) are "communication": a rank's wait for its peers is inside them.
- Execution Trace (optional, `et.py`): a data dependency between ops on two threads makes the consumer's
  start depend on the producer's end ("sync_wait", kind "data_wait"). Within one thread program order already
  implies it, so an ET changes nothing there.
Causes of events: CPU ops and annotations "cpu_op" (collectives "communication"); runtime calls that launched GPU
work "launch", blocking calls "sync_wait", other runtime calls "cpu_op"; GPU activities "kernel" (memcpy and
memset too, by kind), collective kernels "communication".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ....trace.table import Interner, Table, unique_rows
from ...ranks.collectives import is_communication
from ...correlate import op_parents
from ...kernels.names import kernel_class
from ...kernels.roles import name_head
from ...overview.host import SYNC_CALL

CAUSES: Tuple[str, ...] = ("cpu_op", "kernel", "launch", "sync_wait", "communication", "idle")
CPU_OP, KERNEL, LAUNCH, SYNC_WAIT, COMMUNICATION, IDLE = range(len(CAUSES))
KINDS: Tuple[str, ...] = ("cpu_op", "annotation", "runtime", "launch", "sync", "kernel", "memcpy", "memset",
                          "stream_wait", "host_gap", "data_wait", "thread_wait")
K_OP, K_ANNOTATION, K_RUNTIME, K_LAUNCH, K_SYNC, K_KERNEL, K_MEMCPY, K_MEMSET, K_STREAM_WAIT, K_HOST_GAP, \
    K_DATA_WAIT, K_THREAD_WAIT = range(len(KINDS))
WAIT_GAP_US = 20.0  # an activity this much later than its known dependencies, this close to another stream's end
THREAD_WAKE_US = 500.0  # a blocked thread resumes within this of the event it waited for (GIL, wake-up)
SLACK_US = 2.0  # CPU and GPU clocks and whole-microsecond timestamps disagree by about this much
_STEP = re.compile(r"^ProfilerStep#\d+$")
_CPU_COMM = re.compile(r"^record_param_comms$|^c10d::|^nccl:|^gloo:|ProcessGroup", re.I)
_STREAM_WAIT_CALL = re.compile(r"^(?:cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent$")
NO = -1
NO_GPU = "none (no GPU activity)"  # the notes' stream_wait_source of a CPU-only trace


@dataclass
class Graph:
    """Events (CPU first, then GPU) and, per point (start = 2 * event, end = 2 * event + 1), its critical
    predecessor point and the cause, kind and event of the time between them."""
    origin_us: float
    ts: np.ndarray
    end: np.ndarray
    name: np.ndarray  # codes into names
    names: List[str]
    cause: np.ndarray
    kind: np.ndarray
    thread: np.ndarray  # numeric thread id of CPU events, -1 elsewhere or when the id is not a number
    stream: np.ndarray  # GPU stream, -1 for CPU events
    device: np.ndarray  # GPU device, -1 for CPU events
    correlation: np.ndarray
    n_cpu: int
    pred: np.ndarray = field(default=None)
    seg_cause: np.ndarray = field(default=None)
    seg_kind: np.ndarray = field(default=None)
    seg_event: np.ndarray = field(default=None)
    et_id: Optional[np.ndarray] = None  # per event, the linked ET node id (-1) when an ET is linked
    notes: Dict[str, object] = field(default_factory=dict)
    cpu: Optional["_Cpu"] = None  # the source rows of the events, for the ET link
    gpu: Optional["_Gpu"] = None
    parent: Optional[np.ndarray] = None  # per CPU event, its enclosing CPU event (-1)
    launch_event: Optional[np.ndarray] = None  # per GPU activity, the CPU event of its launch call (-1)

    def __len__(self) -> int:
        return len(self.ts)

    def time(self, point: int) -> float:
        return float(self.end[point >> 1] if point & 1 else self.ts[point >> 1])


# ------------------------------------------------------------------------------------------------- events

@dataclass
class _Cpu:
    ts: np.ndarray
    end: np.ndarray
    thread_key: np.ndarray
    process: np.ndarray  # code of the event's pid
    thread: np.ndarray
    name: np.ndarray
    cause: np.ndarray
    kind: np.ndarray
    correlation: np.ndarray
    op_row: np.ndarray  # ops-table row, -1 for annotations and runtime calls
    launch_row: np.ndarray  # launches-table row of runtime calls, -1 elsewhere


def _kind_mask(table: Table, kinds: Tuple[str, ...]) -> np.ndarray:
    cats = table.strings.get("kind", [])
    hit = np.fromiter((c in kinds for c in cats), dtype=bool, count=len(cats))
    return hit[table["kind"]] if len(table) and len(cats) else np.zeros(len(table), dtype=bool)


def _name_mask(table: Table, pattern: "re.Pattern[str]") -> np.ndarray:
    cats = table.strings.get("name", [])
    hit = np.fromiter((bool(pattern.search(c)) for c in cats), dtype=bool, count=len(cats))
    return hit[table["name"]] if len(table) and len(cats) else np.zeros(len(table), dtype=bool)


def _cpu_events(trace, names: Interner, gpu_corr: np.ndarray) -> _Cpu:
    ops, ann, launches = trace.ops, trace.annotations, trace.launches
    op_rows = np.flatnonzero(~_name_mask(ops, _STEP))
    ann_rows = np.flatnonzero(_kind_mask(ann, ("cpu",)) & ~_name_mask(ann, _STEP))
    call_rows = np.flatnonzero(_kind_mask(launches, ("runtime", "driver")))
    parts = [(ops, op_rows, K_OP), (ann, ann_rows, K_ANNOTATION), (launches, call_rows, K_RUNTIME)]
    threads, processes = Interner(), Interner()
    cols: Dict[str, List[np.ndarray]] = {k: [] for k in ("ts", "end", "key", "proc", "tid", "name", "kind", "comm")}
    for table, rows, kind in parts:
        _append_cpu(cols, table, rows, kind, names, (threads, processes))
    cat = {k: np.concatenate(v) if v else np.empty(0) for k, v in cols.items()}
    n_ops, n_ann = len(op_rows), len(ann_rows)
    kind = cat["kind"].astype(np.int8)
    correlation = np.full(len(kind), NO, dtype=np.int64)
    correlation[n_ops + n_ann:] = launches["correlation"][call_rows] if len(call_rows) else []
    cause = np.where(cat["comm"].astype(bool), COMMUNICATION, CPU_OP).astype(np.int8)
    calls = slice(n_ops + n_ann, None)
    launched = np.isin(correlation[calls], gpu_corr[gpu_corr >= 0]) & (correlation[calls] >= 0)
    cause[calls] = np.where(launched, LAUNCH, CPU_OP)
    kind[calls] = np.where(launched, K_LAUNCH, K_RUNTIME)
    op_row = np.full(len(kind), NO, dtype=np.int64)
    op_row[:n_ops] = op_rows
    launch_row = np.full(len(kind), NO, dtype=np.int64)
    launch_row[calls] = call_rows
    return _Cpu(cat["ts"].astype(np.float64), cat["end"].astype(np.float64), cat["key"].astype(np.int64),
                cat["proc"].astype(np.int64), cat["tid"].astype(np.int64), cat["name"].astype(np.int32), cause, kind,
                correlation, op_row, launch_row)


def _append_cpu(cols, table: Table, rows: np.ndarray, kind: int, names: Interner,
                interners: Tuple[Interner, Interner]) -> None:
    if not len(rows):
        return
    threads, processes = interners
    pid_s, tid_s, name_s = table.strings["pid"], table.strings["tid"], table.strings["name"]
    pairs, which = unique_rows(np.stack([table["pid"][rows], table["tid"][rows]], 1))
    keys = np.array([threads.code((pid_s[p], tid_s[t])) for p, t in pairs.tolist()], dtype=np.int64)
    numbers = np.array([_number(tid_s[t]) for t in pairs[:, 1].tolist()], dtype=np.int64)
    procs = np.array([processes.code(pid_s[p]) for p in pairs[:, 0].tolist()], dtype=np.int64)
    which = which.reshape(-1)
    key_of, tid_num = keys[which], numbers[which]
    cols["proc"].append(procs[which])
    code = np.fromiter((names.code(n) for n in name_s), dtype=np.int32, count=len(name_s))
    comm = np.fromiter((_communication(name_head(n)) for n in name_s), dtype=bool, count=len(name_s))
    ts = table["ts"][rows]
    cols["ts"].append(ts)
    cols["end"].append(ts + np.maximum(np.nan_to_num(table["dur"][rows]), 0.0))
    cols["key"].append(key_of)
    cols["tid"].append(tid_num)
    cols["name"].append(code[table["name"][rows]])
    cols["kind"].append(np.full(len(rows), kind, dtype=np.int8))
    cols["comm"].append(comm[table["name"][rows]] if kind != K_RUNTIME else np.zeros(len(rows), bool))


def _communication(name: str) -> bool:
    return bool(_CPU_COMM.search(name)) or kernel_class(name) == "communication"


def _number(text: str) -> int:
    """A thread id as a number, -1 when it is not one (or does not fit an int64)."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        return NO
    return value if -(1 << 63) <= value < 1 << 63 else NO


@dataclass
class _Gpu:
    ts: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    name: np.ndarray
    cause: np.ndarray
    kind: np.ndarray
    op: np.ndarray  # launching op's ops-table row, -1


def _gpu_events(trace, acts: Table, names: Interner) -> _Gpu:
    n = len(acts)
    correlation = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]]).astype(np.int64)
    if len(correlation) != n:  # not the reader's activity table: no launch links
        correlation = np.full(n, NO, dtype=np.int64)
    act_names, kinds = acts.strings.get("name", []), acts.strings.get("kind", [])
    code = np.fromiter((names.code(x) for x in act_names), dtype=np.int32, count=len(act_names))
    kind_of = np.array([{"memcpy": K_MEMCPY, "memset": K_MEMSET}.get(k, K_KERNEL) for k in kinds], dtype=np.int8)
    ts = acts["ts"].astype(np.float64)
    cause = np.where(is_communication(acts), COMMUNICATION, KERNEL).astype(np.int8)
    return _Gpu(ts, ts + np.maximum(np.nan_to_num(acts["dur"]), 0.0), acts["device"].astype(np.int64),
                acts["stream"].astype(np.int64), correlation, code[acts["name"]] if n else np.empty(0, np.int32),
                cause, kind_of[acts["kind"]] if n else np.empty(0, np.int8), acts["op"].astype(np.int64))


# ------------------------------------------------------------------------------------------------- build

def build_graph(trace, acts: Table) -> Graph:
    """The dependency graph of a loaded trace and its activity table (`Efficiency.activities`)."""
    names = Interner()
    gpu = _gpu_events(trace, acts, names)
    cpu = _cpu_events(trace, names, gpu.correlation)
    n_cpu = len(cpu.ts)
    g = Graph(origin_us=float(trace.meta.start_us or 0.0),
              ts=np.concatenate([cpu.ts, gpu.ts]), end=np.concatenate([cpu.end, gpu.end]),
              name=np.concatenate([cpu.name, gpu.name]).astype(np.int32), names=names.items,
              cause=np.concatenate([cpu.cause, gpu.cause]).astype(np.int8),
              kind=np.concatenate([cpu.kind, gpu.kind]).astype(np.int8),
              thread=np.concatenate([cpu.thread, np.full(len(gpu.ts), NO)]).astype(np.int64),
              stream=np.concatenate([np.full(n_cpu, NO), gpu.stream]).astype(np.int64),
              device=np.concatenate([np.full(n_cpu, NO), gpu.device]).astype(np.int64),
              correlation=np.concatenate([cpu.correlation, gpu.correlation]).astype(np.int64), n_cpu=n_cpu)
    n = len(g)
    g.pred = np.full(2 * n, NO, dtype=np.int64)
    g.seg_cause = np.empty(2 * n, dtype=np.int8)
    g.seg_kind = np.empty(2 * n, dtype=np.int8)
    g.seg_event = np.full(2 * n, NO, dtype=np.int64)
    g.seg_cause[0::2], g.seg_cause[1::2] = g.cause, g.cause  # an event's own time: its cause
    g.seg_kind[0::2], g.seg_kind[1::2] = g.kind, g.kind
    g.seg_event[0::2] = g.seg_event[1::2] = np.arange(n)
    g.pred[1::2] = 2 * np.arange(n)  # end <- own start, until children or a sync say otherwise
    _cpu_nesting(g, cpu)
    _thread_waits(g, cpu)
    launch_event = g.launch_event = _launch_events(cpu, gpu)
    launch_time = np.where(launch_event >= 0, g.ts[np.maximum(launch_event, 0)], -np.inf)
    issued = np.where(launch_event >= 0, launch_time, gpu.ts)  # when each activity was queued
    _gpu_starts(g, trace, cpu, gpu, launch_event, launch_time, issued)
    _host_syncs(g, trace, cpu, gpu, issued)
    g.cpu, g.gpu = cpu, gpu
    return g


def _cpu_nesting(g: Graph, cpu: _Cpu) -> None:
    """Start and end predecessors from the per-thread call stacks."""
    n = len(cpu.ts)
    g.parent = np.full(n, NO, dtype=np.int64)
    if not n:
        return
    # 1 ns shorter for nesting only: an event starting exactly where another ends follows it, not inside it.
    table = Table("cpu", {"ts": cpu.ts, "dur": np.maximum(cpu.end - cpu.ts - 1e-3, 0.0),
                          "pid": np.zeros(n, np.int32), "tid": cpu.thread_key.astype(np.int32)})
    parent = g.parent = op_parents(table)
    group = np.where(parent >= 0, parent, -(cpu.thread_key + 2))
    order = np.lexsort((-(cpu.end - cpu.ts), cpu.ts, group))
    same = np.zeros(n, dtype=bool)
    same[1:] = group[order[1:]] == group[order[:-1]]
    prev = np.full(n, NO, dtype=np.int64)
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]
    last_in_group = np.ones(n, dtype=bool)
    last_in_group[:-1] = ~same[1:]
    last_child = np.full(n, NO, dtype=np.int64)
    tails = order[last_in_group]
    has_parent = parent[tails] >= 0
    last_child[parent[tails[has_parent]]] = tails[has_parent]
    e = np.arange(n)
    # start <- previous sibling's end (the parent's own time, or host time outside any op), else parent's start
    sib = prev >= 0
    g.pred[2 * e[sib]] = 2 * prev[sib] + 1
    first = ~sib & (parent >= 0)
    g.pred[2 * e[first]] = 2 * parent[first]
    charged = np.where(parent >= 0, parent, NO)
    starts = 2 * e[sib | first]
    g.seg_event[starts] = charged[sib | first]
    top = sib & (parent < 0)
    g.seg_cause[2 * e[top]] = IDLE
    g.seg_kind[2 * e[top]] = K_HOST_GAP
    inner = (sib | first) & (parent >= 0)
    g.seg_cause[2 * e[inner]] = g.cause[parent[inner]]
    g.seg_kind[2 * e[inner]] = g.kind[parent[inner]]
    # end <- last child's end (the event's own time after its children)
    has = last_child >= 0
    g.pred[2 * e[has] + 1] = 2 * last_child[has] + 1


def _thread_waits(g: Graph, cpu: _Cpu) -> None:
    """Cross-thread joins (see the module docstring): a start, or the end of an annotation's own time, that came
    more than WAIT_GAP_US after its predecessor on its own thread, within THREAD_WAKE_US of another thread of its
    process finishing an event, depends on that event's end (kind "thread_wait")."""
    n = g.n_cpu
    g.notes["thread_waits"] = 0
    if n < 2 or len(np.unique(cpu.thread_key)) < 2:
        return
    e = np.arange(n)
    ann_ends = e[cpu.kind == K_ANNOTATION]
    points = np.concatenate([2 * e, 2 * ann_ends + 1])
    owner = points >> 1
    at = np.where(points & 1, cpu.end[owner], cpu.ts[owner])
    pred = g.pred[points]
    arrival = np.where(pred >= 0, np.where(pred & 1, g.end[pred >> 1], g.ts[pred >> 1]), -np.inf)
    late = np.flatnonzero(at - arrival > WAIT_GAP_US)
    if not len(late):
        return
    by_end = np.argsort(cpu.end, kind="stable")
    ends = cpu.end[by_end]
    pos = np.searchsorted(ends, at[late] + SLACK_US, "right") - 1
    found = np.full(len(late), NO, dtype=np.int64)
    mine = owner[late]
    for back in range(8):  # the latest few ends before each point: the first on another thread of the process
        p = pos - back
        cand = by_end[np.maximum(p, 0)]
        ok = (found < 0) & (p >= 0) & (cpu.thread_key[cand] != cpu.thread_key[mine])
        ok &= (cpu.process[cand] == cpu.process[mine]) & (cpu.end[cand] > arrival[late])
        ok &= at[late] - cpu.end[cand] <= THREAD_WAKE_US
        found[ok] = cand[ok]
    hit = found >= 0
    where = points[late[hit]]
    g.pred[where] = 2 * found[hit] + 1
    g.seg_cause[where] = SYNC_WAIT
    g.seg_kind[where] = K_THREAD_WAIT
    g.seg_event[where] = mine[hit]
    g.notes["thread_waits"] = int(hit.sum())


def _sorted_index(keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted keys >= 0, their rows), first row kept among duplicates."""
    rows = np.flatnonzero(keys >= 0)
    order = np.argsort(keys[rows], kind="stable")
    k, r = keys[rows][order], rows[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    return k[first], r[first]


def find(index: Tuple[np.ndarray, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """Rows of `ids` in an index from `_sorted_index` (-1 where absent)."""
    keys, rows = index
    out = np.full(len(ids), NO, dtype=np.int64)
    if not len(keys) or not len(ids):
        return out
    pos = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
    hit = (keys[pos] == ids) & (ids >= 0)
    out[hit] = rows[pos[hit]]
    return out


def _launch_events(cpu: _Cpu, gpu: _Gpu) -> np.ndarray:
    """Per GPU activity, the CPU event index of its launch call (-1)."""
    calls = np.where(cpu.launch_row >= 0, cpu.correlation, NO)
    return find(_sorted_index(calls), gpu.correlation)


def _stream_keys(device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    return (device.astype(np.int64) << 40) ^ (stream.astype(np.int64) & ((1 << 40) - 1))


def _gpu_starts(g: Graph, trace, cpu: _Cpu, gpu: _Gpu, launch_event: np.ndarray, launch_time: np.ndarray,
                issued: np.ndarray) -> None:
    """Each activity's start waits for the latest of: its launch call's start, the previous activity on its stream,
    a cross-stream event wait."""
    m = len(gpu.ts)
    if not m:  # no GPU activity, so no stream to wait on: the counts are 0, as for host syncs
        g.notes.update(stream_waits=0, stream_waits_critical=0, stream_wait_source=NO_GPU)
        return
    base = g.n_cpu
    key = _stream_keys(gpu.device, gpu.stream)
    order = np.lexsort((gpu.ts, key))
    prev = np.full(m, NO, dtype=np.int64)
    same = key[order[1:]] == key[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    prev_time = np.where(prev >= 0, gpu.end[np.maximum(prev, 0)], -np.inf)
    wait_src, inferred = _stream_waits(trace, cpu, gpu, key, issued, np.maximum(launch_time, prev_time))
    wait_time = np.where(wait_src >= 0, gpu.end[np.maximum(wait_src, 0)], -np.inf)
    arrivals = np.stack([launch_time, prev_time, wait_time])
    which = np.argmax(arrivals, axis=0)
    has = np.isfinite(arrivals.max(axis=0))
    idx = np.arange(m)
    points = 2 * (base + idx)
    by_launch, by_prev, by_wait = has & (which == 0), has & (which == 1), has & (which == 2)
    g.pred[points[by_launch]] = 2 * launch_event[by_launch]
    g.seg_cause[points[by_launch]] = LAUNCH
    g.seg_kind[points[by_launch]] = K_LAUNCH
    g.seg_event[points[by_launch]] = launch_event[by_launch]
    g.pred[points[by_prev]] = 2 * (base + prev[by_prev]) + 1
    g.seg_cause[points[by_prev]] = gpu.cause[prev[by_prev]]
    g.seg_kind[points[by_prev]] = gpu.kind[prev[by_prev]]
    g.seg_event[points[by_prev]] = base + prev[by_prev]
    g.pred[points[by_wait]] = 2 * (base + wait_src[by_wait]) + 1
    g.seg_cause[points[by_wait]] = SYNC_WAIT
    g.seg_kind[points[by_wait]] = K_STREAM_WAIT
    g.notes["stream_waits"] = int((wait_src >= 0).sum())
    g.notes["stream_waits_critical"] = int(by_wait.sum())  # the last to arrive at their activity
    g.notes["stream_wait_source"] = inferred


def _stream_waits(trace, cpu: _Cpu, gpu: _Gpu, key: np.ndarray, issued: np.ndarray,
                  known: np.ndarray) -> Tuple[np.ndarray, str]:
    """Per activity, the activity on another stream it waited for (-1), and where that came from."""
    launches = trace.launches
    m = len(gpu.ts)
    out = np.full(m, NO, dtype=np.int64)
    waits = np.flatnonzero(_kind_mask(launches, ("sync",)) & (_col(launches, "wait_stream") >= 0)
                           & (_col(launches, "wait_corr") >= 0))
    names = launches.strings.get("name", [])
    waits = waits[[names[c] == "Stream Wait Event" for c in launches["name"][waits].tolist()]] if len(waits) \
        else waits
    if len(waits):
        src = _recorded_work(trace, cpu, gpu, key, issued, waits)
        dst = _next_issued(trace, cpu, gpu, key, issued, waits)
        ok = (src >= 0) & (dst >= 0)
        for s, d in zip(src[ok].tolist(), dst[ok].tolist()):  # one per wait call: few
            if out[d] < 0 or gpu.end[s] > gpu.end[out[d]]:
                out[d] = s
        return out, "cuda_sync events"
    if not _name_mask(launches, _STREAM_WAIT_CALL).any():
        return out, "none (no stream waits)"
    return _inferred_waits(gpu, key, known), "inferred"


def _col(table: Table, name: str) -> np.ndarray:
    return table[name] if name in table else np.full(len(table), NO, dtype=np.int64)


def _call_times(trace, cpu: _Cpu, correlations: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Start of the runtime call of each correlation id (the sync event's own start when not found)."""
    rows = find(_sorted_index(np.where(cpu.launch_row >= 0, cpu.correlation, NO)), correlations)
    return np.where(rows >= 0, cpu.ts[np.maximum(rows, 0)], fallback)


def _last_issued_before(key: np.ndarray, issued: np.ndarray, want_key: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per query, the activity on stream `want_key` issued last before time `t` (-1)."""
    order = np.lexsort((issued, key))
    k, s = key[order], issued[order]
    out = np.full(len(t), NO, dtype=np.int64)
    for q in range(len(t)):  # queries are sync calls: few
        lo, hi = np.searchsorted(k, want_key[q], "left"), np.searchsorted(k, want_key[q], "right")
        pos = lo + np.searchsorted(s[lo:hi], t[q], "left") - 1
        if pos >= lo:
            out[q] = order[pos]
    return out


def _recorded_work(trace, cpu: _Cpu, gpu: _Gpu, key: np.ndarray, issued: np.ndarray, rows: np.ndarray):
    """For sync events naming a cudaEventRecord: the last activity issued on `wait_on_stream` before that call."""
    launches = trace.launches
    record_t = _call_times(trace, cpu, launches["wait_corr"][rows], launches["ts"][rows])
    want = _stream_keys(launches["device"][rows], launches["wait_stream"][rows])
    return _last_issued_before(key, issued, want, record_t)


def _next_issued(trace, cpu: _Cpu, gpu: _Gpu, key: np.ndarray, issued: np.ndarray, rows: np.ndarray):
    """For Stream Wait Event sync events: the first activity issued on the waiting stream after the wait call."""
    launches = trace.launches
    call_t = _call_times(trace, cpu, launches["correlation"][rows], launches["ts"][rows])
    want = _stream_keys(launches["device"][rows], launches["stream"][rows])
    order = np.lexsort((issued, key))
    k, s = key[order], issued[order]
    out = np.full(len(rows), NO, dtype=np.int64)
    for q in range(len(rows)):
        lo, hi = np.searchsorted(k, want[q], "left"), np.searchsorted(k, want[q], "right")
        pos = lo + np.searchsorted(s[lo:hi], call_t[q], "right")
        if pos < hi:
            out[q] = order[pos]
    return out


def _inferred_waits(gpu: _Gpu, key: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Activities that started well after their known dependencies, just after another stream of their device
    finished an activity: that activity (see the module docstring)."""
    m = len(gpu.ts)
    out = np.full(m, NO, dtype=np.int64)
    late = np.flatnonzero(gpu.ts - np.where(np.isfinite(known), known, -np.inf) > WAIT_GAP_US)
    if not len(late):
        return out
    for dev in np.unique(gpu.device[late]).tolist():
        mine = np.flatnonzero(gpu.device == dev)
        by_end = mine[np.argsort(gpu.end[mine], kind="stable")]
        ends = gpu.end[by_end]
        q = late[gpu.device[late] == dev]
        pos = np.searchsorted(ends, gpu.ts[q] + SLACK_US, "right") - 1
        for back in range(8):  # the latest few ends: the first on another stream (short activities end early)
            p = pos - back
            cand = by_end[np.maximum(p, 0)]
            ok = (out[q] < 0) & (p >= 0) & (key[cand] != key[q]) & (gpu.end[cand] > known[q])
            ok &= gpu.ts[q] - gpu.end[cand] <= WAIT_GAP_US
            out[q[ok]] = cand[ok]
    return out


def _host_syncs(g: Graph, trace, cpu: _Cpu, gpu: _Gpu, issued: np.ndarray) -> None:
    """A blocking call's end waits for the GPU work it synchronised with (see the module docstring)."""
    if not len(gpu.ts) or not g.n_cpu:
        g.notes["host_syncs"] = 0
        return
    calls = np.flatnonzero(cpu.launch_row >= 0)
    blocking_name = _name_mask(trace.launches, SYNC_CALL)[cpu.launch_row[calls]]
    own = find(_sorted_index(gpu.correlation), cpu.correlation[calls])
    own_end = np.where(own >= 0, gpu.end[np.maximum(own, 0)], -np.inf)
    own_waited = (own_end > cpu.ts[calls]) & (own_end <= cpu.end[calls] + SLACK_US)
    blocking = blocking_name | own_waited
    calls, own, own_waited = calls[blocking], own[blocking], own_waited[blocking]
    g.cause[calls] = SYNC_WAIT
    g.kind[calls] = K_SYNC
    g.seg_cause[2 * calls], g.seg_cause[2 * calls + 1] = SYNC_WAIT, SYNC_WAIT
    g.seg_kind[2 * calls], g.seg_kind[2 * calls + 1] = K_SYNC, K_SYNC
    waited = np.where(own_waited, own, _scoped_work(trace, cpu, gpu, calls, issued))
    ok = waited >= 0
    g.pred[2 * calls[ok] + 1] = 2 * (g.n_cpu + waited[ok]) + 1
    g.notes["host_syncs"] = int(len(calls))
    g.notes["host_syncs_waiting"] = int(ok.sum())


def _scoped_work(trace, cpu: _Cpu, gpu: _Gpu, calls: np.ndarray, issued: np.ndarray) -> np.ndarray:
    """Per blocking call, the GPU activity it waited for: the last to end inside the call among the activities of
    its sync event's scope (stream, device, recorded work), else of the whole process (-1 when none ended in it)."""
    launches = trace.launches
    sync_corr = np.where(_kind_mask(launches, ("sync",)), launches["correlation"], NO)
    sync_row = find(_sorted_index(sync_corr), cpu.correlation[calls])
    t0, t1 = cpu.ts[calls], cpu.end[calls] + SLACK_US
    out = _last_ending_in(gpu.end, np.ones(len(gpu.end), bool), t0, t1)
    q = np.flatnonzero(sync_row >= 0)
    if not len(q):
        return out
    rows = sync_row[q]
    names = launches.strings.get("name", [])
    what = np.array([names[c] for c in launches["name"][rows].tolist()], dtype=object)
    device, stream = _col(launches, "device")[rows].astype(np.int64), _col(launches, "stream")[rows]
    key = _stream_keys(gpu.device, gpu.stream)
    scopes = ((what == "Stream Sync") & (stream >= 0), _stream_keys(device, stream), key), \
        ((what == "Context Sync") & (device >= 0), device, gpu.device)
    for chosen, query_key, member_key in scopes:  # one pass per stream or device synchronised on: few
        for k in np.unique(query_key[chosen]).tolist():
            mine = q[chosen & (query_key == k)]
            out[mine] = _last_ending_in(gpu.end, member_key == k, t0[mine], t1[mine])
    events = (what == "Event Sync") & (_col(launches, "wait_corr")[rows] >= 0)
    if events.any():
        src = _recorded_work(trace, cpu, gpu, key, issued, rows[events])
        mine = q[events]
        ends = gpu.end[np.maximum(src, 0)]
        out[mine] = np.where((src >= 0) & (t0[mine] < ends) & (ends <= t1[mine]), src, NO)
    return out


def _last_ending_in(end: np.ndarray, scope: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Per window (t0, t1], the activity in scope with the latest end inside it (-1)."""
    rows = np.flatnonzero(scope)
    rows = rows[np.argsort(end[rows], kind="stable")]
    ends = end[rows]
    pos = np.searchsorted(ends, t1, "right") - 1
    ok = (pos >= 0) & (ends[np.maximum(pos, 0)] > t0) if len(rows) else np.zeros(len(t0), bool)
    return np.where(ok, rows[np.maximum(pos, 0)] if len(rows) else NO, NO)
