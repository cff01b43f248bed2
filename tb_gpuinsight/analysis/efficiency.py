"""Kernel efficiency: FLOPs and bytes per GPU activity, rated against its device's datasheet peaks.

Model (documented for users in README "How efficiency is computed"):
- Every kernel, memcpy and memset is linked to its launching op (`correlate.py`). The op's FLOPs and bytes come from
  its shapes (`estimate/flops.py`, `estimate/bytes.py`) or, for Inductor kernels, from `kernel_flop` /
  `kernel_num_gb`.
- One op may launch several kernels (a GEMM and its split-K reduction, say). Its FLOPs and bytes are split among
  them in proportion to their durations, so they sum to the op's totals exactly (nothing is double counted) and
  each kernel of the op shows the op's achieved rate.
- Memcpy and memset do no FLOPs; their bytes are the `bytes` arg. Device-to-device copies move twice that through
  DRAM (read and write); host<->device copies go over the bus and get no % of DRAM peak.
- The peak a kernel is rated against is its op's dtype (fp32 kernels whose name says tf32 use the TF32 peak); when
  the op gives none, the dtype the kernel's name spells (sgemm, h884, bf16, `<float>`...); or the dtype the
  caller forces. Unknown FLOPs, bytes, dtype or device stay unknown (NaN / None), never 0.
- Bound: compute when arithmetic intensity (FLOP/byte) reaches the device's ridge point for that dtype, memory
  below it. Efficiency is achieved / attainable, attainable = min(peak, intensity x DRAM bandwidth) when both are
  known; % of DRAM peak when only bytes are known; % of peak when only FLOPs are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..estimate.devices import DTYPES, DeviceMatch, DeviceSpec, load_datasheet, match_device, normalize_dtype
from ..estimate.flops import OpEstimate, estimate_op, freeze
from ..estimate.memo import default_memo
from ..trace.kineto import KinetoTrace
from ..trace.table import Interner, Table
from .collectives import activity_columns, mark_communication_groups, rate_communication
from .correlate import LINK_NAMES, NO_OP, link_activities, op_parents

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
    parents = op_parents(trace.ops)
    kernel_links = link_activities(trace.kernels, trace.ops, trace.launches, parents)
    memop_links = link_activities(trace.memops, trace.ops, trace.launches, parents)
    acts = _activities(trace, kernel_links, memop_links)
    estimates = _op_estimates(trace, acts["op"])
    _attribute(acts, trace, estimates)
    acts.columns.update(activity_columns(trace, acts))  # collective sizes: comm kernels are rated on the link
    op_shape = np.full(len(acts), -1, dtype=np.int32)
    linked = acts["op"] >= 0
    op_shape[linked] = trace.ops["shape"][acts["op"][linked]]
    acts.columns["op_shape"] = op_shape
    shapes = {int(c): trace.shape(int(c)) for c in np.unique(op_shape[op_shape >= 0]).tolist()}
    unrated = Efficiency(trace, acts, {}, AUTO, estimates, list(trace.devices), shapes)
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


# ---------------------------------------------------------------------------------------------- estimates

def _op_estimates(trace: KinetoTrace, op_rows: np.ndarray) -> Dict[int, OpEstimate]:
    """Estimate once per distinct (op name, shape signature) among ops that launched something."""
    ops = trace.ops
    used = np.unique(op_rows[op_rows >= 0])
    names = ops.strings.get("name", [])
    signature = np.stack([ops["name"][used], ops["shape"][used]], axis=1)
    distinct, which = np.unique(signature, axis=0, return_inverse=True)
    estimates = _estimates(trace, [(names[n], s) for n, s in distinct.tolist()])
    out = dict(zip(used.tolist(), (estimates[i] for i in which.reshape(-1).tolist())))
    inductor = ~np.isnan(ops["kernel_flop"][used]) | ~np.isnan(ops["kernel_num_gb"][used])
    for row in used[inductor].tolist():
        out[row] = _with_inductor(out[row], ops["kernel_flop"][row], ops["kernel_num_gb"][row])
    return out


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


def _attribute(acts: Table, trace: KinetoTrace, estimates: Dict[int, OpEstimate]) -> None:
    """Split each op's FLOPs and bytes over its activities by duration; memops take their own bytes."""
    n = len(acts)
    op = acts["op"]
    is_memop = ~np.isnan(acts["memop_bytes"])
    share = _duration_share(np.where(is_memop, NO_OP, op), acts["dur"])  # an op's memsets take no FLOPs
    op_flops = np.full(n, np.nan)
    op_bytes = np.full(n, np.nan)
    reasons, dtypes = Interner(), Interner()
    reasons.code("")
    flops_reason = np.zeros(n, dtype=np.int32)
    bytes_reason = np.zeros(n, dtype=np.int32)
    dtype = np.full(n, -1, dtype=np.int32)
    no_op = reasons.code("no launching op in the trace")
    for i, row in enumerate(op.tolist()):
        est = estimates.get(row)
        if est is None:
            flops_reason[i] = bytes_reason[i] = no_op
            continue
        if est.flops is not None:
            op_flops[i] = est.flops
        if est.bytes is not None:
            op_bytes[i] = est.bytes
        flops_reason[i] = reasons.code(est.flops_reason)
        bytes_reason[i] = reasons.code(est.bytes_reason)
        key = normalize_dtype(est.dtype)
        if key:
            dtype[i] = dtypes.code(key)
    flops, nbytes = op_flops * share, op_bytes * share
    inferred = _infer_from_twins(acts, flops, nbytes, op < 0)
    flops_reason[inferred] = bytes_reason[inferred] = reasons.code(INFERRED)
    flops[is_memop] = 0.0
    nbytes[is_memop] = acts["memop_bytes"][is_memop]
    flops_reason[is_memop] = bytes_reason[is_memop] = 0
    acts.columns.update(flops=flops, bytes=nbytes, flops_reason=flops_reason, bytes_reason=bytes_reason,
                        dtype=dtype)
    acts.strings.update(flops_reason=reasons.items, bytes_reason=reasons.items, dtype=dtypes.items)


