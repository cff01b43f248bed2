"""Step windows of one span: a serving engine's step annotations (vLLM, SGLang: `serving.py`, with each step's
phase, batch and tokens), else `ProfilerStep#N` annotations (2022+ `user_annotation`, 2021 `Operator`), or the
whole span when the trace has none.

A step's window runs from its annotation's start to the next step's start, so consecutive steps tile the time
without gaps or overlap and GPU work that lags behind its step's CPU side is counted where it ran. The last step
ends at its annotation's end or at the end of the last GPU activity launched inside it, whichever is later (its
GPU tail would otherwise be lost).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from ..serving import label as serving_label, serving_annotations

_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")  # past int64 (19+ digits): not read as a step number
SOURCE_STEPS = "ProfilerStep"
SOURCE_SPAN = "span"
SOURCE_SERVING = "serving"


@dataclass
class StepWindows:
    """Step windows [start, end) in trace microseconds, the step numbers and where they came from."""
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray
    source: str  # SOURCE_SERVING, SOURCE_STEPS or SOURCE_SPAN
    meta: List[Dict[str, Any]] = field(default_factory=list)  # serving steps: phase, batch, tokens, ...
    names: List[str] = field(default_factory=list)  # serving steps: the annotations' own names

    def __len__(self) -> int:
        return len(self.start)

    @property
    def labels(self) -> List[str]:
        if self.source == SOURCE_SPAN:
            return ["whole span"]
        if self.source == SOURCE_SERVING:
            return [serving_label(n, m) for n, m in zip(self.number.tolist(), self.meta)]
        return [f"step {n}" for n in self.number.tolist()]

    @property
    def annotated(self) -> bool:
        """The steps come from annotations (not the whole span)."""
        return self.source != SOURCE_SPAN

    def step_names(self) -> List[str]:
        """Each step's annotation as the trace names it (the timeline's step lane)."""
        if self.source == SOURCE_SERVING:
            return list(self.names)
        return [f"ProfilerStep#{n}" for n in self.number.tolist()] if self.annotated else []


def _annotated(table: Table, kind: Optional[str]) -> tuple:
    """(start, end, number) of the ProfilerStep#N rows of a table (CPU-side rows only when it has kinds)."""
    names = table.strings.get("name", [])
    numbers = np.full(len(names), -1, dtype=np.int64)
    for i, name in enumerate(names):
        m = _STEP.match(name)
        if m:
            numbers[i] = int(m.group(1))
    if not len(table) or not (numbers >= 0).any():
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    mask = numbers[table["name"]] >= 0
    if kind is not None and "kind" in table:
        kinds = table.strings.get("kind", [])
        mask &= np.array([kinds[k] == kind for k in table["kind"]], dtype=bool)
    ts, dur = table["ts"][mask], table["dur"][mask]
    return ts, ts + dur, numbers[table["name"][mask]]


def step_windows(trace: KinetoTrace, activity_end: Optional[np.ndarray] = None,
                 launch_ts: Optional[np.ndarray] = None) -> StepWindows:
    """The span's steps. `activity_end` / `launch_ts`: GPU activities' end times and their launch calls' start
    (NaN when unknown), used to extend the last step over the GPU work it launched."""
    start, end, meta, names = serving_annotations(trace.annotations)
    source = SOURCE_SERVING
    number = np.arange(len(start), dtype=np.int64)
    if not len(start):
        source, (start, end, number) = SOURCE_STEPS, _annotated(trace.annotations, "cpu")
    if not len(start):
        start, end, number = _annotated(trace.ops, None)
    if not len(start):
        return _whole_span(trace)
    order = np.argsort(start, kind="stable")
    start, end, number = start[order], end[order], number[order]
    keep = np.r_[True, start[1:] > start[:-1]]  # the same step written twice (two threads): keep one
    start, end, number = start[keep], end[keep], number[keep]
    if source == SOURCE_SERVING:  # already in start order
        meta = [m for m, k in zip(meta, keep.tolist()) if k]
        names = [n for n, k in zip(names, keep.tolist()) if k]
        number = np.arange(len(start), dtype=np.int64)
    ends = np.r_[start[1:], end[-1]]
    if activity_end is not None and launch_ts is not None and len(activity_end):
        inside = (launch_ts >= start[-1]) & (launch_ts < end[-1])
        if inside.any():
            ends[-1] = max(ends[-1], float(np.max(activity_end[inside])))
    return StepWindows(start.astype(np.float64), ends.astype(np.float64), number, source, meta, names)


SERVING_FIELDS = ("batch", "tokens", "kv_tokens", "attended_pairs")


def serving_arrays(windows: StepWindows) -> Dict[str, np.ndarray]:
    """Per step, each serving field as `step_<field>` (-1 where the annotation does not give it); none for
    ProfilerStep or whole-span windows."""
    if not windows.meta:
        return {}
    return {f"step_{f}": np.array([-1 if m.get(f) is None else m[f] for m in windows.meta], dtype=np.int64)
            for f in SERVING_FIELDS}


def _whole_span(trace: KinetoTrace) -> StepWindows:
    t0, t1 = trace.meta.start_us, trace.meta.end_us
    if t0 is None or t1 is None or t1 <= t0:
        return StepWindows(np.empty(0), np.empty(0), np.empty(0, dtype=np.int64), SOURCE_SPAN)
    return StepWindows(np.array([t0], dtype=np.float64), np.array([t1], dtype=np.float64),
                       np.array([-1], dtype=np.int64), SOURCE_SPAN)
