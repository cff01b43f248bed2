"""Memory view: the allocator's [memory] events of a span (recorded with `profile_memory=True`), per device.

Each event is one allocation (Bytes > 0) or free (Bytes < 0) at an address, with the allocator's totals after it
(`Total Allocated`, `Total Reserved`; absent before torch 1.10, when the allocated curve is the running sum of
Bytes from the span start instead, and reserved is unknown). From them:
- the allocated / reserved / fragmentation (reserved - allocated) curves, reduced per pixel (first, min, max, last
  of each pixel: the drawn line is exact at that width however long the span);
- allocations matched to frees by address, each attributed to the innermost cpu_op running on the same thread at
  that time (its input shapes and `Module Hierarchy` when recorded);
- the peak and what was live at it; a free of an address never allocated in the span frees memory "allocated
  before the span", whose bytes still live at the peak are the peak minus the live allocations of the span;
- allocations by op (count, bytes, lifetime) and allocations never freed inside the span.

The section stores one row per event (numeric arrays) plus the op and device names; every view is computed from
them on request, so a route never reads the trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...sections import Section, SectionContext
from ...trace.kineto import KinetoTrace

# c10::DeviceType (c10/core/DeviceType.h), as [memory] events record it: ROCm builds record their GPUs as HIP (6)
# or as CUDA (1), depending on the version. Labels are torch's device strings.
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 7: "fpga",
                8: "maia", 9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps", 14: "meta", 15: "hpu", 16: "ve",
                17: "lazy", 18: "ipu", 19: "mtia", 20: "privateuse1"}
NO_MEMORY = ("this span has no memory events: record it with profile_memory=True "
             "(tb_gpuinsight.profile does by default)")
BEFORE_SPAN = "(allocated before the span)"
STEP_PREFIX = "ProfilerStep#"

_ARRAYS = ("ts", "bytes", "addr", "allocated", "reserved", "device", "op", "pair")


@dataclass
class MemoryEvents:
    """One span's [memory] events in time order. `pair[i]`: the index of the free of allocation i (or of the
    allocation freed by event i), -1 when unmatched. `op[i]` indexes `ops`, -1 when no cpu_op encloses it."""
    ts: np.ndarray
    bytes: np.ndarray
    addr: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    device: np.ndarray
    op: np.ndarray
    pair: np.ndarray
    devices: List[str]
    ops: List[Dict[str, str]]
    steps: List[Dict[str, Any]] = field(default_factory=list)
    start_us: float = 0.0
    end_us: float = 0.0
    totals_recorded: bool = True
    addresses_recorded: bool = True

    def __len__(self) -> int:
        return len(self.ts)

    def on(self, device: str) -> "MemoryEvents":
        """The events of one device ("cuda:0", "cpu"), pair indices renumbered."""
        rows, position = self._by_device()
        if device not in rows:
            raise KeyError(device)
        idx = rows[device]
        pair = self.pair[idx]
        arrays = {k: getattr(self, k)[idx] for k in _ARRAYS}
        arrays["pair"] = np.where(pair >= 0, position[np.maximum(pair, 0)], -1)
        return MemoryEvents(**arrays, devices=self.devices, ops=self.ops, steps=self.steps, start_us=self.start_us,
                            end_us=self.end_us, totals_recorded=self.totals_recorded,
                            addresses_recorded=self.addresses_recorded)

    def _by_device(self) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        """(each device's event indices, each event's position among its device's), made once: one pass for every
        device, not one per device (a trace may name thousands)."""
        memo = self.__dict__.get("_by_device_memo")
        if memo is None or memo[0] != len(self):
            order = np.argsort(self.device, kind="stable")
            cuts = np.flatnonzero(np.diff(self.device[order])) + 1
            parts = np.split(order, cuts) if len(order) else []
            rows = {self.devices[code]: p for p in parts for code in [int(self.device[p[0]])]
                    if 0 <= code < len(self.devices)}
            position = np.full(len(self), -1, dtype=np.int64)
            for p in parts:
                position[p] = np.arange(len(p))
            for name in self.devices:
                rows.setdefault(name, np.empty(0, dtype=np.int64))
            memo = self.__dict__["_by_device_memo"] = (len(self), rows, position)
        return memo[1], memo[2]

    # ------------------------------------------------------------------------------------------- section form

    def to_section(self) -> Section:
        info = {"devices": self.devices, "ops": self.ops, "steps": self.steps, "start_us": self.start_us,
                "end_us": self.end_us, "totals_recorded": self.totals_recorded,
                "addresses_recorded": self.addresses_recorded}
        return Section("memory", info, {k: getattr(self, k) for k in _ARRAYS})

    @classmethod
    def from_section(cls, section: Section) -> "MemoryEvents":
        info = section.check().info
        return cls(**{k: section.arrays[k] for k in _ARRAYS}, devices=list(info["devices"]), ops=list(info["ops"]),
                   steps=list(info["steps"]), start_us=float(info["start_us"]), end_us=float(info["end_us"]),
                   totals_recorded=bool(info["totals_recorded"]), addresses_recorded=bool(info["addresses_recorded"]))


# ---------------------------------------------------------------------------------------------------------------
# Building the events from a loaded trace.

def build_section(ctx: SectionContext) -> Section:
    """Section builder (registered as "memory")."""
    return memory_events(ctx.trace).to_section()


def memory_events(trace: KinetoTrace) -> MemoryEvents:
    """The [memory] events of a loaded trace, ordered, per-device totals filled, frees matched, ops attributed."""
    mem = trace.memory
    order = np.lexsort((mem["event"], mem["ts"]))
    ts = mem["ts"][order]
    nbytes = mem["bytes"][order]
    addr = mem["addr"][order]
    dev_codes, devices = _device_codes(mem["device_type"][order], mem["device_id"][order])
    allocated = mem["total_allocated"][order].copy()
    reserved = mem["total_reserved"][order].copy()
    totals = bool(len(ts)) and bool(np.isfinite(allocated).all())
    if not totals:  # torch < 1.10: no totals, the running sum of Bytes from the span start
        allocated = _running_sums(nbytes, dev_codes, len(devices))
        reserved = np.full(len(ts), np.nan)
    for d in range(len(devices)):  # the CPU allocator reports 0 reserved: it keeps no reserve, nothing to show
        idx = np.flatnonzero(dev_codes == d)
        if not np.any(reserved[idx]):
            reserved[idx] = np.nan
    addresses = bool(len(ts)) and bool((addr >= 0).all())
    pair = _match_frees(nbytes, addr, dev_codes) if addresses else np.full(len(ts), -1, dtype=np.int64)
    threads = [f"{p}/{t}" for p, t in zip(mem.values("pid"), mem.values("tid"))]
    tids = [threads[i] for i in order.tolist()]
    op_rows, ops = _enclosing_ops(trace, ts, tids)
    start = trace.meta.start_us if trace.meta.start_us is not None else (float(ts[0]) if len(ts) else 0.0)
    end = trace.meta.end_us if trace.meta.end_us is not None else (float(ts[-1]) if len(ts) else 0.0)
    return MemoryEvents(ts=ts.astype(np.float64), bytes=nbytes.astype(np.int64), addr=addr.astype(np.int64),
                        allocated=allocated.astype(np.float64), reserved=reserved.astype(np.float64),
                        device=dev_codes, op=op_rows, pair=pair, devices=devices, ops=ops,
                        steps=profiler_steps(trace), start_us=float(min(start, ts[0]) if len(ts) else start),
                        end_us=float(max(end, ts[-1]) if len(ts) else end), totals_recorded=totals,
                        addresses_recorded=addresses)


def _device_codes(dtype: np.ndarray, did: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    names: Dict[Tuple[int, int], int] = {}
    codes = np.empty(len(dtype), dtype=np.int32)
    for i, key in enumerate(zip(dtype.tolist(), did.tolist())):
        code = names.get(key)
        codes[i] = names.setdefault(key, len(names)) if code is None else code
    labels = [_device_label(t, d) for t, d in names]
    return codes, labels


def _device_label(dtype: int, did: int) -> str:
    kind = DEVICE_TYPES.get(dtype, f"device type {dtype}")
    return kind if did < 0 else f"{kind}:{did}"


def _running_sums(nbytes: np.ndarray, device: np.ndarray, n_devices: int) -> np.ndarray:
    out = np.zeros(len(nbytes), dtype=np.float64)
    for d in range(n_devices):
        idx = np.flatnonzero(device == d)
        out[idx] = np.cumsum(nbytes[idx])
    return out


def _match_frees(nbytes: np.ndarray, addr: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Each free paired with the latest open allocation at its address on its device."""
    pair = np.full(len(nbytes), -1, dtype=np.int64)
    open_at: Dict[Tuple[int, int], int] = {}
    for i, (b, a, d) in enumerate(zip(nbytes.tolist(), addr.tolist(), device.tolist())):
        if b > 0:
            open_at[(d, a)] = i
        elif b < 0:
            j = open_at.pop((d, a), None)
            if j is not None:
                pair[i], pair[j] = j, i
    return pair


def _enclosing_ops(trace: KinetoTrace, ts: np.ndarray, threads: Sequence[str]) -> Tuple[np.ndarray, List[Dict]]:
    """For each event, the innermost cpu_op of its thread whose [ts, ts + dur] holds it, as an index into distinct
    (op, input shapes, module) rows (-1 when no op holds it). The module is the op's `Module Hierarchy` when
    recorded, else the nn.Module calls (with_stack) that hold the event on its thread, outermost first."""
    ops, modules = trace.ops, trace.modules
    result = np.full(len(ts), -1, dtype=np.int32)
    if not len(ops) or not len(ts):
        return result, []
    op_threads, mod_threads = _threads(ops), _threads(modules)
    ev_threads = np.array(list(threads), dtype=object)
    rows: Dict[Tuple[str, str, str], int] = {}
    shape_text: Dict[int, str] = {}
    for thread in set(threads):
        events = np.flatnonzero(ev_threads == thread)
        on_ops = np.flatnonzero(op_threads == thread)
        on_mods = np.flatnonzero(mod_threads == thread)
        op_stacks = _enclosing(ops["ts"][on_ops], ops["dur"][on_ops], ts[events])
        mod_stacks = _enclosing(modules["ts"][on_mods], modules["dur"][on_mods], ts[events])
        for e, op_stack, mod_stack in zip(events.tolist(), op_stacks, mod_stacks):
            if not op_stack:
                continue
            row = int(on_ops[op_stack[-1]])
            code = int(ops["shape"][row])
            if code not in shape_text:
                shape_text[code] = _dims_text(trace.shape(code)[0]) if code >= 0 else ""
            module = ops.decode("module", int(ops["module"][row])) if "module" in ops else None
            if not module and mod_stack:
                module = "/".join(modules.decode("name", int(modules["name"][on_mods[m]])) or "" for m in mod_stack)
            key = (ops.decode("name", int(ops["name"][row])) or "", shape_text[code], module or "")
            result[e] = rows.setdefault(key, len(rows))
    return result, [dict(zip(("op", "shape", "module"), k)) for k in rows]


def _threads(table) -> np.ndarray:
    return np.array([f"{p}/{t}" for p, t in zip(table.values("pid"), table.values("tid"))], dtype=object)


def _enclosing(start: np.ndarray, dur: np.ndarray, times: np.ndarray) -> List[Tuple[int, ...]]:
    """For each time, the intervals that hold it, outermost first (indices into start / dur). One sweep over the
    intervals (parents before children) and the times together, keeping the stack of open intervals."""
    order = np.lexsort((-dur, start))
    starts, ends, rows = start[order].tolist(), (start + dur)[order].tolist(), order.tolist()
    out: List[Tuple[int, ...]] = [()] * len(times)
    stack: List[int] = []
    k = 0
    for i in np.argsort(times, kind="stable").tolist():
        t = float(times[i])
        while k < len(starts) and starts[k] <= t:
            while stack and ends[stack[-1]] < starts[k]:
                stack.pop()
            stack.append(k)
            k += 1
        while stack and ends[stack[-1]] < t:
            stack.pop()
        out[i] = tuple(rows[j] for j in stack)
    return out


def _dims_text(dims: Any) -> str:
    if not isinstance(dims, list):
        return ""
    return ", ".join(str(d) if d else "-" for d in dims)


def profiler_steps(trace: KinetoTrace) -> List[Dict[str, Any]]:
    """The ProfilerStep#N ranges of a trace (user annotations since 2022, ops in 2021 traces), in time order."""
    seen = {}
    for table in (trace.annotations, trace.ops):
        if not len(table):
            continue
        names = table.strings["name"]
        codes = [i for i, n in enumerate(names) if n.startswith(STEP_PREFIX)]
        if not codes:
            continue
        for row in np.flatnonzero(np.isin(table["name"], codes)).tolist():
            name = names[table["name"][row]]
            ts, dur = float(table["ts"][row]), float(table["dur"][row])
            seen.setdefault((name, ts), {"name": name, "ts": ts, "dur": dur})
    return sorted(seen.values(), key=lambda s: s["ts"])


# ---------------------------------------------------------------------------------------------------------------
# Views of one device's events (call `events.on(device)` first).

def curve(ev: MemoryEvents, width: int, start: Optional[float] = None, end: Optional[float] = None
          ) -> Dict[str, Any]:
    """Allocated, reserved and fragmentation over [start, end] (absolute trace us), reduced to at most `width`
    pixels: per non-empty pixel its time and the first, min, max and last value of each curve. A pixel's values
    include the level carried in from before it, so the drawn step line is exact at this width."""
    lo = ev.start_us if start is None else start
    hi = ev.end_us if end is None else end
    hi = max(hi, lo + 1e-3)
    first = int(np.searchsorted(ev.ts, lo, side="left"))
    last = int(np.searchsorted(ev.ts, hi, side="right"))
    pixel = np.minimum(((ev.ts[first:last] - lo) / (hi - lo) * width).astype(np.int64), width - 1)
    out: Dict[str, Any] = {"start_us": lo, "end_us": hi, "width": width, "events": last - first}
    if last == first:
        out["t_us"] = []
        for name in ("allocated", "reserved", "fragmentation"):
            out[name] = {"first": [], "min": [], "max": [], "last": []}
        return out
    heads = np.flatnonzero(np.r_[True, pixel[1:] != pixel[:-1]])
    out["t_us"] = np.round(lo + pixel[heads] * (hi - lo) / width, 3).tolist()
    series = {"allocated": ev.allocated, "reserved": ev.reserved, "fragmentation": ev.reserved - ev.allocated}
    for name, values in series.items():
        out[name] = _pixel_values(values, first, last, heads)
    return out


def _pixel_values(values: np.ndarray, first: int, last: int, heads: np.ndarray) -> Dict[str, List]:
    window = values[first:last]
    carried = values[first + heads - 1] if first + heads[0] > 0 else np.r_[np.nan, values[first + heads[1:] - 1]]
    lows = np.fmin(np.minimum.reduceat(window, heads), carried)
    highs = np.fmax(np.maximum.reduceat(window, heads), carried)
    tails = window[np.r_[heads[1:], len(window)] - 1]
    first_vals = np.where(np.isnan(carried), window[heads], carried)
    return {k: _byte_counts(v) for k, v in (("first", first_vals), ("min", lows), ("max", highs), ("last", tails))}


def _byte_counts(arr: np.ndarray) -> List[Optional[int]]:
    """Whole bytes (None where unknown): exact, and shorter in JSON than floats."""
    return [None if v != v else int(v) for v in arr.tolist()]


@dataclass
class Peak:
    index: int
    ts: float
    allocated: float
    reserved: float
    live: np.ndarray          # indices of the span's allocations live at the peak
    live_bytes: int
    before_span: float        # bytes allocated before the span still live at the peak: the level before the first
    #                           event less the frees of addresses not allocated in the span, up to the peak

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "ts": self.ts, "allocated": self.allocated,
                "reserved": None if self.reserved != self.reserved else self.reserved, "live_count": len(self.live),
                "live_bytes": self.live_bytes,
                "before_span": None if self.before_span != self.before_span else self.before_span,
                "unexplained": None if self.before_span != self.before_span else
                self.allocated - self.live_bytes - self.before_span}


