"""What the tables show of rated activities: the per-device summary (busy time, coverage, efficiency, reasons)
and activities grouped by keys (by kernel name, by op), every rate of a row over the same calls.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...trace.table import Interner, Table, unique_keys, unique_rows
from ..correlate import LINK_NAMES
from ..ranks.collectives import mark_communication_groups
from .attribution import is_copy_event
from .coverage import is_compute_class, share as coverage_share
from .names import kernel_class
from .rating import _US, _dram_traffic
from .reasons import CODES, REASONS, reason_rows


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
        "byte_time_share": _ratio(float(dur[with_bytes].sum()), kernel_time),
        "covered_time_share": _ratio(float(dur[with_flops & with_bytes & ~over].sum()), kernel_time),
        "rated_time_share": _ratio(rated_time, kernel_time),
        "over_roof_time_share": _ratio(float(dur[is_kernel & over].sum()), kernel_time),
        "over_roof_count": int((is_kernel & over).sum()),
        "efficiency": _ratio(float((acts["efficiency"][rated] * dur[rated]).sum()), rated_time),
        "flops": float(np.nansum(acts["flops"][kept])),
        "bytes": float(np.nansum(acts["bytes"][kept])),
        "reasons": reason_rows(_reason_shares(acts, is_kernel, kernel_time)),
        **_compute_coverage(acts),
    }


def _compute_coverage(acts: Table, top: int = 5) -> Dict[str, Any]:
    """FLOP coverage of compute kernel time (`coverage.py`: kernels other than communication, copies and fills) and
    the kernel classes with the most time without FLOPs, each with its commonest reason: the honest headline of what
    is rated."""
    names, kinds, ops = acts.strings["name"], acts.strings["kind"], acts.strings.get("op_name", [])
    classes = Interner()
    uniq, inverse = unique_keys(acts, ("name", "kind", "op_name"))  # classify each distinct kernel once
    distinct = np.array([classes.code(kernel_class(names[n], kinds[k], ops[o] if o >= 0 else None))
                         for n, k, o in uniq.tolist()], dtype=np.int32)
    cls = distinct[inverse] if len(acts) else np.empty(0, dtype=np.int32)
    labels = classes.items
    flags = [is_compute_class(kinds[k], labels[c]) for (_, k, _), c in zip(uniq.tolist(), distinct.tolist())]
    compute = np.array(flags, dtype=bool)[inverse] if len(acts) else np.zeros(0, dtype=bool)
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
            "compute_flop_share": coverage_share(float(dur[compute & ~unknown].sum()), compute_time),
            "unrated_families": rows[:top]}


def _reason_shares(acts: Table, is_kernel: np.ndarray, kernel_time: float) -> Dict[str, float]:
    if "reason" not in acts or kernel_time <= 0:
        return {}
    time = np.bincount(acts["reason"][is_kernel].astype(np.int64), weights=acts["dur"][is_kernel],
                       minlength=len(CODES))
    return {CODES[i]: float(t) / kernel_time for i, t in enumerate(time) if i and t > 0}


def merged_segments(start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Intervals [start, end) merged where they overlap or touch: disjoint intervals in start order."""
    if not len(start):
        return start.astype(np.float64), end.astype(np.float64)
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.ones(len(start), dtype=bool)
    new[1:] = start[1:] > reach[:-1]
    return start[new], reach[np.r_[np.flatnonzero(new)[1:] - 1, len(start) - 1]]


def busy_time(ts: np.ndarray, dur: np.ndarray) -> float:
    """Length of the union of [ts, ts + dur) intervals."""
    if not len(ts):
        return 0.0
    seg_start, seg_end = merged_segments(ts, ts + dur)
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
    uniq, inverse = unique_rows(stacked)
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
    basis, chosen = basis_of(acts, inverse, g)
    return basis, marked_level(chosen)


BASIS_TIERS = 6  # the level of a group without any call in a tier (`basis_of`)


def basis_of(acts: Table, inverse: np.ndarray, g: int) -> Tuple[np.ndarray, np.ndarray]:
    """The basis calls (`_basis`) and each group's tier level (0..5, BASIS_TIERS when none)."""
    has_f, has_b, over = ~np.isnan(acts["flops"]), ~np.isnan(acts["bytes"]), acts["over_roof"]
    tiers = [has_f & has_b & ~over, has_f & ~over, has_b & ~over, has_f & has_b, has_f, has_b]
    chosen = np.full(g, len(tiers), dtype=np.int64)
    for level in range(len(tiers) - 1, -1, -1):
        present = np.bincount(inverse, weights=tiers[level], minlength=g) > 0
        chosen[present] = level
    stacked = np.stack(tiers + [np.zeros(len(inverse), dtype=bool)])
    return stacked[chosen[inverse], np.arange(len(inverse))], chosen


def marked_level(chosen: np.ndarray) -> np.ndarray:
    """Groups whose basis calls are over the roof (tier levels 3..5)."""
    return (chosen >= 3) & (chosen < BASIS_TIERS)


def _group_rates(acts: Table, inverse: np.ndarray, g: int, total: np.ndarray) -> Dict[str, np.ndarray]:
    basis, marked = _basis(acts, inverse, g)
    sums = group_sums(acts, inverse, g, basis)
    first = _representative_rows(acts, inverse, g)
    out = rates_from_sums(sums, total, acts["peak_tflops"][first], acts["dram_gbps"][first],
                          is_copy_event(acts)[first])
    mark_communication_groups(acts, inverse, first, out["bound"], out)
    out["over_roof"] = marked
    return out


