"""The activity table of one trace and the FLOPs and bytes each activity gets from its launching op.

Each kernel, memcpy and memset is a row linked to its op (`correlate.py`); the op's estimate (its shapes through
`estimate/`, memoised, or Inductor's own figures) goes to the op's receiving activities by role and duration,
helpers get their own bytes (`helper_bytes.py`), launches without an op take the figures of identical twins, and
every gap keeps its reason. The model is described in `efficiency.py`'s docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...estimate.devices import normalize_dtype
from ...estimate.flops import OpEstimate, estimate_op, freeze
from ...estimate.inductor_source import KernelSource, find_source, launch_bytes
from ...estimate.memo import default_memo
from ...estimate.model_config import ModelConfig
from ...trace.kineto import KinetoTrace
from ...trace.table import Interner, Table, unique_rows
from ..correlate import COMPILED_REGIONS, NO_OP, graph_replayed
from .config_sizing import size_from_model_config
from .helper_bytes import helper_rows_bytes
from .wrapped_sizing import rate_through_children
from .reasons import CODES
from .roles import (COMPUTE, COPIES, EPILOGUE, LAYOUT, MEMCPY, MEMSET, ROLE_REASONS, ROLES, SPLITK, WORK,
                    helper_bytes_reason, kernel_role)


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
    configured: Optional[np.ndarray] = None  # sized from the model's config (ops hiding their weights or cache)

    def by_row(self) -> Dict[int, OpEstimate]:
        return {row: self.table[i] for row, i in zip(self.used.tolist(), self.index.tolist()) if i >= 0}


def _op_estimates(trace: KinetoTrace, op_rows: np.ndarray, model_config: Optional[ModelConfig] = None,
                  parents: Optional[np.ndarray] = None) -> _OpEstimates:
    """Estimate once per distinct (op name, shape signature) among ops that launched something; Inductor's figures
    where the op carries them; the model config's for ops that hide their weights or KV cache (`model_config`);
    none for compiled-region wrappers."""
    ops = trace.ops
    used = np.unique(op_rows[op_rows >= 0])
    names = ops.strings.get("name", [])
    signature = np.stack([ops["name"][used], ops["shape"][used]], axis=1)
    distinct, which = unique_rows(signature)
    table = _estimates(trace, [(names[n], s) for n, s in distinct.tolist()])
    index = which.reshape(-1).astype(np.int64)
    configured = index < 0  # all False
    first = np.full(len(distinct), -1, dtype=np.int64)
    first[which.reshape(-1)[::-1]] = used[::-1]  # each signature's first op row
    sigs = [(names[n], s) for n, s in distinct.tolist()]
    if parents is not None:  # a wrapper that launches its child's kernel takes the child's figures
        rate_through_children(trace, sigs, first, table, parents, set(used.tolist()),
                              lambda pairs: _estimates(trace, pairs))
    if model_config is not None:
        sized = size_from_model_config(trace, sigs, first, table, model_config,
                                       parents if parents is not None else np.empty(0, np.int64))
        configured = np.isin(index, sized)
    inductor = ~np.isnan(ops["kernel_flop"][used]) | ~np.isnan(ops["kernel_num_gb"][used])
    for i in np.flatnonzero(inductor).tolist():
        row = used[i]
        table.append(_with_inductor(table[index[i]], ops["kernel_flop"][row], ops["kernel_num_gb"][row]))
        index[i] = len(table) - 1
    _with_sources(trace, used, np.isnan(ops["kernel_num_gb"][used]), index, table, inductor)
    is_region = np.fromiter((n.startswith(COMPILED_REGIONS) for n in names), dtype=bool, count=len(names))
    wrapper = is_region[ops["name"][used]] if len(names) else np.zeros(len(used), dtype=bool)
    index[wrapper & ~inductor] = -1  # a compiled region's inputs say nothing of its kernels
    return _OpEstimates(used, index, table, inductor, configured & ~inductor)


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


def _with_sources(trace: KinetoTrace, used: np.ndarray, unsized: np.ndarray, index: np.ndarray,
                  table: List[OpEstimate], inductor: np.ndarray) -> None:
    """Triton launches without Inductor's bytes whose generated source is found (estimate/inductor_source.py):
    bytes from its roles and index expressions, FLOPs from its inductor_meta when recorded. In place."""
    files = trace.ops.strings.get("kernel_file", [])
    if not any(files):
        return
    codes, shapes = trace.ops["kernel_file"][used], trace.ops["shape"][used]
    sources: Dict[int, Optional[KernelSource]] = {}
    done: Dict[Tuple[int, int, int], int] = {}
    for i in np.flatnonzero(unsized & (codes >= 0)).tolist():
        code, shape = int(codes[i]), int(shapes[i])
        if not files[code] or shape < 0:
            continue
        key = (code, shape, int(index[i]))
        if key not in done:
            if code not in sources:
                sources[code] = find_source(files[code], trace.meta.path)
            est = _from_source(sources[code], trace.shape(shape), table[index[i]]) if sources[code] else None
            if est is not None:
                table.append(est)
            done[key] = len(table) - 1 if est is not None else -1
        if done[key] >= 0:
            index[i], inductor[i] = done[key], True


def _from_source(src: KernelSource, shape: Tuple[Any, Any, Any], est: OpEstimate) -> Optional[OpEstimate]:
    sized = launch_bytes(src, *shape)
    if sized is None:
        return None
    flops, flops_reason = (est.flops, est.flops_reason) if src.flop is None else (src.flop, "")
    return OpEstimate(flops, flops_reason, sized[0], sized[1], est.dtype)


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
SOURCES = ["", "formula", "inductor", "twin", "event", "capture", "model config"]  # where an activity's figures come from
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
    source[receiver & est.configured] = _SOURCE["model config"]
    source[helper] = _SOURCE["formula"]
    source[copy_event] = _SOURCE["event"]
    twins = _infer_from_twins(acts, flops, nbytes, (op < 0) & ~copy_event, _sm_counts(facts.trace))
    inferred = twins.filled
    source[inferred] = _SOURCE["twin"]
    no_op = (op < 0) & ~inferred & ~copy_event
    flops_reason, bytes_reason, reasons = _reason_texts(est, receiver, helper, role, copy_event & np.isnan(nbytes),
                                                        notes)
    flops_reason[no_op] = bytes_reason[no_op] = reasons.code("no launching op in the trace")
    flops_reason[no_op & twins.persistent] = bytes_reason[no_op & twins.persistent] = reasons.code(PERSISTENT)
    _twin_reasons(twins, flops, nbytes, (flops_reason, bytes_reason), reasons, acts)
    dtype = np.where(receiver | helper, est.dtype, -1).astype(np.int32)
    dtype[inferred] = dtype[twins.donor[inferred]]
    gap = _gaps(acts, facts, flops, nbytes, no_op, helper | copy_event, est)
    gap[inferred] = gap[twins.donor[inferred]]  # a figure the twins lack is missing for the twins' reason
    acts.columns.update(flops=flops, bytes=nbytes, flops_reason=flops_reason, bytes_reason=bytes_reason,
                        dtype=dtype, role=role, source=source, gap=gap)
    acts.strings.update(flops_reason=reasons.items, bytes_reason=reasons.items, dtype=est.dtypes.items,
                        role=list(ROLES), source=SOURCES, gap=list(CODES))


def _sm_counts(trace: KinetoTrace) -> Dict[int, int]:
    """Device id -> SM (CU) count, from the trace's deviceProperties."""
    out = {}
    for dev in trace.devices or []:
        if isinstance(dev.get("id"), int) and isinstance(dev.get("numSms"), int):
            out[dev["id"]] = dev["numSms"]
    return out