def peak(ev: MemoryEvents) -> Optional[Peak]:
    """The first time the allocated curve is highest, and the allocations live then."""
    if not len(ev):
        return None
    p = int(np.argmax(ev.allocated))
    return Peak(p, float(ev.ts[p]), float(ev.allocated[p]), float(ev.reserved[p]), *_live_at(ev, p))


def _live_at(ev: MemoryEvents, p: int) -> Tuple[np.ndarray, int, float]:
    idx = np.arange(len(ev))
    live = np.flatnonzero((idx <= p) & (ev.bytes > 0) & ((ev.pair < 0) | (ev.pair > p)))
    if not ev.addresses_recorded:  # nothing can be matched: what is live is unknown
        return live[:0], 0, float("nan")
    live_bytes = int(ev.bytes[live].sum())
    unknown_frees = (idx <= p) & (ev.bytes < 0) & (ev.pair < 0)
    before = float(ev.allocated[0] - ev.bytes[0]) + float(ev.bytes[unknown_frees].sum())
    return live, live_bytes, before


def allocations(ev: MemoryEvents, which: str = "all", op: Optional[int] = None) -> np.ndarray:
    """Indices of allocations: "all", "live_at_peak", "never_freed" (no free inside the span); of one op."""
    if which == "live_at_peak":
        pk = peak(ev)
        idx = pk.live if pk else np.empty(0, dtype=np.int64)
    else:
        idx = np.flatnonzero(ev.bytes > 0)
        if which == "never_freed":
            idx = idx[ev.pair[idx] < 0]
    if op is None:
        return idx
    groups = op_groups(ev)
    codes = ev.op[idx]
    return idx[(codes >= 0) & (groups[np.maximum(codes, 0)] == groups[op])] if op >= 0 else idx[codes < 0]


