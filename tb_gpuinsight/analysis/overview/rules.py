"""Recommendations: a small rule set, each rule a threshold (with its reason) and a function that looks at one span's
overview data and returns the evidence and the time it could recover per step, or None when it does not fire.

Thresholds are shares of the mean step time (or of GPU kernel time) below which a fix would recover less than the
step-to-step noise of a typical training loop (a few %); each rule states its own reason in `RULES`.
Recoverable time is an estimate, documented per rule; "up to" rules give an upper bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ...sections import Section
from ..kernels.efficiency import Efficiency
from ..kernels.names import display_name
from .breakdown import CATEGORIES
from .figures import ActivityView

TOP = 5


@dataclass
class SpanData:
    """What the rules see of one span: its name, overview section, rated analysis and step rows."""
    span: str
    section: Section
    eff: Efficiency
    rows: List[Dict[str, Any]]
    view: ActivityView = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.view is None:
            self.view = ActivityView.of(self.eff.activities)

    @property
    def steps(self) -> int:
        return max(len(self.rows), 1)

    @property
    def wall_us(self) -> float:
        return float(sum(r["wall_us"] for r in self.rows))

    def total(self, key: str) -> float:
        return float(sum(r[key] for r in self.rows))

    def kernel_time(self) -> float:
        return self.view.kernel_us

    def kernels_of(self, *keys: str) -> np.ndarray:
        """Mask of the kernels whose breakdown category is one of `keys`."""
        return self.view.is_kernel & np.isin(self.view.category, [CATEGORIES.index(k) for k in keys])

    def kernel_efficiency(self) -> List[Dict[str, Any]]:
        """Per kernel name (communication left out), most time first: total time and time-weighted efficiency over
        its rated launches (as the kernel table computes it), with the bound and dtype of a rated launch."""
        acts = self.eff.activities
        rows = np.flatnonzero(self.view.is_kernel & ~self.kernels_of("communication"))
        if not len(rows):
            return []
        codes, inverse = np.unique(acts["name"][rows], return_inverse=True)
        dur, eff = acts["dur"][rows], acts["efficiency"][rows]
        rated = np.isfinite(eff) & ~acts["over_roof"][rows]  # over the roof: an impossible figure, not a rating
        total = np.bincount(inverse, weights=dur)
        rated_time = np.bincount(inverse, weights=np.where(rated, dur, 0))
        weighted = np.bincount(inverse, weights=np.where(rated, eff * dur, 0))
        first = np.full(len(codes), -1)
        first[inverse[rated][::-1]] = rows[rated][::-1]
        names, bounds, dtypes = acts.strings["name"], acts.strings["bound"], acts.strings["rate_dtype"]
        out = []
        for g in np.argsort(-total, kind="stable").tolist():
            if rated_time[g] <= 0:
                continue
            row = int(first[g])
            out.append({"name": names[int(codes[g])], "total_us": float(total[g]),
                        "efficiency": float(weighted[g] / rated_time[g]), "bound": bounds[int(acts["bound"][row])],
                        "dtype": dtypes[int(acts["rate_dtype"][row])] or None})
        return out


@dataclass
class Rule:
    id: str
    title: str
    threshold: float
    why: str  # the threshold's justification, shown with the recommendation
    check: Callable[["Rule", SpanData], Optional[Dict[str, Any]]]


def _found(rule: Rule, d: SpanData, recoverable_total: float, advice: str, figures: Dict[str, Any],
           items: List[Dict[str, Any]] = (), links: List[Dict[str, Any]] = ()) -> Dict[str, Any]:
    per_step = recoverable_total / d.steps
    return {"id": rule.id, "title": rule.title, "advice": advice, "threshold": rule.why, "span": d.span,
            "recoverable_us": per_step, "recoverable_share": per_step / (d.wall_us / d.steps) if d.wall_us else None,
            "figures": figures, "items": [_named(it) for it in items], "links": list(links)}


def _named(item: Dict[str, Any]) -> Dict[str, Any]:
    """An evidence item with its kernel's readable name beside the raw one (which links and lookups use)."""
    return {**item, "display_name": display_name(item["name"])} if item.get("name") else dict(item)


