"""Is B slower than A beyond the noise? The regression gate of `tb-gpuinsight diff --fail-if-slower` and the
headline comparison of a report with a baseline.

Each metric is read per step from the Overview's step rows (every span of the selection):
- `step`: wall time of the step (ms); higher is slower.
- `kernel`: GPU kernel time in the step (ms); higher is slower.
- `mfu`: estimated FLOPs of the step's kernels / its wall time / the side's datasheet peak of its dominant dtype (%);
  lower is slower.

The two sides' step samples are compared by the one rule of `analysis.diff.stats`: medians of the kept steps (the
first step of each span and hiccups left out and reported), a robust noise band, a minimum number of steps. The
gate fails (exit 1) when B is worse by more than the threshold and beyond the noise, cannot judge (exit 3) with too
few steps, and passes (exit 0) otherwise; every line it prints carries the figures the verdict rests on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..analysis.diff.stats import MIN_STEPS, RULE, Comparison, Sample, compare_samples, sample, threshold
from ..errors import ConfigError

if TYPE_CHECKING:  # the CLI's parser reads METRICS: no analysis is imported for it
    from ..analysis.overview import Overview

METRICS = ("step", "kernel", "mfu")
LABELS = {"step": "step time", "kernel": "GPU kernel time per step", "mfu": "MFU"}
UNITS = {"step": "ms", "kernel": "ms", "mfu": "%"}
PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"


def per_step(overview: Overview, metric: str) -> List[float]:
    """The metric's value for every step of a selection, in its unit (ms, or % for MFU)."""
    return [v for v, _ in _values(overview, metric)]


def _values(overview: Overview, metric: str) -> List[Tuple[float, str]]:
    """(value, span) per step."""
    rows = overview.steps
    if metric == "step":
        return [(r["wall_us"] / 1000, r["span"]) for r in rows]
    if metric == "kernel":
        return [(r["kernel_us"] / 1000, r["span"]) for r in rows]
    if metric == "mfu":
        peak = overview.headline.get("peak_tflops") if overview.headline else None
        if not peak:
            return []
        return [(100 * r["flops"] / (r["wall_us"] * 1e-6) / (peak * 1e12), r["span"]) for r in rows
                if r["wall_us"] > 0]
    raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")


def step_sample(overview: Overview, metric: str) -> Sample:
    """The selection's per-step sample of `metric` under the comparison rule."""
    pairs = _values(overview, metric)
    return sample([v for v, _ in pairs], [s for _, s in pairs])


@dataclass
class Change:
    """One metric of A against B: the two samples and their comparison (`analysis.diff.stats`)."""
    metric: str
    comparison: Comparison

    @property
    def a(self) -> Optional[float]:
        return self.comparison.a.median

    @property
    def b(self) -> Optional[float]:
        return self.comparison.b.median

    @property
    def slower(self) -> Optional[float]:
        return self.comparison.worse

    @property
    def slower_pct(self) -> Optional[float]:
        return self.comparison.worse_pct

    @property
    def noise(self) -> Optional[float]:
        return self.comparison.band

    @property
    def outside_noise(self) -> Optional[bool]:
        return self.comparison.beyond_noise

    def to_dict(self) -> Dict[str, Any]:
        c = self.comparison
        return {"metric": self.metric, "label": LABELS[self.metric], "unit": UNITS[self.metric], "a": self.a,
                "b": self.b, "steps_a": len(c.a.values), "steps_b": len(c.b.values), "kept_a": c.a.kept,
                "kept_b": c.b.kept, "noise": self.noise, "slower": self.slower, "slower_pct": self.slower_pct,
                "outside_noise": self.outside_noise, "judgeable": c.judgeable, "stats": c.to_dict(),
                "source": "per-step values of the Overview's step rows; " + RULE}