def op_groups(ev: MemoryEvents) -> np.ndarray:
    """For each op row, the first row with the same op and input shapes (the by-op table's grouping: one row per
    op and shapes whatever module called it)."""
    first: Dict[Tuple[str, str], int] = {}
    return np.array([first.setdefault((o["op"], o["shape"]), i) for i, o in enumerate(ev.ops)] + [-1],
                    dtype=np.int64)


def allocation_rows(ev: MemoryEvents, idx: np.ndarray) -> List[Dict[str, Any]]:
    """One row per allocation: time from the span start, bytes, address, op, lifetime (None: not freed)."""
    rows = []
    freed = ev.pair[idx]
    for i, j in zip(idx.tolist(), freed.tolist()):
        op = ev.ops[ev.op[i]] if ev.op[i] >= 0 else {"op": "", "shape": "", "module": ""}
        rows.append({"index": i, "t_ms": float(ev.ts[i] - ev.start_us) / 1e3, "bytes": int(ev.bytes[i]),
                     "addr": hex(int(ev.addr[i])) if ev.addr[i] >= 0 else "", "op_index": int(ev.op[i]), **op,
                     "lifetime_us": float(ev.ts[j] - ev.ts[i]) if j >= 0 else None,
                     "allocated_after": float(ev.allocated[i])})
    return rows


