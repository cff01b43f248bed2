"""Trends across many runs: each run of a logdir reduced to a small digest (its per-step samples, MFU, time per
breakdown class and per kernel), then every run marked against the runs before it.

The rule (sequential change points, `analysis.diff.stats` for each comparison): runs are taken in recording order
(the earliest span stamp of each, or an hparam's value). The first run starts a segment. Each next run is compared
with the pooled kept steps of the current segment (every run since the last change): a `regression` or an
`improvement` at the threshold (worse / better by more than the threshold and beyond the noise band of the
difference of the medians) marks the run and starts a new segment with it; `none` adds it to the segment. A run
with too few steps to judge is marked `none`, says so in `why`, and is left out of the segment. Each marked change
names the kernels whose time per step moved most against the segment's mean, with their share of the change.

Digests are built from what the summaries hold (an Overview and a rated analysis), never from a trace, so a trend
over hundreds of runs reads hundreds of summaries once and then only digests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..kernels.efficiency import Efficiency
from ..kernels.names import kernel_class, normalize
from ..overview import BUSY, CATEGORIES, Overview
from .stats import RULE, Sample, compare_samples, pooled, sample

METRICS = ("step", "kernel", "mfu")
TOP = 5
KERNELS_KEPT = 200  # per run, the kernels with the most time: a change is named by the ones that moved most


@dataclass
class Digest:
    """One run as the trend sees it."""
    run: str
    worker: str
    order: Any  # recording time in ns, or the hparam's value
    steps: List[Dict[str, Any]]  # the Overview's step rows, reduced to what the metrics read
    mfu: Optional[float]  # %, the Overview headline's
    peak_tflops: Optional[float]
    classes: Dict[str, float]  # breakdown class -> ms per step (mean over the steps)
    kernels: Dict[str, Tuple[str, float]]  # normalised kernel name -> (class, ms per step)


def digest(run: str, worker: str, order: Any, overview: Overview, eff: Efficiency) -> Digest:
    """The digest of one run's (one worker's) Overview and rated analysis."""
    h = overview.headline or {}
    n = max(len(overview.steps), 1)
    # A CPU-only run's step rows carry the CPU split (overview/cpu.py): its GPU categories are zero.
    rows = [{"span": r["span"], "wall_us": r["wall_us"], "kernel_us": r["kernel_us"], "flops": r["flops"],
             **{f"{k}_us": r.get(f"{k}_us", 0.0) for k in CATEGORIES}} for r in overview.steps]
    classes = {k: h["breakdown_us"][k] / n / 1000 for k, _ in BUSY if h.get("breakdown_us", {}).get(k)}
    mfu = 100 * h["mfu"] if h.get("mfu") is not None else None
    return Digest(run, worker, order, rows, mfu, h.get("peak_tflops"), classes, _kernels(eff, n))


def _kernels(eff: Efficiency, steps: int) -> Dict[str, Tuple[str, float]]:
    acts = eff.activities
    if not len(acts):
        return {}
    time = np.bincount(acts["name"], weights=acts["dur"], minlength=len(acts.strings["name"]))
    names, kinds = acts.strings["name"], acts.strings["kind"]
    kind_of = dict(zip(acts["name"].tolist(), acts["kind"].tolist()))
    out: Dict[str, Tuple[str, float]] = {}
    for code in np.argsort(-time, kind="stable")[:KERNELS_KEPT].tolist():
        if time[code] <= 0:
            break
        key = normalize(names[code])
        cls = kernel_class(names[code], kinds[kind_of[code]], None)
        prev = out.get(key, (cls, 0.0))
        out[key] = (prev[0], prev[1] + float(time[code]) / steps / 1000)
    return out


def metric_values(d: Digest, metric: str) -> Tuple[List[float], List[str], bool]:
    """(per-step values, their spans, lower is better) of `metric`: step, kernel, mfu or class:NAME (a breakdown
    class of the Overview, e.g. class:gemm)."""
    spans = [r["span"] for r in d.steps]
    if metric == "step":
        return [r["wall_us"] / 1000 for r in d.steps], spans, True
    if metric == "kernel":
        return [r["kernel_us"] / 1000 for r in d.steps], spans, True
    if metric == "mfu":
        if not d.peak_tflops:
            return [], [], False
        rows = [r for r in d.steps if r["wall_us"] > 0]
        return ([100 * r["flops"] / (r["wall_us"] * 1e-6) / (d.peak_tflops * 1e12) for r in rows],
                [r["span"] for r in rows], False)
    name = check_metric(metric)[len("class:"):]
    return [r[f"{name}_us"] / 1000 for r in d.steps], spans, True


def check_metric(metric: str) -> str:
    """`metric` if the trend knows it, else ValueError naming the choices."""
    if metric in METRICS or (metric.startswith("class:") and metric[len("class:"):] in CATEGORIES):
        return metric
    raise ValueError(f"unknown metric {metric!r}: use step, kernel, mfu or class:NAME with NAME one of "
                     f"{', '.join(CATEGORIES)}")


def trend(digests: Sequence[Digest], metric: str = "step", pct: float = 5.0) -> Dict[str, Any]:
    """Every run in order (`Digest.order`), marked against the runs before it (module doc)."""
    check_metric(metric)
    ordered = sorted(digests, key=lambda d: (d.order is None, d.order if d.order is not None else 0, d.run))
    segment: List[Tuple[Digest, Sample]] = []
    out = []
    for d in ordered:
        values, spans, lower = metric_values(d, metric)
        s = sample(values, spans)
        entry = _entry(d, s)
        if not segment:
            entry.update(change="none", why="the first run: nothing before it to compare with")
            if s.median is not None:
                segment = [(d, s)]
        else:
            ref = pooled([x for _, x in segment])
            c = compare_samples(ref, s, lower)
            verdict = c.verdict(pct)
            names = [x.run for x, _ in segment]
            entry.update(change=verdict if verdict in ("regression", "improvement") else "none",
                         why=_why(c, verdict, names, pct), against=names,
                         change_pct=c.worse_pct, noise_band=c.band)
            if verdict in ("regression", "improvement"):
                entry["top"] = _behind(d, [x for x, _ in segment])
                segment = [(d, s)]
            elif verdict == "none":
                segment.append((d, s))
        out.append(entry)
    return {"metric": metric, "threshold": pct, "rule": RULE + "; " + SEQUENTIAL, "runs": out}


SEQUENTIAL = ("each run against the pooled steps of the runs since the last marked change; a regression or "
              "improvement starts a new segment")


def _entry(d: Digest, s: Sample) -> Dict[str, Any]:
    steps, _, _ = metric_values(d, "step")
    st = sample(steps, [r["span"] for r in d.steps])
    return {"run": d.run, "worker": d.worker, "order": d.order, "steps": len(d.steps), "kept": st.kept,
            "step_ms": st.median, "band_ms": st.band, "mfu": d.mfu, "classes": d.classes,
            "value": s.median, "value_band": s.band, "left_out": len(s.warmup) + len(s.outliers), "top": []}


def _why(c, verdict: str, against: List[str], pct: float) -> str:
    ref = against[0] if len(against) == 1 else f"{len(against)} runs ({against[0]} .. {against[-1]})"
    if verdict == "undecided":
        return f"cannot judge against {ref}: {c.why_undecided()}"
    figures = (f"median {c.a.median:,.4g} -> {c.b.median:,.4g} ({c.worse_pct:+.1f}% worse; noise band "
               f"{'unknown' if c.band is None else f'{c.band:,.3g}'}; threshold {pct:g}%)")
    if verdict == "regression":
        return f"worse than {ref} beyond the noise and the threshold: {figures}"
    if verdict == "improvement":
        return f"better than {ref} beyond the noise and the threshold: {figures}"
    return f"within the noise or the threshold of {ref}: {figures}"


def _behind(d: Digest, before: List[Digest]) -> List[Dict[str, Any]]:
    """The kernels whose ms per step moved most from the segment's mean to this run, with their share of the
    change of all the kernel time kept."""
    names = set(d.kernels).union(*(b.kernels for b in before))
    rows = []
    for name in names:
        a = sum(b.kernels.get(name, ("", 0.0))[1] for b in before) / len(before)
        b = d.kernels.get(name, ("", 0.0))[1]
        cls = (d.kernels.get(name) or next(x.kernels[name] for x in before if name in x.kernels))[0]
        rows.append({"kernel": name, "class": cls, "a_ms": a, "b_ms": b, "delta_ms": b - a})
    total = sum(r["delta_ms"] for r in rows)
    for r in rows:
        r["share_of_change"] = r["delta_ms"] / total if total else None
    rows.sort(key=lambda r: (-abs(r["delta_ms"]), r["kernel"]))
    return [r for r in rows if r["delta_ms"]][:TOP]


def recording_order(stamps: Sequence[Optional[int]], mtimes_ns: Sequence[int]) -> int:
    """A run's recording time in ns: its earliest span stamp (ms, us or ns since the epoch, as the trace handlers
    write them), else its earliest file time."""
    known = [_ns(s) for s in stamps if s is not None]
    return min(known) if known else min(mtimes_ns, default=0)


def _ns(stamp: int) -> int:
    while stamp < 10 ** 17:  # seconds, ms or us since the epoch -> ns
        stamp *= 1000
    return stamp


__all__ = ["Digest", "digest", "trend", "check_metric", "metric_values", "recording_order", "METRICS"]
