"""Per-step rows and headline figures of one span (or several spans of a worker), from its `overview` section and
its rated analysis.

- Step time: wall time of each step window; mean, median, p90 and spread (max - min, and the coefficient of
  variation std / mean) over the steps.
- GPU busy %: share of step time some GPU activity ran (interval union over streams).
- Achieved TFLOP/s: estimated FLOPs of the kernels that start in the step / step wall time. MFU: that / the
  datasheet peak of the dominant dtype (the dtype with the most kernel time among kernels with a FLOP estimate).
  FLOPs are only known for some kernels: `compute_flop_share` is the share of compute kernel time that has an
  estimate (`kernels/coverage.py`, the one definition every view uses: per step here, over the whole span in the
  headline as on the kernel cards), so MFU is a lower bound when it is below 1.
- Tensor Core share: kernel time of kernels that ran on Tensor Cores (by name, or matrix work in a Tensor Core
  dtype; `kernels.names.uses_tensor_cores`) / all kernel time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from ...sections import Section
from ...trace.table import Table
from ..kernels import coverage
from ..kernels.names import kernel_class, uses_tensor_cores
from .breakdown import BUSY, CATEGORIES, COMPUTE, IDLE, LABELS, activity_categories, unique_keys
from .steps import SERVING_FIELDS


def step_rows(section: Section, span: str = "") -> List[Dict[str, Any]]:
    """One dict per step: its window, wall time, every category's time, the communication split and kernel
    figures (the public per-step breakdown: the distributed view reuses it per rank)."""
    a = section.arrays
    labels = section.info.get("labels", [])
    categories = section_categories(section)
    exposed = "t_communication" if "t_communication" in a else "t_cpu_collectives"
    rows = []
    for i in range(len(a["step_start"])):
        wall = float(a["step_end"][i] - a["step_start"][i])
        busy = sum(float(a[f"t_{k}"][i]) for k, _ in BUSY if f"t_{k}" in a)
        comm_exposed = float(a[exposed][i])
        row = {"span": span, "step": labels[i] if i < len(labels) else f"step {i}",
               "step_number": int(a["step_number"][i]), "start_us": float(a["step_start"][i]),
               "end_us": float(a["step_end"][i]), "wall_us": wall, "gpu_busy_us": busy,
               "gpu_busy_pct": busy / wall if wall > 0 else None}
        row.update({f"{k}_us": float(a[f"t_{k}"][i]) for k in categories})
        row.update(comm_overlapped_us=float(a["comm_overlapped_us"][i]), comm_exposed_us=comm_exposed,
                   kernel_count=int(a["kernel_count"][i]), kernel_us=float(a["kernel_us"][i]),
                   kernel_median_us=_num(a["kernel_median_us"][i]), flops=float(a["flops"][i]),
                   compute_flop_share=_step_coverage(a, i),
                   sync_calls=int(a["sync_calls"][i]),
                   python_events=int(a["python_events"][i]) if "python_events" in a else None)
        row.update(_serving(section, i))
        rows.append(row)
    return rows


def _serving(section: Section, i: int) -> Dict[str, Any]:
    """A serving step's phase, batch, tokens, KV tokens and attended pairs (vLLM / SGLang annotations)."""
    phases = section.info.get("phases") or []
    if i >= len(phases):
        return {}
    out: Dict[str, Any] = {"phase": phases[i]}
    for f in SERVING_FIELDS:
        values = section.arrays.get(f"step_{f}")
        out[f] = int(values[i]) if values is not None and i < len(values) and values[i] >= 0 else None
    return out
def section_categories(section: Section) -> List[str]:
    """The categories a span's split uses: the GPU ones, or a CPU-only span's (`cpu.py`)."""
    return list(section.info.get("categories") or CATEGORIES)


def _step_coverage(a: Dict[str, np.ndarray], i: int) -> Optional[float]:
    """A step's FLOP coverage (summaries written before `compute_kernel_us` existed have none)."""
    return coverage.share(float(a["flops_kernel_us"][i]), float(a["compute_kernel_us"][i])) \
        if "compute_kernel_us" in a else None


def _num(x: float) -> Optional[float]:
    return None if x is None or not np.isfinite(x) else float(x)


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b > 0 else None


@dataclass
class ActivityView:
    """Per-activity flags of one span's rated analysis, computed once: kernel or copy, breakdown category
    (index into CATEGORIES), Tensor Core use."""
    acts: Table
    is_kernel: np.ndarray
    category: np.ndarray
    tensor_core: np.ndarray

    @classmethod
    def of(cls, acts: Table) -> "ActivityView":
        kinds = acts.strings.get("kind", [])
        is_kernel = np.array([k == "kernel" for k in kinds] + [False], dtype=bool)[acts["kind"]] if len(acts) \
            else np.zeros(0, dtype=bool)
        return cls(acts, is_kernel, activity_categories(acts), _tensor_core(acts) & is_kernel)

    @property
    def kernel_us(self) -> float:
        return float(self.acts["dur"][self.is_kernel].sum())


def _tensor_core(acts: Table) -> np.ndarray:
    if not len(acts):
        return np.zeros(0, dtype=bool)
    names, ops, dtypes = acts.strings["name"], acts.strings["op_name"], acts.strings["rate_dtype"]
    uniq, inverse = unique_keys(acts, ("name", "op_name", "rate_dtype"))
    tc = np.array([uses_tensor_cores(names[n], dtypes[d] if d >= 0 else "",
                                     kernel_class(names[n], "kernel", ops[o] if o >= 0 else None))
                   for n, o, d in uniq.tolist()], dtype=bool)
    return tc[inverse]


