"""Kernel efficiency: FLOPs and bytes per GPU activity, rated against its device's datasheet peaks.

Model (documented for users in README "How efficiency is computed"):
- Every kernel, memcpy and memset is linked to its launching op (`correlate.py`). The op's FLOPs and bytes come from
  its shapes (`estimate/flops.py`, `estimate/bytes.py`) or, for Inductor kernels, from `kernel_flop` /
  `kernel_num_gb`.
- One op may launch several kernels. Its FLOPs and bytes go to its receiving activities, split among them by
  duration so they sum to the op's totals exactly (nothing is double counted): its compute kernels (GEMM, conv,
  attention, Triton/Inductor, `roles.py`), else its plain work kernels, else its helpers. Helpers (layout
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

The steps live beside this module: `attribution.py` (the activity table and the figures each activity gets from its
op), `rating.py` (against the device) and `grouping.py` (device summaries, grouped tables). This module holds the
analysis object and puts the steps together.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...estimate.devices import DTYPES, DeviceSpec, load_datasheet
from ...estimate.flops import OpEstimate
from ...estimate.model_config import ModelConfig
from ...trace.kineto import KinetoTrace
from ...trace.stages import stage
from ...trace.table import Table, code_labels
from ..correlate import NO_OP, link_activities, op_parents, under_compiled_region
from ..ranks.collectives import activity_columns
from ..ranks.span_devices import props_by_device, rate_by_span
from .attribution import SOURCES, _activities, _attribute, _op_estimates, _OpFacts, is_copy_event
from .grouping import aggregate, busy_time, device_summary, link_counts
from .rating import AUTO, DRAM_MARGIN, DeviceReport, _device_reports, _rate, kernel_name_dtype
from .backward_sizing import size_from_forward
from .conv_backward import split_conv_backward
from .subop_sizing import size_from_subops
from .step_sizing import size_attention_from_steps


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
    # several spans combined: each span's device properties (its activities are rated against its own devices)
    span_props: List[List[Dict[str, Any]]] = field(default_factory=list, repr=False, compare=False)
    # the model's config that sized ops hiding their weights or KV cache (graph captures merged later use it too)
    model_config: Optional[ModelConfig] = field(default=None, repr=False, compare=False)
    # per activity, the op row in `trace` of the captured op a replayed kernel ran (its graph captured in this same
    # trace; -1 else): the execution graph counts the kernel at that op (graph_capture.py)
    captured_op: Optional[np.ndarray] = field(default=None, repr=False, compare=False)

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
                  device_name: Optional[str] = None, model_config: Optional[ModelConfig] = None) -> Efficiency:
    """Estimate and rate every GPU activity of a loaded trace.

    `dtype`: "auto" (each kernel's own dtype) or a datasheet key (fp32, tf32, bf16, fp16, fp8, fp64, int8).
    `device_name`: rate every device as this datasheet row (a name or a trace-style device name).
    `model_config`: the model's config (`estimate/model_config.py`), sizing ops that hide their weights or cache.
    """
    _check_dtype(dtype)
    with stage("correlate"):
        parents = op_parents(trace.ops)
        kernel_links = link_activities(trace.kernels, trace.ops, trace.launches, parents)
        memop_links = link_activities(trace.memops, trace.ops, trace.launches, parents)
        acts = _activities(trace, kernel_links, memop_links)
    with stage("estimate"):
        estimates = _op_estimates(trace, acts["op"], model_config, parents)
        _attribute(acts, _OpFacts(trace, estimates, under_compiled_region(trace.ops, parents)))
        size_from_subops(trace, acts)  # kernels their op cannot size, from the op's sub-ops before the launch
        size_from_forward(trace, acts)  # an autograd Function's backward kernels, from its forward op
        split_conv_backward(trace, acts)  # dgrad / wgrad / bias kernels, each its own gradient's figures
        acts.columns.update(activity_columns(trace, acts))  # collective sizes: comm kernels are rated on the link
    op_shape = np.full(len(acts), -1, dtype=np.int32)
    linked = acts["op"] >= 0
    op_shape[linked] = trace.ops["shape"][acts["op"][linked]]
    acts.columns["op_shape"] = op_shape
    shapes = {int(c): trace.shape(int(c)) for c in np.unique(op_shape[op_shape >= 0]).tolist()}
    size_attention_from_steps(trace.annotations, acts, trace.shape, model_config)  # KV reads from vLLM's steps
    unrated = Efficiency(trace, acts, {}, AUTO, estimates.by_row(), list(trace.devices), shapes,
                         model_config=model_config)
    with stage("rate"):
        return rate(unrated, dtype, datasheet, device_name)


def rate(eff: Efficiency, dtype: str = AUTO, datasheet: Optional[Sequence[DeviceSpec]] = None,
         device_name: Optional[str] = None) -> Efficiency:
    """Match devices to the datasheet and rate every activity; returns a new Efficiency sharing the estimates."""
    _check_dtype(dtype)
    rows = list(datasheet) if datasheet is not None else load_datasheet()
    acts = Table(eff.activities.name, dict(eff.activities.columns), dict(eff.activities.strings))
    devices = _device_reports(eff.device_props, acts, rows, device_name)
    if device_name or not rate_by_span(acts, eff.span_props, rows, dtype):
        _rate(acts, devices, dtype)
    for report in devices.values():
        report.summary = device_summary(acts.take(acts["device"] == report.id))
    return Efficiency(eff.trace, acts, devices, dtype, eff.op_estimates, eff.device_props, eff.shapes,
                      span_props=eff.span_props, model_config=eff.model_config, captured_op=eff.captured_op)


def rate_as_suggested(eff: Efficiency, dtype: str = AUTO,
                      datasheet: Optional[Sequence[DeviceSpec]] = None) -> Efficiency:
    """`eff` rated as the datasheet row its kernel names point to (`devices.device_hint`: the row the device picker
    suggests) when no device of the trace matched a row, the device report saying so; else `eff` itself."""
    from ...estimate.devices import DeviceMatch, device_hint
    from .names import display_name

    if not eff.devices or any(r.match.spec is not None for r in eff.devices.values()):
        return eff
    rows = list(datasheet) if datasheet is not None else load_datasheet()
    acts = eff.activities
    kinds = acts.strings.get("kind", [])
    kernel = acts["kind"] == kinds.index("kernel") if "kernel" in kinds else np.zeros(len(acts), dtype=bool)
    names = [acts.strings["name"][c] for c in np.unique(acts["name"][kernel]).tolist()]
    hint = device_hint(names, rows, display_name)
    if hint is None:
        return eff
    rated = rate(eff, dtype, rows, hint["name"])
    for report in rated.devices.values():
        m = report.match
        report.match = DeviceMatch(m.trace_name, m.spec, f"suggested by the kernel names ({hint['why']}, e.g. "
                                   f"{hint['example']}): the trace names no device; pick another with --device",
                                   m.method)
    return rated


def _check_dtype(dtype: str) -> None:
    if dtype != AUTO and dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use auto or one of {', '.join(DTYPES)}")


# ---------------------------------------------------------------------------------------------- combining

def combine(parts: List[Efficiency], datasheet: Optional[Sequence[DeviceSpec]] = None) -> Efficiency:
    """Several spans as one analysis: activities concatenated (with a `span` column), each rated against its own
    span's devices; the device reports those of the first span that ran on each GPU id (`ranks/span_devices.py`)."""
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
    span_props = [list(p.device_props) for p in parts]
    props = props_by_device(span_props, [np.unique(p.activities["device"]).tolist() for p in parts])
    unrated = Efficiency(None, table, {}, AUTO, {}, props, shapes, span_props=span_props)
    return unrated.rerate(AUTO, datasheet)


def _recode(codes: np.ndarray, cats: List[str], merged: Dict[str, int], out: List[str]) -> np.ndarray:
    lookup = code_labels(cats, merged, out)
    return np.where(codes >= 0, lookup[np.clip(codes, 0, None)], -1).astype(codes.dtype) if len(cats) else codes


# The kernels analysis as callers import it (its parts: attribution.py, rating.py, grouping.py).
__all__ = ["combine", "AUTO", "Efficiency", "DeviceReport", "analyze_trace", "rate", "aggregate", "device_summary",
           "busy_time", "link_counts", "NO_OP", "SOURCES", "DRAM_MARGIN", "is_copy_event", "kernel_name_dtype"]