def compare(a: Overview, b: Overview, metric: str) -> Optional[Change]:
    """The change of `metric` from A to B, or None when either side lacks it (no steps, no GPU, no FLOPs)."""
    sa, sb = step_sample(a, metric), step_sample(b, metric)
    if sa.median is None or sb.median is None:
        return None
    if metric == "kernel" and (sa.median <= 0 or sb.median <= 0):
        return None
    return Change(metric, compare_samples(sa, sb, lower_is_better=metric != "mfu"))


@dataclass
class Verdict:
    """The gate's answer: pass, fail or undecided, the one line that says why, and the change it rests on."""
    status: str
    line: str
    change: Change

    @property
    def failed(self) -> bool:
        return self.status == FAIL


def check_threshold(pct: Any) -> float:
    """`--fail-if-slower`'s value as a finite percentage > 0, or a one-line ConfigError."""
    try:
        return threshold(pct, "--fail-if-slower")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def gate(a: Overview, b: Overview, metric: str, pct: float, names=("A", "B")) -> Verdict:
    """Fail when B is worse than A by more than `pct` % and beyond the noise band; undecided with too few steps.
    Raises ConfigError for a threshold that is not a finite percentage > 0, or when the metric cannot be read on
    a side (with what to do instead)."""
    pct = check_threshold(pct)
    change = compare(a, b, metric)
    if change is None:
        raise ConfigError(f"the {LABELS[metric]} is not known on both sides ({_why_missing(a, b, metric)})")
    c = change.comparison
    figures = _figures(change, names)
    if not c.judgeable:
        return Verdict(UNDECIDED, f"cannot judge: {c.why_undecided()}; {figures}", change)
    verdict = c.verdict(pct)
    if verdict == "regression":
        return Verdict(FAIL, f"FAIL: {names[1]} is slower than {names[0]}: {figures}; threshold {pct:g}%", change)
    reason = {"improvement": f"{names[1]} is faster than {names[0]} beyond the noise and {pct:g}%"}.get(verdict) or (
        "not slower" if c.worse <= 0 else
        "within the noise band" if not c.beyond_noise else f"not beyond {pct:g}%")
    return Verdict(PASS, f"pass: {reason}: {figures}", change)


def _figures(change: Change, names: Tuple[str, str]) -> str:
    """The figures a verdict rests on: both medians, the change, the band and what each side left out."""
    c, unit = change.comparison, UNITS[change.metric]
    band = f"noise band {_fmt(c.band)} {unit}" if c.band is not None else "noise band unknown"
    return (f"median {LABELS[change.metric]} {_fmt(c.a.median)} -> {_fmt(c.b.median)} {unit} "
            f"({_signed(c.worse_pct)} slower, {band}; {_kept(names[0], c.a, unit)}, {_kept(names[1], c.b, unit)})")


def _kept(name: str, s: Sample, unit: str) -> str:
    """"A: 6 of 8 steps kept (first 12.3; hiccup 1,502.1 ms)"."""
    left = [f"first {_fmt(s.values[i])}" for i in s.warmup]
    left += [f"hiccup {_fmt(s.values[i])}" for i in s.outliers]
    out = f"{name}: {s.kept} of {len(s.values)} steps kept"
    return out + (f" (out: {', '.join(left)} {unit})" if left else "")


def _why_missing(a: Overview, b: Overview, metric: str) -> str:
    if not a.steps or not b.steps:
        return "a side has no steps: " + "; ".join(a.missing + b.missing or ["no ProfilerStep annotations"])
    if metric == "kernel":
        return "no GPU kernel ran on a side (a CPU-only trace): use --metric step"
    return "no FLOP estimate or datasheet peak on a side: use --metric step or kernel"


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return "?"
    return f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.1f}"


def _signed(pct: Optional[float]) -> str:
    return "?%" if pct is None else f"{pct:+.1f}%"


__all__ = ["METRICS", "LABELS", "UNITS", "per_step", "step_sample", "compare", "gate", "Change", "Verdict",
           "check_threshold", "MIN_STEPS"]