def dominant_dtype(view: ActivityView) -> Dict[str, Any]:
    """The rating dtype with the most kernel time among kernels with a FLOP estimate, and its peak."""
    acts = view.acts
    mask = view.is_kernel & ~np.isnan(acts["flops"]) & (acts["rate_dtype"] >= 0)
    if not mask.any():
        return {"dtype": None, "peak_tflops": None, "time_us": 0.0}
    time = np.bincount(acts["rate_dtype"][mask], weights=acts["dur"][mask])
    code = int(np.argmax(time))
    dtype = acts.strings["rate_dtype"][code] or None
    peaks = acts["peak_tflops"][mask & (acts["rate_dtype"] == code)]
    peaks = peaks[~np.isnan(peaks)]
    return {"dtype": dtype, "peak_tflops": float(np.median(peaks)) if len(peaks) and dtype else None,
            "time_us": float(time[code])}


def tensor_core_share(view: ActivityView) -> Optional[float]:
    """Share of kernel time on Tensor Cores (see module doc)."""
    total = view.kernel_us
    return float(view.acts["dur"][view.tensor_core].sum()) / total if total > 0 else None


def _stats(values: List[float]) -> Dict[str, Optional[float]]:
    if not values:
        return {"mean": None, "median": None, "p90": None, "min": None, "max": None, "spread": None, "cv": None}
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    return {"mean": mean, "median": float(np.median(v)), "p90": float(np.percentile(v, 90)), "min": float(v.min()),
            "max": float(v.max()), "spread": float(v.max() - v.min()), "cv": float(v.std() / mean) if mean else None}


def headline(rows: List[Dict[str, Any]], views: List[ActivityView]) -> Dict[str, Any]:
    """Headline figures over the steps `rows` of the spans whose rated activities are `views`."""
    walls = [r["wall_us"] for r in rows]
    wall = float(sum(walls))
    busy = sum(r["gpu_busy_us"] for r in rows)
    flops = sum(r["flops"] for r in rows)
    dom = max((dominant_dtype(v) for v in views), key=lambda d: d["time_us"],
              default={"dtype": None, "peak_tflops": None})
    tflops = flops / (wall * 1e-6) / 1e12 if wall > 0 and flops > 0 else None
    medians = [r["kernel_median_us"] for r in rows if r["kernel_median_us"] is not None]
    shares = [(tensor_core_share(v), v.kernel_us) for v in views]
    tc_time = sum(s * t for s, t in shares if s is not None)
    tc_total = sum(t for s, t in shares if s is not None)
    return {
        "steps": len(rows), "step_time_us": _stats(walls), "wall_us": wall,
        "gpu_busy_pct": busy / wall if wall > 0 else None,
        "tflops": tflops, "mfu": tflops / dom["peak_tflops"] if tflops and dom["peak_tflops"] else None,
        "mfu_dtype": dom["dtype"], "peak_tflops": dom["peak_tflops"],
        coverage.KEY: coverage.flop_coverage([v.acts for v in views])[coverage.KEY],
        "tensor_core_share": tc_time / tc_total if tc_total > 0 else None,
        "kernels_per_step": float(np.mean([r["kernel_count"] for r in rows])) if rows else None,
        "kernel_median_us": float(np.median(medians)) if medians else None,
        "breakdown_us": {k: float(sum(r[f"{k}_us"] for r in rows)) for k in _row_categories(rows)},
        "comm_overlapped_us": float(sum(r["comm_overlapped_us"] for r in rows)),
        "compute_us": float(sum(r.get(f"{k}_us", 0.0) for r in rows for k in COMPUTE)),
        "idle_us": float(sum(r.get(f"{k}_us", 0.0) for r in rows for k, _ in IDLE)),
        "phases": phase_summary(rows, dom["peak_tflops"]),
    }


def phase_summary(rows: List[Dict[str, Any]], peak_tflops: Optional[float]) -> Dict[str, Dict[str, Any]]:
    """Serving steps by phase (prefill / extend / decode / mixed): steps, mean wall time, GPU busy, mean batch and
    tokens, TFLOP/s and MFU against the selection's peak; {} when the steps are not serving steps."""
    out: Dict[str, Dict[str, Any]] = {}
    for phase in dict.fromkeys(r["phase"] for r in rows if r.get("phase")):
        mine = [r for r in rows if r.get("phase") == phase]
        wall = sum(r["wall_us"] for r in mine)
        flops = sum(r["flops"] for r in mine)
        tflops = flops / (wall * 1e-6) / 1e12 if wall > 0 and flops > 0 else None
        out[phase] = {"steps": len(mine), "wall_us_mean": wall / len(mine),
                      "gpu_busy_pct": sum(r["gpu_busy_us"] for r in mine) / wall if wall > 0 else None,
                      "batch_mean": _mean(r.get("batch") for r in mine),
                      "tokens_mean": _mean(r.get("tokens") for r in mine), "tflops": tflops,
                      "mfu": tflops / peak_tflops if tflops and peak_tflops else None}
    return out


def _mean(values) -> Optional[float]:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _row_categories(rows: List[Dict[str, Any]]) -> List[str]:
    """The categories the step rows carry, in the order of LABELS (GPU, then CPU-only)."""
    present = {k[:-3] for r in rows for k in r if k.endswith("_us")}
    return [k for k in LABELS if k in present]