SUMS = ("flops", "flops_time", "bytes", "bytes_time", "traffic", "traffic_time", "eff_time", "eff_sum", "both_time",
        "over_time")


def group_sums(acts: Table, inverse: np.ndarray, g: int, basis: np.ndarray) -> Dict[str, np.ndarray]:
    """Per group, what its rates are computed from (`SUMS`, see `rates_from_sums`) over its `basis` calls."""
    dur = acts["dur"]
    sums: Dict[str, np.ndarray] = {}
    for col in ("flops", "bytes"):
        use = basis & ~np.isnan(acts[col])
        sums[col] = np.where(np.bincount(inverse, weights=use, minlength=g) > 0,
                             np.bincount(inverse, weights=np.where(use, acts[col], 0), minlength=g), np.nan)
        sums[col + "_time"] = np.bincount(inverse, weights=np.where(use, dur, 0), minlength=g)
    traffic = _dram_traffic(acts)
    has_traffic = basis & ~np.isnan(traffic)
    sums["traffic"] = np.bincount(inverse, weights=np.where(has_traffic, traffic, 0), minlength=g)
    sums["traffic_time"] = np.bincount(inverse, weights=np.where(has_traffic, dur, 0), minlength=g)
    rated = basis & np.isfinite(acts["efficiency"])
    sums["eff_time"] = np.bincount(inverse, weights=np.where(rated, dur, 0), minlength=g)
    sums["eff_sum"] = np.bincount(inverse, weights=np.where(rated, acts["efficiency"] * dur, 0), minlength=g)
    both = ~np.isnan(acts["flops"]) & ~np.isnan(acts["bytes"]) & ~acts["over_roof"]
    sums["both_time"] = np.bincount(inverse, weights=np.where(both, dur, 0), minlength=g)
    sums["over_time"] = np.bincount(inverse, weights=np.where(acts["over_roof"], dur, 0), minlength=g)
    return sums


def rates_from_sums(sums: Dict[str, np.ndarray], total: np.ndarray, peak: np.ndarray, dram: np.ndarray,
                    copy: np.ndarray) -> Dict[str, np.ndarray]:
    """A grouped table's rates and bound from its groups' sums over their basis calls (`_basis`): `flops`,
    `bytes` (NaN where no basis call has one), their `*_time`, `traffic` / `traffic_time` (DRAM traffic),
    `eff_sum` / `eff_time`, `both_time`, `over_time`; `peak`, `dram` and `copy` of each group's representative
    call. Also what merges per-rank sums into the All-ranks table (`analysis/ranks/kernel_parts.py`)."""
    out = {k: sums[k] for k in ("flops", "flops_time", "bytes", "bytes_time")}
    with np.errstate(invalid="ignore", divide="ignore"):
        # a group whose calls all took no measurable time has no rate (not an infinite one)
        out["tflops"] = np.where(out["flops_time"] > 0, out["flops"] / (out["flops_time"] * _US) / 1e12, np.nan)
        out["gbps"] = np.where(out["bytes_time"] > 0, out["bytes"] / (out["bytes_time"] * _US) / 1e9, np.nan)
        out["intensity"] = out["flops"] / out["bytes"]
        out["pct_peak"] = out["tflops"] / peak
        out["pct_dram"] = np.where(sums["traffic_time"] > 0,
                                   sums["traffic"] / (sums["traffic_time"] * _US) / 1e9 / dram, np.nan)
        out["efficiency"] = np.where(sums["eff_time"] > 0, sums["eff_sum"] / sums["eff_time"], np.nan)
        out["covered_share"] = sums["both_time"] / total
        out["over_roof_share"] = sums["over_time"] / total
        ridge = peak * 1e3 / dram
    g = len(total)
    bound = np.full(g, 2, dtype=np.int32)
    known = ~np.isnan(out["intensity"]) & ~np.isnan(ridge)
    bound[known] = np.where(out["intensity"][known] >= ridge[known], 0, 1)
    bound[copy] = 1
    no_arith = copy | (out["flops"] == 0)
    for col in ("tflops", "pct_peak", "intensity"):
        out[col][no_arith] = np.nan
    out["bound"] = bound
    return out


def _first_where(mask: np.ndarray, inverse: np.ndarray, g: int, fallback: np.ndarray) -> np.ndarray:
    """Per group, its first row where `mask` holds (else `fallback`'s row)."""
    rows = np.flatnonzero(mask)
    out = fallback.copy()
    out[inverse[rows][::-1]] = rows[::-1]
    return out


def _main_reason(acts: Table, inverse: np.ndarray, g: int) -> np.ndarray:
    """Per group, the reason code with the most time among its calls that have no rating ("" only when every call
    is rated): a row rated for part of its time names why the rest is not."""
    k = len(CODES)
    time = np.bincount(inverse * k + acts["reason"].astype(np.int64), weights=acts["dur"], minlength=g * k)
    return unrated_reason(time.reshape(g, k))


def unrated_reason(time: np.ndarray) -> np.ndarray:
    """Per row of a (groups x reason codes) time matrix, the code with the most unrated time (0, RATED, when none)."""
    unrated = time[:, 1:]  # code 0 is RATED
    if not unrated.size:
        return np.zeros(len(time), dtype=np.int8)
    return np.where(unrated.max(axis=1) > 0, unrated.argmax(axis=1) + 1, 0).astype(np.int8)


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