def by_op(ev: MemoryEvents) -> List[Dict[str, Any]]:
    """Allocations grouped by the op and input shapes that made them; `module` is the module that called it, or
    the common part of the modules that did. `op_index` identifies the group for `allocations(..., op=)`."""
    allocs = np.flatnonzero(ev.bytes > 0)
    if not len(allocs):
        return []
    groups = op_groups(ev)
    ops = groups[ev.op[allocs]]
    pk = peak(ev)
    at_peak = np.zeros(len(ev), dtype=bool)
    at_peak[pk.live] = True
    freed = ev.pair[allocs] >= 0
    life = np.where(freed, ev.ts[np.maximum(ev.pair[allocs], 0)] - ev.ts[allocs], np.nan)
    matched = ev.addresses_recorded
    rows = []
    for code in np.unique(ops).tolist():
        m = ops == code
        b = ev.bytes[allocs[m]]
        lt = life[m]
        op = ev.ops[code] if code >= 0 else {"op": "(no enclosing op)", "shape": "", "module": ""}
        op = {**op, "module": _common_module([ev.ops[c]["module"] for c in np.unique(ev.op[allocs[m]]).tolist()
                                              if c >= 0])}
        row = {"op_index": code, **op, "allocations": int(m.sum()), "bytes": int(b.sum()), "max_bytes": int(b.max()),
               "freed": None, "never_freed": None, "never_freed_bytes": None, "mean_lifetime_us": None,
               "max_lifetime_us": None, "live_at_peak_bytes": None}
        if matched:  # without addresses nothing is known of frees and lifetimes
            row.update({"freed": int(freed[m].sum()), "never_freed": int((~freed[m]).sum()),
                        "never_freed_bytes": int(b[~freed[m]].sum()),
                        "mean_lifetime_us": float(np.nanmean(lt)) if np.isfinite(lt).any() else None,
                        "max_lifetime_us": float(np.nanmax(lt)) if np.isfinite(lt).any() else None,
                        "live_at_peak_bytes": int(ev.bytes[allocs[m][at_peak[allocs[m]]]].sum())})
        rows.append(row)
    return rows