INFERRED = "no launching op: FLOPs and bytes of identical launches (same kernel, grid, block) of this trace"


def _infer_from_twins(acts: Table, flops: np.ndarray, nbytes: np.ndarray, orphan: np.ndarray) -> np.ndarray:
    """Kernels without an op (launched before the profiling window, or replayed from a CUDA graph) take the
    median FLOPs and bytes of linked kernels with the same name, grid, block and registers: the same launch
    configuration almost always means the same problem size. Returns the rows filled in."""
    kernel = acts["grid"] >= 0  # memops have no grid
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
        match = match_device(props, rows)
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
    memop = ~np.isnan(acts["memop_bytes"])
    tflops[memop] = pct_peak[memop] = intensity[memop] = np.nan  # copies do no arithmetic: not rated on FLOPs
    has_f, has_b = ~np.isnan(acts["flops"]), ~np.isnan(acts["bytes"])
    efficiency = np.where(has_f & has_b & (acts["flops"] > 0), roofline, np.where(has_b, pct_dram, pct_peak))
    bound = np.full(n, 2, dtype=np.int32)  # unknown
    known = ~np.isnan(intensity) & ~np.isnan(ridge)
    bound[known] = np.where(intensity[known] >= ridge[known], 0, 1)
    bound[memop] = 1
    dtype_codes = Interner()
    acts.columns.update(tflops=tflops, gbps=gbps, intensity=intensity, peak_tflops=peak, dram_gbps=dram,
                        pct_peak=pct_peak, pct_dram=pct_dram, efficiency=efficiency, bound=bound,
                        rate_dtype=np.fromiter(dtype_codes.encode(rate_dtype.tolist()), np.int32, count=n))
    acts.strings.update(bound=["compute", "memory", "unknown"], rate_dtype=dtype_codes.items)
    rate_communication(acts, devices)


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
    for i in np.flatnonzero(~np.isnan(acts["memop_bytes"])).tolist():
        kind, name = kinds[acts["kind"][i]], names[acts["name"][i]]
        if kind == "memcpy":
            traffic[i] = 2 * traffic[i] if "DtoD" in name else np.nan
    return traffic


# ---------------------------------------------------------------------------------------------- summaries

def device_summary(acts: Table) -> Dict[str, Any]:
    """GPU busy time, kernel and memop time, estimate coverage and time-weighted efficiency of one device."""
    is_kernel = np.array([acts.strings["kind"][k] == "kernel" for k in acts["kind"]], dtype=bool) \
        if len(acts) else np.zeros(0, dtype=bool)
    dur = acts["dur"]
    kernel_time = float(dur[is_kernel].sum())
    with_flops = is_kernel & ~np.isnan(acts["flops"])
    with_bytes = is_kernel & ~np.isnan(acts["bytes"])
    rated = is_kernel & np.isfinite(acts["efficiency"])
    rated_time = float(dur[rated].sum())
    return {
        "gpu_busy_us": busy_time(acts["ts"], dur),
        "kernel_time_us": kernel_time,
        "memop_time_us": float(dur[~is_kernel].sum()),
        "kernel_count": int(is_kernel.sum()),
        "flop_time_share": _ratio(float(dur[with_flops].sum()), kernel_time),
        "byte_time_share": _ratio(float(dur[with_bytes].sum()), kernel_time),
        "rated_time_share": _ratio(rated_time, kernel_time),
        "efficiency": _ratio(float((acts["efficiency"][rated] * dur[rated]).sum()), rated_time),
        "flops": float(np.nansum(acts["flops"][is_kernel])),
        "bytes": float(np.nansum(acts["bytes"][is_kernel])),
    }


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