def _twin_reasons(twins: _Twins, flops: np.ndarray, nbytes: np.ndarray, texts: Tuple[np.ndarray, np.ndarray],
                  reasons: Interner, acts: Table) -> None:
    """An inferred figure says how many launches it rests on; a figure the twins lack keeps the twins' reason."""
    recorded = (acts["registers"] >= 0)
    for row in np.flatnonzero(twins.filled).tolist():
        n = int(twins.count[row])
        same = "same kernel, grid, block" + (", registers" if recorded[row] else "")
        note = reasons.code(INFERRED.format(n=n, es="" if n == 1 else "es", same=same))
        for values, text in zip((flops, nbytes), texts):
            text[row] = text[twins.donor[row]] if np.isnan(values[row]) else note


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
        configured = ests.configured if ests.configured is not None else np.zeros(len(ests.used), bool)
        self.configured = np.append(configured, False)[pos]

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


INFERRED = "no launching op: FLOPs and bytes inferred from {n} identical launch{es} ({same}) of this trace"
PERSISTENT = ("no launching op, and a persistent grid (one block per SM): launches with the same grid say nothing of "
              "its problem size, so none is inferred")


@dataclass
class _Twins:
    """Rows filled from identical launches: the row each took its reasons from (-1: none), how many launches the
    figures rest on, and the persistent-grid orphans left without."""
    filled: np.ndarray
    donor: np.ndarray
    count: np.ndarray
    persistent: np.ndarray