def _common_module(paths: List[str]) -> str:
    """One module path, or the part all paths share followed by how many modules there were."""
    distinct = sorted(set(paths))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    parts = [p.split("/") for p in distinct]
    common = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    return "/".join(common + [f"… ({len(distinct)} modules)"])


def device_summary(ev: MemoryEvents) -> Dict[str, Any]:
    """Counts, peak and provenance of one device's events."""
    allocs, frees = ev.bytes > 0, ev.bytes < 0
    pk = peak(ev)
    unknown_frees = frees & (ev.pair < 0)
    never = allocs & (ev.pair < 0)
    frag = ev.reserved - ev.allocated
    return {"events": len(ev), "allocations": int(allocs.sum()), "frees": int(frees.sum()),
            "allocated_bytes": int(ev.bytes[allocs].sum()),
            "frees_before_span": int(unknown_frees.sum()) if ev.addresses_recorded else None,
            "freed_before_span_bytes": int(-ev.bytes[unknown_frees].sum()) if ev.addresses_recorded else None,
            "never_freed": int(never.sum()) if ev.addresses_recorded else None,
            "never_freed_bytes": int(ev.bytes[never].sum()) if ev.addresses_recorded else None,
            "peak": pk.to_dict() if pk else None,
            "peak_reserved": _max(ev.reserved), "peak_fragmentation": _max(frag),
            "start_allocated": float(ev.allocated[0] - ev.bytes[0]) if len(ev) else None,
            "end_allocated": float(ev.allocated[-1]) if len(ev) else None,
            "allocated_source": "Total Allocated" if ev.totals_recorded else
            "running sum of Bytes from the span start (the trace has no Total Allocated: torch < 1.10)",
            "reserved_source": _reserved_source(ev),
            "live_source": "allocations matched to frees by address" if ev.addresses_recorded else
            "unknown (the trace has no Addr: allocations cannot be matched to frees)"}