def _link(d: SpanData, name: str, op: str = "") -> Dict[str, Any]:
    """A link to the kernel table: labelled by the readable name, filtered by the raw one (a mangled CK name is
    500 characters)."""
    return {"label": display_name(name), "tab": "kernels", "filter": name, "op": op, "span": d.span}


def _top_by_name(d: SpanData, rows: np.ndarray) -> List[Dict[str, Any]]:
    """The selected activities grouped by kernel name, most time first (TOP of them): name, time and count per
    step, and the op that launched the first of them."""
    acts = d.eff.activities
    rows = np.flatnonzero(rows) if rows.dtype == bool else np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return []
    codes, first, inverse = np.unique(acts["name"][rows], return_index=True, return_inverse=True)
    time = np.bincount(inverse, weights=acts["dur"][rows])
    count = np.bincount(inverse)
    names, ops = acts.strings["name"], acts.strings["op_name"]
    out = []
    for g in np.argsort(-time, kind="stable")[:TOP].tolist():
        op = int(acts["op_name"][rows[first[g]]])
        out.append({"name": names[int(codes[g])], "time_us": float(time[g]) / d.steps,
                    "count_per_step": float(count[g]) / d.steps, "op": ops[op] if op >= 0 else None})
    return out


# ------------------------------------------------------------------------------------------------ rules