def _infer_from_twins(acts: Table, flops: np.ndarray, nbytes: np.ndarray, orphan: np.ndarray,
                      sm_counts: Dict[int, int]) -> _Twins:
    """Kernels without an op (launched before the profiling window, or replayed from a CUDA graph) take the
    median FLOPs and bytes of linked kernels with the same name, grid, block and registers (where recorded; ROCm
    records none): the same launch configuration almost always means the same problem size. Never across grids,
    and never for a persistent grid (one block per SM: any problem size launches it)."""
    n = len(acts)
    twins = _Twins(np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64),
                   np.zeros(n, dtype=bool))
    kernel = _launch_recorded(acts, "grid") & _launch_recorded(acts, "block")  # same name alone is no evidence
    known = kernel & ~orphan & ~(np.isnan(flops) & np.isnan(nbytes))
    todo = kernel & orphan
    twins.persistent = todo & _persistent_grid(acts, sm_counts)
    todo &= ~twins.persistent
    if not known.any() or not todo.any():
        return twins
    keys = np.stack([acts[c].astype(np.int64) for c in ("name", "grid", "block", "registers")], axis=1)
    groups: Dict[Tuple[int, ...], List[int]] = {}
    for row in np.flatnonzero(known).tolist():
        groups.setdefault(tuple(keys[row].tolist()), []).append(row)
    for row in np.flatnonzero(todo).tolist():
        rows = groups.get(tuple(keys[row].tolist()))
        if rows:
            flops[row] = _median(flops[rows])
            nbytes[row] = _median(nbytes[rows])
            twins.filled[row], twins.donor[row], twins.count[row] = True, rows[0], len(rows)
    return twins


def _median(values: np.ndarray) -> float:
    return float(np.nanmedian(values)) if not np.isnan(values).all() else np.nan


def _persistent_grid(acts: Table, sm_counts: Dict[int, int]) -> np.ndarray:
    """Launches whose grid is one block per SM of their device (CUDA records blocks; ROCm work-items, so there the
    grid is the SM count times the block)."""
    grids, blocks = acts.strings.get("grid", []), acts.strings.get("block", [])
    if not sm_counts or not grids:
        return np.zeros(len(acts), dtype=bool)
    sizes_g = np.array([_volume(t) for t in grids] + [0], dtype=np.int64)
    sizes_b = np.array([_volume(t) for t in blocks] + [0], dtype=np.int64)
    g = sizes_g[np.where(acts["grid"] >= 0, acts["grid"], len(grids))]
    b = sizes_b[np.where(acts["block"] >= 0, acts["block"], len(blocks))]
    sms = np.array([sm_counts.get(int(d), 0) for d in acts["device"].tolist()], dtype=np.int64)
    return (sms > 0) & ((g == sms) | (g == sms * b))


_INT64_MAX = (1 << 63) - 1


def _volume(text: str) -> int:
    """Product of a recorded "[x, y, z]" launch dimension (0 when unreadable, negative or past int64)."""
    try:
        dims = [int(v) for v in text.strip("[] ").split(",") if v.strip()]
    except ValueError:
        return 0
    volume = math.prod(dims) if dims else 0  # Python ints: a damaged 30-digit dimension does not overflow
    return volume if 0 <= volume <= _INT64_MAX else 0


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