def _reserved_source(ev: MemoryEvents) -> str:
    if not ev.totals_recorded:
        return "unknown (the trace has no Total Reserved)"
    if len(ev) and np.isnan(ev.reserved).all():
        return "none (Total Reserved is 0 throughout: this allocator keeps no reserve)"
    return "Total Reserved"


def _max(values: np.ndarray) -> Optional[float]:
    return float(np.nanmax(values)) if len(values) and np.isfinite(values).any() else None


def summary(events: MemoryEvents) -> Dict[str, Any]:
    """Every device's summary, the steps and the span's time range."""
    return {"has_memory": bool(len(events)), "message": None if len(events) else NO_MEMORY,
            "start_us": events.start_us, "end_us": events.end_us, "steps": events.steps,
            "devices": [{"device": d, **device_summary(events.on(d))} for d in events.devices]}


# ---------------------------------------------------------------------------------------------------------------
# The Python API's report (pandas).

@dataclass
class MemoryReport:
    """The Memory view of one trace as DataFrames (one `device` column in each): `events` (the curves: every
    [memory] event with allocated, reserved, fragmentation and its op), `by_op`, `live_at_peak` (with a row
    "(allocated before the span)" for the part of the peak allocated before the span) and `never_freed`;
    `summary` holds each device's peak, counts and the provenance of every figure; `steps` the ProfilerStep ranges."""
    summary: Dict[str, Any]
    events: Any
    by_op: Any
    live_at_peak: Any
    never_freed: Any
    steps: Any