_CARRY = ("dtype", "rate_dtype", "grid", "block", "registers", "peak_tflops", "dram_gbps", "flops_reason")


def aggregate(acts: Table, keys: Tuple[str, ...]) -> Table:
    """Group activities by `keys`; rates are recomputed from the group's sums (not averaged)."""
    n = len(acts)
    if not n:
        return Table("groups", _empty_group_columns(keys),
                     {k: acts.strings[k] for k in (*keys, *_CARRY, "bound") if k in acts.strings})
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
    cols.update(_group_rates(acts, inverse, g))
    first = _representative_rows(acts, inverse, g)
    for col in _CARRY:
        cols[col] = acts[col][first]
    cols["occupancy"] = _weighted_mean(acts["occupancy"], dur, inverse, g)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols["time_share"] = total / dur.sum() if dur.sum() > 0 else np.full(g, np.nan)
    strings = {k: acts.strings[k] for k in (*keys, *_CARRY, "bound") if k in acts.strings}
    return Table("groups", cols, strings)


def _group_rates(acts: Table, inverse: np.ndarray, g: int) -> Dict[str, np.ndarray]:
    dur = acts["dur"]
    out = {}
    for col in ("flops", "bytes"):
        known = ~np.isnan(acts[col])
        out[col] = np.where(np.bincount(inverse, weights=known, minlength=g) > 0,
                            np.bincount(inverse, weights=np.where(known, acts[col], 0), minlength=g), np.nan)
        out[col + "_time"] = np.bincount(inverse, weights=np.where(known, dur, 0), minlength=g)
    traffic = _dram_traffic(acts)
    has_traffic = ~np.isnan(traffic)
    traffic_sum = np.bincount(inverse, weights=np.where(has_traffic, traffic, 0), minlength=g)
    traffic_time = np.bincount(inverse, weights=np.where(has_traffic, dur, 0), minlength=g)
    rated = np.isfinite(acts["efficiency"])
    eff_time = np.bincount(inverse, weights=np.where(rated, dur, 0), minlength=g)
    eff_sum = np.bincount(inverse, weights=np.where(rated, acts["efficiency"] * dur, 0), minlength=g)
    first = _representative_rows(acts, inverse, g)
    peak, dram = acts["peak_tflops"][first], acts["dram_gbps"][first]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["tflops"] = out["flops"] / (out["flops_time"] * _US) / 1e12
        out["gbps"] = out["bytes"] / (out["bytes_time"] * _US) / 1e9
        out["intensity"] = out["flops"] / out["bytes"]
        out["pct_peak"] = out["tflops"] / peak
        out["pct_dram"] = np.where(traffic_time > 0, traffic_sum / (traffic_time * _US) / 1e9 / dram, np.nan)
        out["efficiency"] = np.where(eff_time > 0, eff_sum / eff_time, np.nan)
        ridge = peak * 1e3 / dram
    bound = np.full(g, 2, dtype=np.int32)
    known = ~np.isnan(out["intensity"]) & ~np.isnan(ridge)
    bound[known] = np.where(out["intensity"][known] >= ridge[known], 0, 1)
    memop = ~np.isnan(acts["memop_bytes"][first])
    bound[memop] = 1
    for col in ("tflops", "pct_peak", "intensity"):
        out[col][memop] = np.nan
    mark_communication_groups(acts, inverse, first, bound, out)
    out["bound"] = bound
    return out


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


_CODED = {"dtype", "rate_dtype", "grid", "block", "flops_reason", "bound"}


def _empty_group_columns(keys: Tuple[str, ...]) -> Dict[str, np.ndarray]:
    cols = {k: np.empty(0, dtype=np.int32) for k in keys}
    for name in ("count", "total_us", "mean_us", "min_us", "max_us", "flops", "bytes", "flops_time",
                 "bytes_time", "tflops", "gbps", "intensity", "pct_peak", "pct_dram", "efficiency", "bound",
                 "occupancy", "time_share") + _CARRY:
        cols[name] = np.empty(0, dtype=np.int32 if name in _CODED else np.float64)
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