def low_efficiency(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """Kernels below 30 % of their roof that each take >= 5 % of kernel time; recoverable: reaching a modest
    50 % of the roof, time x (1 - efficiency / 0.5). Communication kernels are left to `exposed_comm`."""
    kernel_us = d.kernel_time()
    if kernel_us <= 0:
        return None
    slow = [r for r in d.kernel_efficiency() if r["efficiency"] < LOW_EFFICIENCY
            and r["total_us"] >= rule.threshold * kernel_us]
    if not slow:
        return None
    gain = sum(r["total_us"] * (1 - r["efficiency"] / TARGET_EFFICIENCY) for r in slow)
    items = [{"name": r["name"], "time_us": r["total_us"] / d.steps, "share": r["total_us"] / kernel_us,
              "efficiency": r["efficiency"], "bound": r["bound"], "dtype": r["dtype"]} for r in slow[:TOP]]
    return _found(rule, d, gain, "These kernels dominate GPU time yet reach a small share of what their roofline "
                  "allows: check their shapes (multiples of 8/16 for Tensor Cores), layouts (channels_last for "
                  "convolutions), batch size and dtype; consider torch.compile or a better library kernel.",
                  {"kernels": len(slow), "time_share": sum(r["total_us"] for r in slow) / kernel_us},
                  items, [_link(d, r["name"]) for r in slow[:TOP]])


LOW_EFFICIENCY = 0.30
TARGET_EFFICIENCY = 0.50


def fp32_matmul(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """fp32 GEMMs and convolutions (not TF32) on a device with a faster Tensor Core dtype; recoverable: time x
    (1 - 1 / min(peak ratio, 2)): the datasheet ratio is 2-16x, real kernels gain about 2x (memory, tiles)."""
    acts = d.eff.activities
    kernel_us = d.kernel_time()
    if kernel_us <= 0:
        return None
    dtypes = acts.strings["rate_dtype"]
    fp32 = dtypes.index("fp32") if "fp32" in dtypes else -2
    matrix = np.flatnonzero(d.kernels_of("gemm", "convolution") & (acts["rate_dtype"] == fp32)).tolist()
    time = float(acts["dur"][matrix].sum()) if matrix else 0.0
    if time < rule.threshold * kernel_us:
        return None
    target, ratio = _faster_dtype(d.eff, acts["device"][matrix[0]])
    if target is None:
        return None
    top = _top_by_name(d, np.asarray(matrix, dtype=np.int64))
    advice = ("Allow TF32 for fp32 matmuls and convolutions (torch.backends.cuda.matmul.allow_tf32 = True, "
              "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision('high')) or train "
              "under torch.autocast(dtype=torch.bfloat16)." if target == "tf32" else
              f"This GPU has no TF32: train under torch.autocast(device_type='cuda', dtype=torch.float16) with a "
              f"GradScaler so matmuls and convolutions use its {target} Tensor Cores.")
    return _found(rule, d, time * (1 - 1 / min(ratio, 2.0)), advice,
                  {"time_share": time / kernel_us, "target_dtype": target, "peak_ratio": ratio},
                  top, [_link(d, t["name"], t["op"] or "") for t in top])


def _faster_dtype(eff: Efficiency, device: int):
    report = eff.devices.get(int(device))
    if report is None or report.match.spec is None:
        return None, 1.0
    fp32 = report.match.peak_tflops("fp32")
    for key in ("tf32", "bf16", "fp16"):
        peak = report.match.peak_tflops(key)
        if peak and fp32 and peak > fp32 * 1.5:
            return key, peak / fp32
    return None, 1.0


def host_launch_bound(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """GPU idle while the host is busy or launching >= 20 % of step time; recoverable: up to that idle time."""
    host, launch = d.total("host_bound_us"), d.total("launch_bound_us")
    idle = host + launch
    if not d.wall_us or idle < rule.threshold * d.wall_us:
        return None
    return _found(rule, d, idle, "The GPU waits for the host to queue work. Capture the step in a CUDA graph "
                  "(torch.cuda.graphs / torch.compile(mode='reduce-overhead')) or compile the model "
                  "(torch.compile) to cut per-op launch and Python overhead; a larger batch per step also helps.",
                  {"host_bound_us": host / d.steps, "launch_bound_us": launch / d.steps,
                   "idle_share": idle / d.wall_us, "kernels_per_step": d.total("kernel_count") / d.steps})


TINY_US = 10.0


def tiny_elementwise(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """>= 100 elementwise/reduction kernels under 10 us per step; recoverable: half their time (fusion removes
    most of their memory passes) plus the launch-bound idle in proportion to the launches fused away."""
    acts = d.eff.activities
    tiny = np.flatnonzero(d.kernels_of("elementwise", "reduction") & (acts["dur"] < TINY_US)).tolist()
    per_step = len(tiny) / d.steps
    if per_step < rule.threshold:
        return None
    kernels = max(d.total("kernel_count"), 1.0)
    time = float(acts["dur"][tiny].sum())
    gain = 0.5 * time + d.total("launch_bound_us") * min(1.0, len(tiny) / kernels)
    top = _top_by_name(d, np.asarray(tiny, dtype=np.int64))
    return _found(rule, d, gain, "Many tiny elementwise kernels: fuse them with torch.compile (Inductor fuses "
                  "pointwise chains into one kernel), use fused optimizers (foreach=True / fused=True) and fused "
                  "layers (e.g. fused LayerNorm / bias+activation).",
                  {"tiny_kernels_per_step": per_step, "tiny_time_us": time / d.steps, "under_us": TINY_US},
                  top, [_link(d, t["name"]) for t in top])


def pageable_memcpy(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """Host-to-device copies from pageable memory >= 1 % of step time; recoverable: half their time (pinned
    copies run at about twice the bandwidth and can overlap compute with non_blocking=True)."""
    acts = d.eff.activities
    names = acts.strings["name"]
    codes = [i for i, n in enumerate(names) if "Pageable" in n and "HtoD" in n]
    mask = np.isin(acts["name"], codes)
    time = float(acts["dur"][mask].sum())
    if not d.wall_us or time < rule.threshold * d.wall_us:
        return None
    nbytes = float(np.nansum(acts["memop_bytes"][mask]))
    return _found(rule, d, 0.5 * time, "Copy from pinned memory: DataLoader(pin_memory=True) and "
                  "tensor.to('cuda', non_blocking=True); pin long-lived host buffers with tensor.pin_memory().",
                  {"copies_per_step": int(mask.sum()) / d.steps, "time_us": time / d.steps,
                   "bytes_per_step": nbytes / d.steps, "gbps": nbytes / (time * 1e-6) / 1e9 if time else None,
                   "time_share": time / d.wall_us},
                  links=[_link(d, names[c]) for c in codes[:TOP]])


def sync_in_step(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """GPU idle caused by host synchronisation >= 2 % of step time; recoverable: that idle time."""
    idle = d.total("sync_us")
    if not d.wall_us or idle < rule.threshold * d.wall_us:
        return None
    calls = d.section.info.get("sync_evidence", [])
    return _found(rule, d, idle, "The host waits for the GPU inside the step, then the GPU waits for the host. "
                  "Avoid .item(), .cpu(), .tolist(), printing or logging tensor values and torch.cuda.synchronize() "
                  "in the loop; keep metrics on the GPU and read them every N steps.",
                  {"sync_idle_us": idle / d.steps, "sync_calls_per_step": d.total("sync_calls") / d.steps,
                   "idle_share": idle / d.wall_us}, calls)


def dataloader_stall(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """GPU idle while the host waits in DataLoader __next__ >= 5 % of step time; recoverable: that idle time."""
    idle = d.total("data_loading_us")
    if not d.wall_us or idle < rule.threshold * d.wall_us:
        return None
    return _found(rule, d, idle, "The GPU waits for the next batch: raise DataLoader(num_workers=...), set "
                  "persistent_workers=True and prefetch_factor, pin_memory=True, and move decoding/augmentation "
                  "off the training process (or onto the GPU).",
                  {"data_loading_idle_us": idle / d.steps, "idle_share": idle / d.wall_us})


def exposed_comm(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """Communication not overlapped with compute >= 10 % of step time; recoverable: up to the exposed time."""
    exposed, overlapped = d.total("communication_us"), d.total("comm_overlapped_us")
    if not d.wall_us or exposed < rule.threshold * d.wall_us:
        return None
    top = _top_by_name(d, d.kernels_of("communication"))
    return _found(rule, d, exposed, "Communication runs while no compute does. With DDP, tune bucket_cap_mb and "
                  "gradient_as_bucket_view so all-reduces start during backward; with FSDP enable backward/forward "
                  "prefetch; check for load imbalance between ranks (the Distributed view).",
                  {"exposed_us": exposed / d.steps, "overlapped_us": overlapped / d.steps,
                   "exposed_share": exposed / d.wall_us,
                   "overlap_ratio": overlapped / (overlapped + exposed) if overlapped + exposed else None},
                  top, [_link(d, t["name"]) for t in top])


PYTHON_EVENT_US = 1.0  # the profiler's own work per recorded Python call (with_stack), an order of magnitude
PYTHON_EVENTS_PER_MS = 20  # below it the stack recording costs < 2 % of host time at PYTHON_EVENT_US each


def profiler_stack(rule: Rule, d: SpanData) -> Optional[Dict[str, Any]]:
    """Steps whose host time dwarfs their GPU time (GPU idle >= 50 % of the step) while recording many Python
    calls (with_stack=True: python_function events), each step judged on its own events per ms: the profiler's
    own stack recording is a likely part of that host time. Recoverable (an estimate): PYTHON_EVENT_US per event
    of those steps, within their idle time."""
    hit = [(r, r["wall_us"] - r["gpu_busy_us"], _python_events(r, d)) for r in d.rows if r["wall_us"] > 0]
    hit = [(r, idle, n) for r, idle, n in hit if idle >= rule.threshold * r["wall_us"]
           and n * 1000 / r["wall_us"] >= PYTHON_EVENTS_PER_MS]
    if not hit:
        return None
    wall = sum(r["wall_us"] for r, _, _ in hit)
    idle, events = sum(i for _, i, _ in hit), sum(n for _, _, n in hit)
    overhead = sum(min(i, n * PYTHON_EVENT_US) for _, i, n in hit)
    return _found(rule, d, overhead, "The GPU idles most of the step while the step records many Python calls "
                  "per ms: part of the host time is the profiler's own stack recording. Profile again without "
                  "with_stack=True (keep record_shapes) to measure the host side as it runs unprofiled.",
                  {"python_events_per_ms": events * 1000 / wall, "gpu_idle_share": idle / wall,
                   "python_events": events, "steps_judged": len(d.rows), "steps_flagged": len(hit)})


def _python_events(row: Dict[str, Any], d: SpanData) -> float:
    """A step's python_function events; a summary written before they were counted per step has the trace's
    rate only, spread over the step."""
    if row.get("python_events") is not None:
        return float(row["python_events"])
    events, span_us = d.section.info.get("python_events", 0), d.section.info.get("duration_us") or 0.0
    return events * row["wall_us"] / span_us if span_us > 0 else 0.0


RULES: List[Rule] = [
    Rule("low_efficiency", "Kernels far below their roofline dominate GPU time", 0.05,
         "each kernel >= 5 % of kernel time at < 30 % of its roofline: well-tuned library kernels reach 60-90 %; "
         "a smaller kernel would recover < 2.5 % of the step even at 2x", low_efficiency),
    Rule("fp32_matmul", "fp32 GEMMs/convolutions without TF32/BF16", 0.05,
         ">= 5 % of kernel time in fp32 matrix kernels on a GPU whose Tensor Core peak is >= 1.5x its fp32 peak",
         fp32_matmul),
    Rule("host_launch_bound", "Steps are host- or launch-bound", 0.20,
         "host- and launch-bound GPU idle >= 20 % of step time: below it the GPU is fed most of the time and "
         "graph capture gains drown in step-to-step noise", host_launch_bound),
    Rule("tiny_elementwise", "Many tiny elementwise kernels", 100,
         ">= 100 elementwise/reduction kernels under 10 us per step: at ~5 us launch cost each that is >= 0.5 ms "
         "of launch work per step", tiny_elementwise),
    Rule("pageable_memcpy", "Host-to-device copies from pageable memory", 0.01,
         "pageable HtoD copies >= 1 % of step time: a pinned copy is ~2x faster, so less recovers < 0.5 %",
         pageable_memcpy),
    Rule("sync_in_step", "Host synchronisation inside the step", 0.02,
         "sync-caused GPU idle >= 2 % of step time: one .item() per step costs tens of us, a few per step are "
         "noise; 2 % means the syncs stall the queue every step", sync_in_step),
    Rule("dataloader_stall", "Data-loader stalls", 0.05,
         "GPU idle in DataLoader __next__ >= 5 % of step time: below it, prefetching gains are within noise",
         dataloader_stall),
    Rule("exposed_comm", "Exposed communication", 0.10,
         "communication not hidden under compute >= 10 % of step time: bucket/prefetch tuning typically hides "
         "half of it, so less would recover < 5 %", exposed_comm),
    Rule("profiler_stack", "Host time inflated by the profiler's stack recording", 0.50,
         f"GPU idle >= 50 % of the step with >= {PYTHON_EVENTS_PER_MS} python_function events per ms: at ~1 us of "
         "profiler work each that is >= 2 % of host time", profiler_stack),
]


def recommend(spans: List[SpanData]) -> List[Dict[str, Any]]:
    """Recommendations over the spans of a selection, one per rule that fires, sorted by recoverable time per
    step (most first). With several spans, a rule's recoverable time is its per-step mean over the spans where
    it fired weighted by their steps, and its evidence is from the span where it recovers most."""
    found: Dict[str, List[tuple]] = {}
    for d in spans:
        if not d.section.info.get("gpu_activities"):
            continue  # no GPU work: every rule would be judging idle time of a CPU-only run
        for rule in RULES:
            hit = rule.check(rule, d)
            if hit is not None:
                found.setdefault(rule.id, []).append((hit, d.steps))
    out = []
    for hits in found.values():
        best = max(hits, key=lambda h: h[0]["recoverable_us"])[0]
        steps = sum(s for _, s in hits)
        merged = dict(best, spans_fired=len(hits),
                      recoverable_us=sum(h["recoverable_us"] * s for h, s in hits) / steps)
        out.append(merged)
    return sorted(out, key=lambda r: -r["recoverable_us"])