def report(events: MemoryEvents) -> MemoryReport:
    import pandas as pd

    # Rows and columns of every device first, one DataFrame per table at the end: a frame per device made a trace
    # of thousands of devices cost minutes.
    rows: Dict[str, List[Dict[str, Any]]] = {"by_op": [], "live_at_peak": [], "never_freed": []}
    columns: List[Dict[str, Any]] = []
    for device in events.devices:
        ev = events.on(device)
        columns.append(_event_columns(ev, device))
        live = allocation_rows(ev, allocations(ev, "live_at_peak"))
        pk = peak(ev)
        if pk is not None and pk.before_span == pk.before_span and pk.before_span > 0:
            live.append({"index": -1, "bytes": int(pk.before_span), "op": BEFORE_SPAN})
        for table, part in (("by_op", by_op(ev)), ("live_at_peak", live),
                            ("never_freed", allocation_rows(ev, allocations(ev, "never_freed")))):
            rows[table] += [{**r, "device": device} for r in part]
    if not events.devices:
        out = {k: pd.DataFrame() for k in ("events", *rows)}
    else:
        out = {k: pd.DataFrame(v) if v else pd.DataFrame(columns=["device"]) for k, v in rows.items()}
        out["events"] = pd.DataFrame({k: np.concatenate([c[k] for c in columns]) for k in columns[0]})
    return MemoryReport(summary(events), out["events"], out["by_op"], out["live_at_peak"], out["never_freed"],
                        pd.DataFrame(events.steps, columns=["name", "ts", "dur"]))


def _event_columns(ev: MemoryEvents, device: str) -> Dict[str, Any]:
    names = np.array([ev.ops[o]["op"] if o >= 0 else "" for o in ev.op.tolist()], dtype=object)
    return {"device": np.full(len(ev), device, dtype=object), "ts": ev.ts, "t_ms": (ev.ts - ev.start_us) / 1e3,
            "bytes": ev.bytes, "addr": ev.addr, "allocated": ev.allocated, "reserved": ev.reserved,
            "fragmentation": ev.reserved - ev.allocated, "op": names}
