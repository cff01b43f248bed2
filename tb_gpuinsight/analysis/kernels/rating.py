"""Rating activities against their device: datasheet match per trace device, achieved rates, % of peak and of
DRAM peak, bound and efficiency, over-the-roof causes, and the dtype a kernel is rated as.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...estimate.device_names import resolve_device
from ...estimate.devices import DeviceMatch, DeviceSpec, match_device
from ...estimate.formats import operand_format
from ...trace.table import Interner, Table
from ..ranks.collectives import communication_links, is_communication, rate_communication
from .attribution import SOURCES, is_copy_event
from .reasons import CODES, RATED

AUTO = "auto"  # rate each activity against its own dtype's peak
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
        named = resolve_device(device_name, rows).spec if device_name else None  # "B200", "h100 sxm" too
        match = DeviceMatch(device_name, named, "datasheet row", "name") if named else match_device(props, rows)
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
    rate_dtype, dtype_codes, dtype_names = _rating_dtypes(acts, dtype)
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
    acts.columns.update(tflops=tflops, gbps=gbps, intensity=intensity, peak_tflops=peak, dram_gbps=dram,
                        pct_peak=pct_peak, pct_dram=pct_dram, efficiency=efficiency, bound=bound,
                        rate_dtype=dtype_codes, over_roof=over, roof_cause=cause,
                        reason=_reasons(acts, devices, over, efficiency))
    acts.strings.update(bound=["compute", "memory", "unknown"], rate_dtype=dtype_names,
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


def _rating_dtypes(acts: Table, dtype: str) -> Tuple[np.ndarray, np.ndarray, List[str]]:
    """The datasheet dtype each activity is rated against ('' when unknown): per activity, and as codes into the
    dtypes in the order the activities first meet them."""
    n = len(acts)
    if dtype != AUTO:
        return np.full(n, dtype, dtype=object), np.zeros(n, dtype=np.int32), [dtype] if n else []
    if not n:
        return np.empty(0, dtype=object), np.empty(0, dtype=np.int32), []
    cats, names = acts.strings["dtype"], acts.strings["name"]
    from_name = [kernel_name_dtype(name) for name in names]
    formats = [operand_format(name) for name in names]
    # decided once per distinct (op dtype, kernel name) pair: a trace has far fewer pairs than activities
    width = len(names) + 1
    pairs, first, which = np.unique((acts["dtype"].astype(np.int64) + 1) * width + acts["name"],
                                    return_index=True, return_inverse=True)
    keys = np.empty(len(pairs), dtype=object)
    for i, (d, name) in enumerate(zip((pairs // width - 1).tolist(), (pairs % width).tolist())):
        key = formats[name] or (cats[d] if d >= 0 else from_name[name])  # a block-scaled GEMM's real operands
        if key == "fp32" and (from_name[name] == "tf32" or "tensorop_s" in names[name]):
            key = "tf32"  # TF32 tensor-core kernels (CUTLASS tensorop_s1688...): the op's dtype still says float
        keys[i] = key
    codes, pair_code = Interner(), np.empty(len(pairs), dtype=np.int32)
    for i in np.argsort(first, kind="stable").tolist():  # dtypes numbered as the activities first meet them
        pair_code[i] = codes.code(keys[i])
    which = which.reshape(-1)
    return keys[which], pair_code[which], codes.items


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
