"""Kernel efficiency: FLOPs and bytes per GPU activity, rated against its device's datasheet peaks.

Model (documented for users in README "How efficiency is computed"):
- Every kernel, memcpy and memset is linked to its launching op (`correlate.py`). The op's FLOPs and bytes come from
  its shapes (`estimate/flops.py`, `estimate/bytes.py`) or, for Inductor kernels, from `kernel_flop` /
  `kernel_num_gb`.
- One op may launch several kernels. Its FLOPs and bytes go to its receiving activities, split among them by
  duration so they sum to the op's totals exactly (nothing is double counted): its compute kernels (GEMM, conv,
  attention, Triton/Inductor, `kernel_roles.py`), else its plain work kernels, else its helpers. Helpers (layout
  transforms, split-K reductions, bias/epilogue kernels, memsets, memcpys) take no FLOPs and their own bytes: the
  tensor they move (`helper_bytes.py`, with its provenance in the bytes reason), unknown with a reason when the
  trace does not say which tensor or its size. Memsets/memcpys are known by their event kind.
- Kernels replayed by a CUDA/HIP graph launch are not their enclosing op's work; compiled-region ops
  (`Torch-Compiled Region`, `CompiledFunction`) give no shape estimate. Without an op, a kernel takes the figures
  of identical launches (same name, grid, block, registers) when there are some.
- Memcpy and memset do no FLOPs; their bytes are the `bytes` arg. Device-to-device copies move twice that through
  DRAM (read and write); host<->device copies go over the bus and get no % of DRAM peak.
- The peak a kernel is rated against is its op's dtype (fp32 kernels whose name says tf32 use the TF32 peak); when
  the op gives none, the dtype the kernel's name spells (sgemm, h884, bf16, `<float>`...); or the dtype the
  caller forces. Unknown FLOPs, bytes, dtype or device stay unknown (NaN / None), never 0.
- Bound: compute when arithmetic intensity (FLOP/byte) reaches the device's ridge point for that dtype, memory
  below it. Efficiency is achieved / attainable, attainable = min(peak, intensity x DRAM bandwidth) when both are
  known; % of DRAM peak when only bytes are known; % of peak when only FLOPs are.
- Over the roof: more than 100 % of the compute peak, or more than DRAM_MARGIN x the DRAM peak, marks a kernel
  (`over_roof`, `roof_cause`) and leaves it out of the device's efficiency and totals; below that margin the
  efficiency is capped at 100 % (L2-resident operands). Grouped rows compute every rate over the same calls.
- Every activity carries a reason code (`reasons.py`) for what keeps it from a rated figure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..estimate.devices import DTYPES, DeviceMatch, DeviceSpec, load_datasheet, match_device, normalize_dtype
from ..estimate.flops import OpEstimate, estimate_op, freeze
from ..estimate.memo import default_memo
from ..trace.kineto import KinetoTrace
from ..trace.stages import stage
from ..trace.table import Interner, Table, unique_keys
from .collectives import activity_columns, communication_links, is_communication, mark_communication_groups, \
    rate_communication
from .correlate import (COMPILED_REGIONS, LINK_NAMES, NO_OP, graph_replayed, link_activities, op_parents,
                        under_compiled_region)
from .kernel_roles import (COMPUTE, COPIES, EPILOGUE, LAYOUT, MEMCPY, MEMSET, ROLE_REASONS, ROLES, SPLITK, WORK,
                           helper_bytes_reason, kernel_role)
from .helper_bytes import helper_rows_bytes
from .kernel_names import kernel_class
from .reasons import CODES, RATED, REASONS, reason_rows

AUTO = "auto"
_US = 1e-6


@dataclass
class DeviceReport:
    """A trace device, the datasheet row it matched (or why not), and its summary figures."""
    id: int
    props: Dict[str, Any]
    match: DeviceMatch
    summary: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        spec = self.match.spec
        return {"id": self.id, "trace_name": self.match.trace_name, "matched": spec is not None,
                "spec": spec.to_dict() if spec else None, "how": self.match.how,
                "ridge_points": self.match.to_dict().get("ridge_points", {}), "summary": self.summary}


@dataclass
class Efficiency:
    """Per-activity estimates (`activities`) plus per-device reports; aggregate with `by_name()` / `by_op()`.

    `trace` and `op_estimates` are None / empty for an analysis restored from the summary cache; everything the
    tables and views need lives in `activities`, `device_props` and `shapes` (op shape signatures by code).
    """
    trace: Optional[KinetoTrace]
    activities: Table
    devices: Dict[int, DeviceReport]
    dtype: str
    op_estimates: Dict[int, OpEstimate]
    device_props: List[Dict[str, Any]] = field(default_factory=list)
    shapes: Dict[int, Tuple[Any, Any, Any]] = field(default_factory=dict)

    def rerate(self, dtype: str = AUTO, datasheet: Optional[Sequence[DeviceSpec]] = None,
               device_name: Optional[str] = None) -> "Efficiency":
        """The same estimates rated against another dtype, datasheet or forced device (cheap: no re-read)."""
        return rate(self, dtype, datasheet, device_name)

    _groups: Dict[Tuple, Table] = field(default_factory=dict, repr=False, compare=False)

    def by_name(self, device: Optional[int] = None) -> Table:
        """One row per (device, kind, kernel name)."""
        return self._grouped(device, ("device", "kind", "name"))

    def by_op(self, device: Optional[int] = None) -> Table:
        """One row per (device, launching op, kernel name)."""
        return self._grouped(device, ("device", "op_name", "kind", "name"))

    def _grouped(self, device: Optional[int], keys: Tuple[str, ...]) -> Table:
        hit = self._groups.get((device, keys))
        if hit is None:  # memoised: the plugin asks for the same grouping on every page, sort and filter
            hit = self._groups[(device, keys)] = aggregate(self._on(device), keys)
        return hit

    def _on(self, device: Optional[int]) -> Table:
        acts = self.activities
        return acts if device is None else acts.take(acts["device"] == device)

    def summary(self) -> List[Dict[str, Any]]:
        """Device reports as JSON-ready dicts."""
        return [d.to_dict() for d in self.devices.values()]


def analyze_trace(trace: KinetoTrace, dtype: str = AUTO, datasheet: Optional[Sequence[DeviceSpec]] = None,
                  device_name: Optional[str] = None) -> Efficiency:
    """Estimate and rate every GPU activity of a loaded trace.

    `dtype`: "auto" (each kernel's own dtype) or a datasheet key (fp32, tf32, bf16, fp16, fp8, fp64, int8).
    `device_name`: rate every device as this datasheet row (a name or a trace-style device name).
    """
    _check_dtype(dtype)
    with stage("correlate"):
        parents = op_parents(trace.ops)
        kernel_links = link_activities(trace.kernels, trace.ops, trace.launches, parents)
        memop_links = link_activities(trace.memops, trace.ops, trace.launches, parents)
        acts = _activities(trace, kernel_links, memop_links)
    with stage("estimate"):
        estimates = _op_estimates(trace, acts["op"])
        _attribute(acts, _OpFacts(trace, estimates, under_compiled_region(trace.ops, parents)))
        acts.columns.update(activity_columns(trace, acts))  # collective sizes: comm kernels are rated on the link
    op_shape = np.full(len(acts), -1, dtype=np.int32)
    linked = acts["op"] >= 0
    op_shape[linked] = trace.ops["shape"][acts["op"][linked]]
    acts.columns["op_shape"] = op_shape
    shapes = {int(c): trace.shape(int(c)) for c in np.unique(op_shape[op_shape >= 0]).tolist()}
    unrated = Efficiency(trace, acts, {}, AUTO, estimates.by_row(), list(trace.devices), shapes)
    with stage("rate"):
        return rate(unrated, dtype, datasheet, device_name)


def rate(eff: Efficiency, dtype: str = AUTO, datasheet: Optional[Sequence[DeviceSpec]] = None,
         device_name: Optional[str] = None) -> Efficiency:
    """Match devices to the datasheet and rate every activity; returns a new Efficiency sharing the estimates."""
    _check_dtype(dtype)
    rows = list(datasheet) if datasheet is not None else load_datasheet()
    acts = Table(eff.activities.name, dict(eff.activities.columns), dict(eff.activities.strings))
    devices = _device_reports(eff.device_props, acts, rows, device_name)
    _rate(acts, devices, dtype)
    for report in devices.values():
        report.summary = device_summary(acts.take(acts["device"] == report.id))
    return Efficiency(eff.trace, acts, devices, dtype, eff.op_estimates, eff.device_props, eff.shapes)


def _check_dtype(dtype: str) -> None:
    if dtype != AUTO and dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use auto or one of {', '.join(DTYPES)}")


# ------------------------------------------------------------------------------------------ activity table

def _activities(trace: KinetoTrace, kernel_links, memop_links) -> Table:
    k, m = trace.kernels, trace.memops
    names, ops_names = Interner(), trace.ops.strings.get("name", [])

    def recode(table: Table, col: str) -> np.ndarray:
        cats = table.strings.get(col, [])
        lookup = np.fromiter((names.code(c) for c in cats), dtype=np.int32, count=len(cats))
        return lookup[table[col]] if len(table) else np.empty(0, dtype=np.int32)

    kinds = Interner()
    kind = np.concatenate([np.full(len(k), kinds.code("kernel"), dtype=np.int32),
                           _recode_kinds(m, kinds)])
    op = np.concatenate([kernel_links.op, memop_links.op])
    op_name = np.full(len(op), -1, dtype=np.int32)
    has_op = op >= 0
    op_name[has_op] = trace.ops["name"][op[has_op]]
    nan_m = np.full(len(m), np.nan)
    cols = {
        "kind": kind,
        "name": np.concatenate([recode(k, "name"), recode(m, "name")]),
        "device": np.concatenate([k["device"], m["device"]]).astype(np.int32),
        "stream": np.concatenate([k["stream"], m["stream"]]),
        "ts": np.concatenate([k["ts"], m["ts"]]),
        "dur": np.concatenate([k["dur"], m["dur"]]),
        "op": op,
        "op_name": op_name,
        "link": np.concatenate([kernel_links.how, memop_links.how]),
        "graph": np.concatenate([graph_replayed(kernel_links.launch, trace.launches),
                                 graph_replayed(memop_links.launch, trace.launches)]),
        "occupancy": np.concatenate([k["occupancy"], nan_m]),
        "registers": np.concatenate([k["registers"], np.full(len(m), -1, dtype=np.int32)]),
        "grid": np.concatenate([k["grid"], np.full(len(m), -1, dtype=np.int32)]),
        "block": np.concatenate([k["block"], np.full(len(m), -1, dtype=np.int32)]),
        "event": np.concatenate([k["event"], m["event"]]),
        "memop_bytes": np.concatenate([np.full(len(k), np.nan), m["bytes"]]),
    }
    strings = {"kind": kinds.items, "name": names.items, "op_name": list(ops_names),
               "grid": k.strings.get("grid", []), "block": k.strings.get("block", [])}
    return Table("activities", cols, strings)


def _recode_kinds(memops: Table, kinds: Interner) -> np.ndarray:
    cats = memops.strings.get("kind", [])
    lookup = np.fromiter((kinds.code(c) for c in cats), dtype=np.int32, count=len(cats))
    return lookup[memops["kind"]] if len(memops) else np.empty(0, dtype=np.int32)


def is_copy_event(acts: Table) -> np.ndarray:
    """Memcpy and memset activities, by their event kind (never by whether they carry a `bytes` arg)."""
    kinds = acts.strings.get("kind", [])
    copy = np.fromiter((k in COPIES for k in kinds), dtype=bool, count=len(kinds))
    return copy[acts["kind"]] if len(acts) and len(kinds) else np.zeros(len(acts), dtype=bool)


# ---------------------------------------------------------------------------------------------- estimates

@dataclass
class _OpEstimates:
    """Estimates of the ops that launched something: `used` op rows (sorted), per used op the index of its
    estimate in `table` (-1: none, as for compiled-region wrappers) and whether it is Inductor's."""
    used: np.ndarray
    index: np.ndarray
    table: List[OpEstimate]
    inductor: np.ndarray

    def by_row(self) -> Dict[int, OpEstimate]:
        return {row: self.table[i] for row, i in zip(self.used.tolist(), self.index.tolist()) if i >= 0}


def _op_estimates(trace: KinetoTrace, op_rows: np.ndarray) -> _OpEstimates:
    """Estimate once per distinct (op name, shape signature) among ops that launched something; Inductor's figures
    where the op carries them; none for compiled-region wrappers."""
    ops = trace.ops
    used = np.unique(op_rows[op_rows >= 0])
    names = ops.strings.get("name", [])
    signature = np.stack([ops["name"][used], ops["shape"][used]], axis=1)
    distinct, which = np.unique(signature, axis=0, return_inverse=True)
    table = _estimates(trace, [(names[n], s) for n, s in distinct.tolist()])
    index = which.reshape(-1).astype(np.int64)
    inductor = ~np.isnan(ops["kernel_flop"][used]) | ~np.isnan(ops["kernel_num_gb"][used])
    for i in np.flatnonzero(inductor).tolist():
        row = used[i]
        table.append(_with_inductor(table[index[i]], ops["kernel_flop"][row], ops["kernel_num_gb"][row]))
        index[i] = len(table) - 1
    is_region = np.fromiter((n.startswith(COMPILED_REGIONS) for n in names), dtype=bool, count=len(names))
    wrapper = is_region[ops["name"][used]] if len(names) else np.zeros(len(used), dtype=bool)
    index[wrapper & ~inductor] = -1  # a compiled region's inputs say nothing of its kernels
    return _OpEstimates(used, index, table, inductor)


def _estimates(trace: KinetoTrace, ops: List[Tuple[str, int]]) -> List[OpEstimate]:
    """Estimates of (op name, shape code) pairs: from the persistent memo where known, computed otherwise."""
    sigs = [(name, *((freeze(x) for x in trace.shape(code)) if code >= 0 else (None, None, None)))
            for name, code in ops]
    memo = default_memo()
    known = memo.get_many(set(sigs))
    missing = {s: estimate_op(*s) for s in set(sigs) - set(known)}
    memo.put_many(missing)
    known.update(missing)
    return [known[s] for s in sigs]


def _with_inductor(est: OpEstimate, kernel_flop: float, kernel_num_gb: float) -> OpEstimate:
    """Inductor's own figures, when the op carries them, win over the shape-based estimate."""
    flops, flops_reason = (est.flops, est.flops_reason) if np.isnan(kernel_flop) else (float(kernel_flop), "")
    nbytes, bytes_reason = (est.bytes, est.bytes_reason) if np.isnan(kernel_num_gb) else \
        (float(kernel_num_gb) * 1e9, "")
    return OpEstimate(flops, flops_reason, nbytes, bytes_reason, est.dtype)


@dataclass
class _OpFacts:
    """What attribution needs to know of the ops: their estimates, and which run in a compiled region."""
    trace: KinetoTrace
    estimates: _OpEstimates
    compiled: np.ndarray


# Receiving tiers: an op's FLOPs and bytes go to its activities of the lowest tier present (split by duration).
# Runtime fill/copy kernels take an op's bytes only when nothing else ran; copy events never take an op's figures.
_TIER = {COMPUTE: 0, WORK: 1, LAYOUT: 2, SPLITK: 2, EPILOGUE: 2, MEMSET: 3, MEMCPY: 3}
_NEVER = 9
SOURCES = ["", "formula", "inductor", "twin", "event", "capture"]  # where an activity's figures come from
_SOURCE = {name: i for i, name in enumerate(SOURCES)}


def _attribute(acts: Table, facts: _OpFacts) -> None:
    """FLOPs and bytes of every activity (rule in the module docstring); sets flops, bytes, their reasons, the
    dtype, the activity's role, the source of its figures and the reason code of what is missing."""
    copy_event = is_copy_event(acts)
    op = np.where(acts["graph"], NO_OP, acts["op"])  # replayed kernels are not their enclosing op's work
    est = _EstimateArrays(op, facts)
    op = np.where(est.found, op, NO_OP)
    role, receiver, helper = _receivers(acts, op, est, copy_event)
    share = _duration_share(np.where(receiver, op, NO_OP), acts["dur"])
    flops = np.where(receiver, est.flops * share, np.nan)
    flops[receiver & np.isin(role, [ROLES.index(MEMSET), ROLES.index(MEMCPY)])] = 0.0  # fills do no arithmetic
    nbytes = np.where(receiver, est.bytes * share, np.nan)
    flops[helper | copy_event] = 0.0
    own_bytes, notes = helper_rows_bytes(acts, op, role, helper, facts.trace)  # the tensor each helper moves
    nbytes[helper] = own_bytes[helper]
    nbytes[copy_event] = acts["memop_bytes"][copy_event]
    source = np.where(receiver, np.where(est.inductor, _SOURCE["inductor"], _SOURCE["formula"]), 0).astype(np.int8)
    source[helper] = _SOURCE["formula"]
    source[copy_event] = _SOURCE["event"]
    inferred = _infer_from_twins(acts, flops, nbytes, (op < 0) & ~copy_event)
    source[inferred] = _SOURCE["twin"]
    no_op = (op < 0) & ~inferred & ~copy_event
    flops_reason, bytes_reason, reasons = _reason_texts(est, receiver, helper, role, copy_event & np.isnan(nbytes),
                                                        notes)
    flops_reason[inferred] = bytes_reason[inferred] = reasons.code(INFERRED)
    flops_reason[no_op] = bytes_reason[no_op] = reasons.code("no launching op in the trace")
    dtype = np.where(receiver | helper, est.dtype, -1).astype(np.int32)
    gap = _gaps(acts, facts, flops, nbytes, no_op, helper | copy_event, est)
    acts.columns.update(flops=flops, bytes=nbytes, flops_reason=flops_reason, bytes_reason=bytes_reason,
                        dtype=dtype, role=role, source=source, gap=gap)
    acts.strings.update(flops_reason=reasons.items, bytes_reason=reasons.items, dtype=est.dtypes.items,
                        role=list(ROLES), source=SOURCES, gap=list(CODES))


def _receivers(acts: Table, op: np.ndarray, est: "_EstimateArrays",
               copy_event: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(role code, takes its op's figures, helper of its op) per activity: an op's figures go to its activities of
    the lowest tier present; its other kernels are helpers (plain ones beside a compute kernel become epilogues)."""
    role = _roles(acts, copy_event)
    role[(role == ROLES.index(WORK)) & est.inductor] = ROLES.index(COMPUTE)  # its op carries Inductor's figures
    tier = np.array([_TIER[r] for r in ROLES], dtype=np.int64)[role]
    tier[copy_event] = _NEVER
    receiver = (op >= 0) & (tier == _best_tier(op, tier)) & (tier < _NEVER)
    helper = (op >= 0) & ~receiver & ~copy_event
    role[helper & (role == ROLES.index(WORK))] = ROLES.index(EPILOGUE)
    return role, receiver, helper


def _reason_texts(est: "_EstimateArrays", receiver: np.ndarray, helper: np.ndarray, role: np.ndarray,
                  sizeless_copy: np.ndarray, notes: Dict[int, str]) -> Tuple[np.ndarray, np.ndarray, Interner]:
    """FLOP and byte reason codes per activity: the op's for receivers, the role's for helpers (or, for helpers
    with a tensor rule, the provenance of their bytes or why they are unknown: `notes`)."""
    reasons = Interner()
    reasons.code("")
    flops_reason = np.where(receiver, est.flops_reason, 0).astype(np.int32)
    bytes_reason = np.where(receiver, est.bytes_reason, 0).astype(np.int32)
    _remap(flops_reason, est.reasons, reasons)
    _remap(bytes_reason, est.reasons, reasons)
    for code in np.unique(role[helper]).tolist():
        rows = helper & (role == code)
        flops_reason[rows] = reasons.code(f"{ROLES[code]} kernel: {ROLE_REASONS[ROLES[code]]}")
        bytes_reason[rows] = reasons.code(helper_bytes_reason(ROLES[code]))
    for row, note in notes.items():
        bytes_reason[row] = reasons.code(note)
    bytes_reason[sizeless_copy] = reasons.code(helper_bytes_reason(MEMCPY))
    return flops_reason, bytes_reason, reasons


class _EstimateArrays:
    """The launching op's estimate spread onto activity rows (NaN / code 0 where the op has none); the work per
    estimate runs once per distinct estimate, not once per op."""

    def __init__(self, op: np.ndarray, facts: _OpFacts) -> None:
        ests = facts.estimates
        self.reasons, self.dtypes = Interner(), Interner()
        self.reasons.code("")
        self._fill(ests.table + [None])
        used = np.append(ests.used, -1)  # a sentinel slot: rows without an estimated op land on it
        pos = np.clip(np.searchsorted(ests.used, op), 0, len(ests.used))
        linked = (op >= 0) & (used[pos] == op)
        pos = np.where(linked, pos, len(ests.used))
        index = np.append(ests.index, -1)[pos]
        per_row = np.where(index >= 0, index, len(ests.table))  # the appended None: no estimate
        self.found, self.flops, self.bytes = self._ok[per_row], self._f[per_row], self._b[per_row]
        self.flops_reason, self.bytes_reason = self._fr[per_row], self._br[per_row]
        self.dtype = self._dt[per_row]
        self.inductor = np.append(ests.inductor, False)[pos]

    def _fill(self, kept: List[Optional[OpEstimate]]) -> None:
        k = len(kept)
        self._f, self._b = np.full(k, np.nan), np.full(k, np.nan)
        self._fr, self._br = np.zeros(k, np.int32), np.zeros(k, np.int32)
        self._dt, self._ok = np.full(k, -1, np.int32), np.zeros(k, bool)
        for i, est in enumerate(kept):
            if est is None:
                continue
            self._ok[i] = True
            self._f[i] = np.nan if est.flops is None else est.flops
            self._b[i] = np.nan if est.bytes is None else est.bytes
            self._fr[i], self._br[i] = self.reasons.code(est.flops_reason), self.reasons.code(est.bytes_reason)
            key = normalize_dtype(est.dtype)
            self._dt[i] = self.dtypes.code(key) if key else -1


def _remap(codes: np.ndarray, src: Interner, dst: Interner) -> None:
    lookup = np.fromiter((dst.code(t) for t in src.items), dtype=np.int32, count=len(src.items))
    codes[:] = lookup[codes]


def _roles(acts: Table, copy_event: np.ndarray) -> np.ndarray:
    """Role code (index in ROLES) of every activity from its event kind and name."""
    names = acts.strings["name"]
    by_name = np.fromiter((ROLES.index(kernel_role(nm)) for nm in names), dtype=np.int32, count=len(names))
    role = by_name[acts["name"]] if len(acts) else np.zeros(0, np.int32)
    kinds = acts.strings.get("kind", [])
    for i in np.flatnonzero(copy_event).tolist():
        role[i] = ROLES.index(MEMSET if kinds[acts["kind"][i]] == MEMSET else MEMCPY)
    return role


def _best_tier(op: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """Per activity, the lowest tier among the activities of its op (_NEVER without an op)."""
    out = np.full(len(op), _NEVER, dtype=np.int64)
    has = op >= 0
    if not has.any():
        return out
    groups, inverse = np.unique(op[has], return_inverse=True)
    low = np.full(len(groups), _NEVER, dtype=np.int64)
    np.minimum.at(low, inverse.reshape(-1), tier[has])
    out[has] = low[inverse.reshape(-1)]
    return out


def _gaps(acts: Table, facts: _OpFacts, flops: np.ndarray, nbytes: np.ndarray, no_op: np.ndarray,
          helper: np.ndarray, est: "_EstimateArrays") -> np.ndarray:
    """Reason code (index in reasons.CODES) of what keeps each activity from having both estimates."""
    n = len(acts)
    code = np.zeros(n, dtype=np.int8)
    missing = np.isnan(flops) | np.isnan(nbytes)
    index = {c: i for i, c in enumerate(CODES)}
    op = acts["op"]
    ops = facts.trace.ops
    compiled = np.zeros(n, dtype=bool)
    has = op >= 0
    compiled[has] = facts.compiled[op[has]]
    no_shapes = np.zeros(n, dtype=bool)
    no_shapes[has] = ops["shape"][op[has]] < 0
    texts = est.reasons.items
    no_formula = np.fromiter(("no FLOP formula" in t for t in texts), bool, count=len(texts))
    hidden = np.fromiter(("not arguments of this op" in t for t in texts), bool, count=len(texts))
    triton = np.fromiter(("Triton kernel without Inductor" in t for t in texts), bool, count=len(texts))
    said_no_shapes = np.fromiter(("no input shapes" in t for t in texts), bool, count=len(texts))
    flops_gone, bytes_gone = np.isnan(flops), np.isnan(nbytes)
    order = (  # first match wins
        ("graph_replay", no_op & acts["graph"]),
        ("compiled_region", missing & compiled & ~est.inductor & (no_op | flops_gone)),
        ("no_op", no_op),
        ("helper", missing & helper),
        ("no_shapes", missing & (no_shapes | said_no_shapes[est.flops_reason])),
        ("no_formula", flops_gone & no_formula[est.flops_reason]),
        ("hidden_size", flops_gone & hidden[est.flops_reason]),
        ("compiled_region", flops_gone & triton[est.flops_reason]),
        ("failed", flops_gone),
        ("no_bytes", bytes_gone),
    )
    todo = missing.copy()
    for label, mask in order:
        hit = todo & mask
        code[hit] = index[label]
        todo &= ~hit
    return code


INFERRED = ("no launching op: FLOPs and bytes of identical launches (same kernel, grid, block, registers) of this "
            "trace")


def _infer_from_twins(acts: Table, flops: np.ndarray, nbytes: np.ndarray, orphan: np.ndarray) -> np.ndarray:
    """Kernels without an op (launched before the profiling window, or replayed from a CUDA graph) take the
    median FLOPs and bytes of linked kernels with the same name, grid, block and registers: the same launch
    configuration almost always means the same problem size. Returns the rows filled in."""
    kernel = _launch_recorded(acts, "grid") & _launch_recorded(acts, "block")  # same name alone is no evidence
    known = kernel & ~orphan & ~np.isnan(flops)
    todo = kernel & orphan
    filled = np.zeros(len(acts), dtype=bool)
    if not known.any() or not todo.any():
        return filled
    keys = np.stack([acts[c].astype(np.int64) for c in ("name", "grid", "block", "registers")], axis=1)
    twins: Dict[Tuple[int, ...], List[int]] = {}
    for row in np.flatnonzero(known).tolist():
        twins.setdefault(tuple(keys[row].tolist()), []).append(row)
    for row in np.flatnonzero(todo).tolist():
        rows = twins.get(tuple(keys[row].tolist()))
        if rows:
            flops[row] = float(np.median(flops[rows]))
            nbytes[row] = float(np.nanmedian(nbytes[rows])) if not np.isnan(nbytes[rows]).all() else np.nan
            filled[row] = True
    return filled


def _launch_recorded(acts: Table, column: str) -> np.ndarray:
    """Rows whose launch configuration (grid or block) was recorded (memops have none; a damaged field is empty)."""
    codes = acts[column]
    texts = acts.strings.get(column, [])
    valid = np.array([bool(t.strip("[] ")) and t.strip() != "null" for t in texts] + [False], dtype=bool)
    return (codes >= 0) & valid[np.where(codes >= 0, codes, len(texts))]


def _duration_share(op: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each activity's share of its op's total activity time (1 for activities without an op)."""
    share = np.ones(len(op))
    has = op >= 0
    if not has.any():
        return share
    groups, inverse, counts = np.unique(op[has], return_inverse=True, return_counts=True)
    total = np.bincount(inverse, weights=dur[has])
    equal = 1.0 / counts[inverse]
    with np.errstate(invalid="ignore", divide="ignore"):
        by_time = dur[has] / total[inverse]
    share[has] = np.where(total[inverse] > 0, by_time, equal)
    return share


# ---------------------------------------------------------------------------------------------- devices

def _device_reports(listed: List[Dict[str, Any]], acts: Table, rows: Sequence[DeviceSpec],
                    device_name: Optional[str]) -> Dict[int, DeviceReport]:
    props_by_id = {int(d.get("id", i)): d for i, d in enumerate(listed)}
    # Devices that ran something; all listed devices only when none did (so a CPU-only trace shows its table).
    ids = sorted(set(np.unique(acts["device"]).tolist()) or set(props_by_id))
    reports = {}
    for dev in ids:
        props = props_by_id.get(dev) or _only_model(listed, dev)
        if device_name:
            props = {**props, "name": device_name, "numSms": None, "computeMajor": None, "totalGlobalMem": None}
        exact = [r for r in rows if r.name == device_name] if device_name else []
        match = DeviceMatch(device_name, exact[0], "datasheet row", "name") if exact else match_device(props, rows)
        if device_name:
            match = DeviceMatch(props_by_id.get(dev, {}).get("name", ""), match.spec,
                                f"forced by --device {device_name!r}: {match.how}", match.method)
        reports[dev] = DeviceReport(dev, props_by_id.get(dev, {"id": dev}), match)
    return {d: r for d, r in reports.items() if d >= 0}


def _only_model(listed: List[Dict[str, Any]], dev: int) -> Dict[str, Any]:
    """Props for a device id the trace does not list (ROCm traces may number devices differently from their
    deviceProperties): when every listed device is the same model, it is that model."""
    names = {d.get("name") for d in listed}
    if len(names) == 1 and listed[0].get("name"):
        return {**listed[0], "id": dev}
    return {"id": dev, "name": ""}


def _rate(acts: Table, devices: Dict[int, DeviceReport], dtype: str) -> None:
    """Achieved rates, % of peaks, intensity, bound and efficiency per activity."""
    n = len(acts)
    dur_s = np.where(acts["dur"] > 0, acts["dur"] * _US, np.nan)  # zero-length events have no rate
    with np.errstate(invalid="ignore", divide="ignore"):
        tflops = acts["flops"] / dur_s / 1e12
        gbps = acts["bytes"] / dur_s / 1e9
        intensity = acts["flops"] / acts["bytes"]
    rate_dtype = _rating_dtypes(acts, dtype)
    peak, dram = np.full(n, np.nan), np.full(n, np.nan)
    for dev, report in devices.items():
        on = acts["device"] == dev
        if report.match.dram_gbps:
            dram[on] = report.match.dram_gbps
        for key in set(rate_dtype[on].tolist()) - {""}:
            value = report.match.peak_tflops(key)
            if value:
                peak[on & (rate_dtype == key)] = value
    dram_traffic = _dram_traffic(acts) / dur_s / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        pct_peak = tflops / peak
        pct_dram = dram_traffic / dram
        ridge = peak * 1e3 / dram
        attainable = np.fmin(peak, intensity * dram / 1e3)
        roofline = tflops / attainable
    copy = is_copy_event(acts)
    tflops[copy] = pct_peak[copy] = intensity[copy] = np.nan  # copies do no arithmetic: not rated on FLOPs
    flops = acts["flops"]
    has_f, has_b = ~np.isnan(flops), ~np.isnan(acts["bytes"])
    with np.errstate(invalid="ignore"):
        efficiency = np.where(has_f & has_b & (flops > 0), roofline,
                              np.where(has_b, pct_dram, np.where(flops > 0, pct_peak, np.nan)))
    bound = np.full(n, 2, dtype=np.int32)  # unknown
    known = ~np.isnan(intensity) & ~np.isnan(ridge)
    bound[known] = np.where(intensity[known] >= ridge[known], 0, 1)
    bound[copy] = 1
    over, cause = _over_the_roof(acts, devices, pct_peak, pct_dram, rate_dtype, tflops)
    efficiency = np.where(over, efficiency, np.minimum(efficiency, 1.0))  # within the L2 margin: at the roof
    dtype_codes = Interner()
    acts.columns.update(tflops=tflops, gbps=gbps, intensity=intensity, peak_tflops=peak, dram_gbps=dram,
                        pct_peak=pct_peak, pct_dram=pct_dram, efficiency=efficiency, bound=bound,
                        rate_dtype=np.fromiter(dtype_codes.encode(rate_dtype.tolist()), np.int32, count=n),
                        over_roof=over, roof_cause=cause, reason=_reasons(acts, devices, over, efficiency))
    acts.strings.update(bound=["compute", "memory", "unknown"], rate_dtype=dtype_codes.items,
                        roof_cause=list(ROOF_CAUSES.values()), reason=list(CODES))
    _rate_links(acts, devices)


def _rate_links(acts: Table, devices: Dict[int, DeviceReport]) -> None:
    """Communication kernels are rated on the interconnect (busbw / link); above the link is over the roof."""
    rate_communication(acts, devices)
    every = is_communication(acts)
    comm = every & np.isfinite(acts["efficiency"])
    acts["reason"][comm] = CODES.index(RATED)
    unsized = every & ~comm & (acts["dur"] > 0)
    links = communication_links(acts)
    acts["reason"][unsized & (links == "internode")] = CODES.index("comm_internode")
    acts["reason"][unsized & (links != "internode")] = CODES.index("comm_unsized")
    with np.errstate(invalid="ignore"):
        over = comm & (acts["efficiency"] > 1.0)
    acts["over_roof"][over] = True
    acts["roof_cause"][over] = _CAUSE_CODES["link"]
    acts["reason"][over] = CODES.index("over_roof")


# Over the roof. Compute: more than 100 % of the dtype's peak is impossible. DRAM: the bytes model charges every
# operand to DRAM, but operands a previous kernel just wrote may still sit in the last-level cache (the datasheet
# row's cache_mb: 50 MB L2 on H100, 6 MB on V100, 256 MB Infinity Cache on MI300X) and be read from there. That
# explains a rate above the DRAM peak only when the kernel's bytes per call fit in that cache, and then at most
# about twice the peak (a read-and-write kernel whose reads all hit the cache: the writes still go out); efficiency
# then counts as 100 %. Anything else above the DRAM peak means the byte estimate itself is wrong. A row without a
# cache size keeps the 2x margin alone.
DRAM_MARGIN = 2.0
ROOF_CAUSES = {
    "": "",
    "tf32": "above the fp32 peak: the kernel probably ran on TF32 tensor cores (its name does not say so)",
    "inductor": "Inductor's kernel_flop of a fused region charged to one kernel",
    "twin": "figures copied from an identical launch that did different work",
    "device": "wrong device row? the datasheet row was matched from properties, not by name",
    "fast_conv": "Winograd/FFT convolution: fewer arithmetic operations than the direct-convolution FLOPs counted",
    "fused": "FLOPs of a fused op charged to this kernel (or other kernels did part of the op's work)",
    "inplace": "bytes overestimated: in-place write into, or indexed read from, a large buffer (a slice is touched)",
    "bytes": "bytes overestimated: above the DRAM peak with more bytes per call than the L2 / Infinity Cache "
             "holds (or over twice the peak), which cache-resident operands cannot explain",
    "link": "above the interconnect's bandwidth: the message or group size was misread, or the transfer did not "
            "cross the link (peers on the same GPU, several collectives in one kernel)",
}
_CAUSE_CODES = {key: i for i, key in enumerate(ROOF_CAUSES)}
_INPLACE = ("index_put", "index_copy", "index_add", "scatter", "masked_scatter", "cache", "copy_", "fill_", "embedding",
            "lookup", "gather", "index_select")
_FAST_CONV = ("winograd", "fft")


def _over_the_roof(acts: Table, devices: Dict[int, DeviceReport], pct_peak: np.ndarray, pct_dram: np.ndarray,
                   rate_dtype: np.ndarray, tflops: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(over the roof per activity, index of its likely cause in ROOF_CAUSES)."""
    with np.errstate(invalid="ignore"):
        over_compute = pct_peak > 1.0
        over_dram = (pct_dram > DRAM_MARGIN) | ((pct_dram > 1.0) & ~_fits_cache(acts, devices))
    over = over_compute | over_dram
    cause = np.zeros(len(acts), dtype=np.int8)
    ops, sources, names = acts.strings["op_name"], acts.strings.get("source", SOURCES), acts.strings["name"]
    for i in np.flatnonzero(over).tolist():
        report = devices.get(int(acts["device"][i]))
        if over_compute[i]:
            key = _compute_cause(report, rate_dtype[i], tflops[i], sources[acts["source"][i]])
            if key == "fused" and any(t in names[acts["name"][i]].lower() for t in _FAST_CONV):
                key = "fast_conv"
        else:
            op = ops[acts["op_name"][i]] if acts["op_name"][i] >= 0 else ""
            key = "inplace" if op.endswith("_") or any(t in op.lower() for t in _INPLACE) else "bytes"
        cause[i] = _CAUSE_CODES[key]
    return over, cause


def _fits_cache(acts: Table, devices: Dict[int, DeviceReport]) -> np.ndarray:
    """Rows whose bytes per call fit in their device's last-level cache (True where the size is not known)."""
    limit = np.full(len(acts), np.inf)
    for dev, report in devices.items():
        spec = report.match.spec
        if spec is not None and spec.cache_mb:
            limit[acts["device"] == dev] = spec.cache_mb * 2 ** 20
    with np.errstate(invalid="ignore"):
        return ~(acts["bytes"] > limit)


def _compute_cause(report: Optional[DeviceReport], dtype: str, tflops: float, source: str) -> str:
    tf32 = report.match.peak_tflops("tf32") if report and report.match.spec else None
    if dtype == "fp32" and tf32 and tflops <= tf32:
        return "tf32"
    if source in ("inductor", "twin"):
        return source
    if report and report.match.method != "name":
        return "device"
    return "fused"


def _reasons(acts: Table, devices: Dict[int, DeviceReport], over: np.ndarray, efficiency: np.ndarray) -> np.ndarray:
    """The estimate gap of each activity, else why it has no rating (unknown device, no peak, over the roof)."""
    index = {c: i for i, c in enumerate(CODES)}
    reason = acts["gap"].astype(np.int8).copy()
    unmatched = np.isin(acts["device"], [d for d, r in devices.items() if r.match.spec is None])
    unrated = (reason == 0) & ~np.isfinite(efficiency) & ~is_copy_event(acts) & (acts["dur"] > 0)
    reason[unrated & unmatched] = index["unknown_device"]
    reason[unrated & ~unmatched] = index["no_peak"]
    reason[over] = index["over_roof"]
    return reason


def _rating_dtypes(acts: Table, dtype: str) -> np.ndarray:
    """The datasheet dtype each activity is rated against ('' when unknown)."""
    n = len(acts)
    if dtype != AUTO:
        return np.full(n, dtype, dtype=object)
    cats, names = acts.strings["dtype"], acts.strings["name"]
    from_name = [kernel_name_dtype(name) for name in names]
    out = np.empty(n, dtype=object)
    for i, (d, name) in enumerate(zip(acts["dtype"].tolist(), acts["name"].tolist())):
        key = cats[d] if d >= 0 else from_name[name]
        if key == "fp32" and (from_name[name] == "tf32" or "tensorop_s" in names[name]):
            key = "tf32"  # TF32 tensor-core kernels (CUTLASS tensorop_s1688...): the op's dtype still says float
        out[i] = key
    return out


# Kernel-name hints, most specific first: used when the launching op gives no dtype (no shapes recorded, no op).
_NAME_DTYPES = (
    ("tf32", "tf32"), ("tensorop_s", "tf32"), ("bf16", "bf16"), ("bfloat16", "bf16"), ("e4m3", "fp8"), ("e5m2", "fp8"), ("fp8", "fp8"),
    ("fp16", "fp16"), ("f16", "fp16"), ("half", "fp16"), ("hgemm", "fp16"), ("h884", "fp16"), ("h1688", "fp16"),
    ("h16816", "fp16"), ("dgemm", "fp64"), ("double", "fp64"), ("fp64", "fp64"), ("int8", "int8"),
    ("i8i8", "int8"), ("sgemm", "fp32"), ("s884", "fp32"), ("s1688", "fp32"), ("fp32", "fp32"),
    ("<float", "fp32"), ("f32", "fp32"),
)


def kernel_name_dtype(name: str) -> str:
    """The dtype a kernel name spells out (cuBLAS/cuDNN/CUTLASS conventions, template args), or ''."""
    low = name.lower()
    for needle, key in _NAME_DTYPES:
        if needle in low:
            return key
    return ''


def _dram_traffic(acts: Table) -> np.ndarray:
    """Bytes through DRAM: kernels' estimate; memset its size; DtoD copies twice; host copies none (NaN)."""
    traffic = acts["bytes"].copy()
    kinds, names = acts.strings["kind"], acts.strings["name"]
    for i in np.flatnonzero(is_copy_event(acts) & ~np.isnan(traffic)).tolist():
        kind, name = kinds[acts["kind"][i]], names[acts["name"][i]]
        if kind == "memcpy":
            traffic[i] = 2 * traffic[i] if "DtoD" in name else np.nan
    return traffic


# ---------------------------------------------------------------------------------------------- summaries

def device_summary(acts: Table) -> Dict[str, Any]:
    """GPU busy time, kernel and memop time, estimate coverage, time-weighted efficiency and the share of kernel
    time per reason code of one device. Kernels over the roof are left out of the efficiency and the totals."""
    is_kernel = ~is_copy_event(acts)
    dur = acts["dur"]
    kernel_time = float(dur[is_kernel].sum())
    over = acts["over_roof"] if "over_roof" in acts else np.zeros(len(acts), dtype=bool)
    with_flops = is_kernel & ~np.isnan(acts["flops"])
    with_bytes = is_kernel & ~np.isnan(acts["bytes"])
    kept = is_kernel & ~over
    rated = kept & np.isfinite(acts["efficiency"])
    rated_time = float(dur[rated].sum())
    return {
        "gpu_busy_us": busy_time(acts["ts"], dur),
        "kernel_time_us": kernel_time,
        "memop_time_us": float(dur[~is_kernel].sum()),
        "kernel_count": int(is_kernel.sum()),
        "flop_time_share": _ratio(float(dur[with_flops].sum()), kernel_time),
        "byte_time_share": _ratio(float(dur[with_bytes].sum()), kernel_time),
        "covered_time_share": _ratio(float(dur[with_flops & with_bytes & ~over].sum()), kernel_time),
        "rated_time_share": _ratio(rated_time, kernel_time),
        "over_roof_time_share": _ratio(float(dur[is_kernel & over].sum()), kernel_time),
        "over_roof_count": int((is_kernel & over).sum()),
        "efficiency": _ratio(float((acts["efficiency"][rated] * dur[rated]).sum()), rated_time),
        "flops": float(np.nansum(acts["flops"][kept])),
        "bytes": float(np.nansum(acts["bytes"][kept])),
        "reasons": reason_rows(_reason_shares(acts, is_kernel, kernel_time)),
        **_compute_coverage(acts, is_kernel),
    }


def _compute_coverage(acts: Table, is_kernel: np.ndarray, top: int = 5) -> Dict[str, Any]:
    """FLOP coverage of compute time (kernel time outside communication, which is rated on the link) and the kernel
    classes with the most time without FLOPs, each with its commonest reason: the honest headline of what is rated.
    """
    names, kinds, ops = acts.strings["name"], acts.strings["kind"], acts.strings.get("op_name", [])
    classes = Interner()
    uniq, inverse = unique_keys(acts, ("name", "kind", "op_name"))  # classify each distinct kernel once
    distinct = np.array([classes.code(kernel_class(names[n], kinds[k], ops[o] if o >= 0 else None))
                         for n, k, o in uniq.tolist()], dtype=np.int32)
    cls = distinct[inverse] if len(acts) else np.empty(0, dtype=np.int32)
    labels = classes.items
    comm = np.array([c == "communication" for c in labels] + [False])[cls]
    compute = is_kernel & ~comm
    dur = acts["dur"]
    unknown = compute & np.isnan(acts["flops"])
    compute_time = float(dur[compute].sum())
    rows = []
    for c in np.unique(cls[unknown]).tolist():
        mine = unknown & (cls == c)
        reasons = np.bincount(acts["reason"][mine].astype(np.int64), weights=dur[mine], minlength=len(CODES))
        code = CODES[int(np.argmax(reasons))] if reasons.any() else ""
        rows.append({"family": labels[c], "time_share": _ratio(float(dur[mine].sum()), compute_time),
                     "reason": REASONS[code][0] if code in REASONS else "", "code": code})
    rows.sort(key=lambda r: -(r["time_share"] or 0))
    return {"compute_time_us": compute_time,
            "compute_flop_share": _ratio(float(dur[compute & ~unknown].sum()), compute_time),
            "unrated_families": rows[:top]}


def _reason_shares(acts: Table, is_kernel: np.ndarray, kernel_time: float) -> Dict[str, float]:
    if "reason" not in acts or kernel_time <= 0:
        return {}
    time = np.bincount(acts["reason"][is_kernel].astype(np.int64), weights=acts["dur"][is_kernel],
                       minlength=len(CODES))
    return {CODES[i]: float(t) / kernel_time for i, t in enumerate(time) if i and t > 0}


def busy_time(ts: np.ndarray, dur: np.ndarray) -> float:
    """Length of the union of [ts, ts + dur) intervals."""
    if not len(ts):
        return 0.0
    order = np.argsort(ts, kind="stable")
    start, end = ts[order], (ts + dur)[order]
    reach = np.maximum.accumulate(end)
    new = np.ones(len(start), dtype=bool)
    new[1:] = start[1:] > reach[:-1]
    seg_start = start[new]
    seg_end = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(start) - 1]]
    return float((seg_end - seg_start).sum())


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b > 0 else None


# ---------------------------------------------------------------------------------------------- grouping

_CARRY = ("dtype", "rate_dtype", "grid", "block", "registers", "peak_tflops", "dram_gbps", "flops_reason",
          "bytes_reason", "role", "roof_cause")


def aggregate(acts: Table, keys: Tuple[str, ...]) -> Table:
    """Group activities by `keys`; rates are recomputed from the group's sums (not averaged), all over the same
    calls (see `_basis`)."""
    n = len(acts)
    if not n:
        return Table("groups", _empty_group_columns(keys),
                     {k: acts.strings[k] for k in (*keys, *_CARRY, "bound", "reason") if k in acts.strings})
    stacked = np.stack([acts[k].astype(np.int64) for k in keys], axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    g = len(uniq)
    dur = acts["dur"]
    total = np.bincount(inverse, weights=dur, minlength=g)
    count = np.bincount(inverse, minlength=g)
    cols: Dict[str, np.ndarray] = {k: uniq[:, i].astype(np.int32) for i, k in enumerate(keys)}
    cols.update(count=count, total_us=total, mean_us=total / count,
                min_us=_reduce(np.minimum, inverse, dur, g, np.inf),
                max_us=_reduce(np.maximum, inverse, dur, g, -np.inf))
    cols.update(_group_rates(acts, inverse, g, total))
    first = _representative_rows(acts, inverse, g)
    for col in _CARRY:
        cols[col] = acts[col][first]
    cols["roof_cause"] = acts["roof_cause"][_first_where(acts["over_roof"], inverse, g, first)]
    cols["reason"] = _main_reason(acts, inverse, g)
    cols["occupancy"] = _weighted_mean(acts["occupancy"], dur, inverse, g)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols["time_share"] = total / dur.sum() if dur.sum() > 0 else np.full(g, np.nan)
    strings = {k: acts.strings[k] for k in (*keys, *_CARRY, "bound", "reason") if k in acts.strings}
    return Table("groups", cols, strings)


def _basis(acts: Table, inverse: np.ndarray, g: int) -> Tuple[np.ndarray, np.ndarray]:
    """The calls a group's figures are computed over, and whether those are over the roof. The first non-empty
    of: calls with both estimates; with FLOPs only; with bytes only, all under the roof; else the same over the
    roof (shown, marked). So TFLOP/s, GB/s, FLOP/byte, % of peak and efficiency of a row describe the same calls."""
    has_f, has_b, over = ~np.isnan(acts["flops"]), ~np.isnan(acts["bytes"]), acts["over_roof"]
    tiers = [has_f & has_b & ~over, has_f & ~over, has_b & ~over, has_f & has_b, has_f, has_b]
    chosen = np.full(g, len(tiers), dtype=np.int64)
    for level in range(len(tiers) - 1, -1, -1):
        present = np.bincount(inverse, weights=tiers[level], minlength=g) > 0
        chosen[present] = level
    stacked = np.stack(tiers + [np.zeros(len(inverse), dtype=bool)])
    basis = stacked[chosen[inverse], np.arange(len(inverse))]
    return basis, (chosen >= 3) & (chosen < len(tiers))


def _group_rates(acts: Table, inverse: np.ndarray, g: int, total: np.ndarray) -> Dict[str, np.ndarray]:
    dur = acts["dur"]
    basis, marked = _basis(acts, inverse, g)
    out: Dict[str, np.ndarray] = {}
    for col in ("flops", "bytes"):
        use = basis & ~np.isnan(acts[col])
        out[col] = np.where(np.bincount(inverse, weights=use, minlength=g) > 0,
                            np.bincount(inverse, weights=np.where(use, acts[col], 0), minlength=g), np.nan)
        out[col + "_time"] = np.bincount(inverse, weights=np.where(use, dur, 0), minlength=g)
    traffic = _dram_traffic(acts)
    has_traffic = basis & ~np.isnan(traffic)
    traffic_sum = np.bincount(inverse, weights=np.where(has_traffic, traffic, 0), minlength=g)
    traffic_time = np.bincount(inverse, weights=np.where(has_traffic, dur, 0), minlength=g)
    rated = basis & np.isfinite(acts["efficiency"])
    eff_time = np.bincount(inverse, weights=np.where(rated, dur, 0), minlength=g)
    eff_sum = np.bincount(inverse, weights=np.where(rated, acts["efficiency"] * dur, 0), minlength=g)
    both = ~np.isnan(acts["flops"]) & ~np.isnan(acts["bytes"]) & ~acts["over_roof"]
    over_time = np.bincount(inverse, weights=np.where(acts["over_roof"], dur, 0), minlength=g)
    first = _representative_rows(acts, inverse, g)
    peak, dram = acts["peak_tflops"][first], acts["dram_gbps"][first]
    with np.errstate(invalid="ignore", divide="ignore"):
        # a group whose calls all took no measurable time has no rate (not an infinite one)
        out["tflops"] = np.where(out["flops_time"] > 0, out["flops"] / (out["flops_time"] * _US) / 1e12, np.nan)
        out["gbps"] = np.where(out["bytes_time"] > 0, out["bytes"] / (out["bytes_time"] * _US) / 1e9, np.nan)
        out["intensity"] = out["flops"] / out["bytes"]
        out["pct_peak"] = out["tflops"] / peak
        out["pct_dram"] = np.where(traffic_time > 0, traffic_sum / (traffic_time * _US) / 1e9 / dram, np.nan)
        out["efficiency"] = np.where(eff_time > 0, eff_sum / eff_time, np.nan)
        out["covered_share"] = np.bincount(inverse, weights=np.where(both, dur, 0), minlength=g) / total
        out["over_roof_share"] = over_time / total
        ridge = peak * 1e3 / dram
    bound = np.full(g, 2, dtype=np.int32)
    known = ~np.isnan(out["intensity"]) & ~np.isnan(ridge)
    bound[known] = np.where(out["intensity"][known] >= ridge[known], 0, 1)
    copy = is_copy_event(acts)[first]
    bound[copy] = 1
    no_arith = copy | (out["flops"] == 0)
    for col in ("tflops", "pct_peak", "intensity"):
        out[col][no_arith] = np.nan
    mark_communication_groups(acts, inverse, first, bound, out)
    out["bound"] = bound
    out["over_roof"] = marked
    return out


def _first_where(mask: np.ndarray, inverse: np.ndarray, g: int, fallback: np.ndarray) -> np.ndarray:
    """Per group, its first row where `mask` holds (else `fallback`'s row)."""
    rows = np.flatnonzero(mask)
    out = fallback.copy()
    out[inverse[rows][::-1]] = rows[::-1]
    return out


def _main_reason(acts: Table, inverse: np.ndarray, g: int) -> np.ndarray:
    """Per group, the reason code with the most time among its calls ("" when most of its time is rated)."""
    k = len(CODES)
    time = np.bincount(inverse * k + acts["reason"].astype(np.int64), weights=acts["dur"], minlength=g * k)
    return time.reshape(g, k).argmax(axis=1).astype(np.int8)


def _representative_rows(acts: Table, inverse: np.ndarray, g: int) -> np.ndarray:
    """Per group, the first row that has a peak to rate against (else its first row): it carries the group's
    dtype, peak, grid and other descriptive columns."""
    n = len(inverse)
    first = np.full(g, -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(n)[::-1]
    rated = np.flatnonzero(~np.isnan(acts["peak_tflops"]))
    first_rated = np.full(g, -1, dtype=np.int64)
    first_rated[inverse[rated][::-1]] = rated[::-1]
    return np.where(first_rated >= 0, first_rated, first)


def _reduce(ufunc, inverse: np.ndarray, values: np.ndarray, g: int, init: float) -> np.ndarray:
    out = np.full(g, init)
    ufunc.at(out, inverse, values)
    return out


def _weighted_mean(values: np.ndarray, weights: np.ndarray, inverse: np.ndarray, g: int) -> np.ndarray:
    known = ~np.isnan(values)
    wsum = np.bincount(inverse, weights=np.where(known, weights, 0), minlength=g)
    vsum = np.bincount(inverse, weights=np.where(known, values * weights, 0), minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(wsum > 0, vsum / wsum, np.nan)


_CODED = {"dtype", "rate_dtype", "grid", "block", "flops_reason", "bytes_reason", "bound", "role", "roof_cause",
          "reason"}


def _empty_group_columns(keys: Tuple[str, ...]) -> Dict[str, np.ndarray]:
    cols = {k: np.empty(0, dtype=np.int32) for k in keys}
    for name in ("count", "total_us", "mean_us", "min_us", "max_us", "flops", "bytes", "flops_time",
                 "bytes_time", "tflops", "gbps", "intensity", "pct_peak", "pct_dram", "efficiency", "bound",
                 "occupancy", "time_share", "covered_share", "over_roof_share", "over_roof", "reason") + _CARRY:
        cols[name] = np.empty(0, dtype=np.int32 if name in _CODED else np.float64)
    cols["over_roof"] = np.empty(0, dtype=bool)
    return cols


def link_counts(acts: Table) -> Dict[str, int]:
    """How many activities each correlation method linked."""
    values, counts = np.unique(acts["link"], return_counts=True)
    return {LINK_NAMES[int(v)]: int(c) for v, c in zip(values, counts)}


# ---------------------------------------------------------------------------------------------- combining

def combine(parts: List[Efficiency], datasheet: Optional[Sequence[DeviceSpec]] = None) -> Efficiency:
    """Several spans as one analysis: activities concatenated (with a `span` column), devices merged."""
    first = parts[0]
    strings_cols = {c for p in parts for c in p.activities.strings}
    columns: Dict[str, List[np.ndarray]] = {}
    strings: Dict[str, List[str]] = {}
    for col in strings_cols:
        strings[col] = []
    merged_codes: Dict[str, Dict[str, int]] = {c: {} for c in strings_cols}
    shapes: Dict[int, Any] = {}
    for i, part in enumerate(parts):
        acts = part.activities
        for col, arr in acts.columns.items():
            if col in strings_cols and col in acts.strings:
                arr = _recode(arr, acts.strings[col], merged_codes[col], strings[col])
            if col == "op_shape":
                arr = np.where(arr >= 0, arr + i * (1 << 20), arr)
            columns.setdefault(col, []).append(arr)
        columns.setdefault("span", []).append(np.full(len(acts), i, dtype=np.int32))
        shapes.update({k + i * (1 << 20): v for k, v in part.shapes.items()})
    table = Table("activities", {c: np.concatenate(v) for c, v in columns.items()}, strings)
    unrated = Efficiency(None, table, {}, AUTO, {}, first.device_props, shapes)
    return unrated.rerate(AUTO, datasheet)


def _recode(codes: np.ndarray, cats: List[str], merged: Dict[str, int], out: List[str]) -> np.ndarray:
    lookup = np.empty(len(cats), dtype=np.int32)
    for i, text in enumerate(cats):
        code = merged.get(text)
        if code is None:
            code = merged[text] = len(out)
            out.append(text)
        lookup[i] = code
    return np.where(codes >= 0, lookup[np.clip(codes, 0, None)], -1).astype(codes.dtype) if len(cats) else codes


__all__ = ["combine", "AUTO", "Efficiency", "DeviceReport", "analyze_trace", "aggregate", "device_summary", "busy_time",
           "link_counts", "NO_OP"]
