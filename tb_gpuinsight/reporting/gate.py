"""Is B slower than A beyond the noise? The regression gate of `tb-gpuinsight diff --fail-if-slower` and the
headline comparison of a report with a baseline.

Each metric is read per step from the Overview's step rows (every span of the selection):
- `step`: wall time of the step (ms); higher is slower.
- `kernel`: GPU kernel time in the step (ms); higher is slower.
- `mfu`: estimated FLOPs of the step's kernels / its wall time / the side's datasheet peak of its dominant dtype (%);
  lower is slower.

The noise band is the larger of the two sides' step-to-step spread (max - min of the metric over the steps; 0 for a
single step): a difference of the means inside it could be a step-to-step fluctuation. B is slower "beyond the
noise" when the change in the slower direction exceeds both the band and the threshold (a share of A's mean).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..errors import ConfigError

if TYPE_CHECKING:  # the CLI's parser reads METRICS: no analysis is imported for it
    from ..analysis.overview import Overview

METRICS = ("step", "kernel", "mfu")
LABELS = {"step": "step time", "kernel": "GPU kernel time per step", "mfu": "MFU"}
UNITS = {"step": "ms", "kernel": "ms", "mfu": "%"}


def per_step(overview: Overview, metric: str) -> List[float]:
    """The metric's value for every step of a selection, in its unit (ms, or % for MFU)."""
    rows = overview.steps
    if metric == "step":
        return [r["wall_us"] / 1000 for r in rows]
    if metric == "kernel":
        return [r["kernel_us"] / 1000 for r in rows]
    if metric == "mfu":
        peak = overview.headline.get("peak_tflops") if overview.headline else None
        if not peak:
            return []
        return [100 * r["flops"] / (r["wall_us"] * 1e-6) / (peak * 1e12) for r in rows if r["wall_us"] > 0]
    raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")


@dataclass
class Change:
    """One metric of A against B: means, the change in the slower direction, the noise band and the verdict."""
    metric: str
    a: float
    b: float
    steps_a: int
    steps_b: int
    noise: float
    slower: float  # B's change in the slower direction, in the metric's unit (negative: B is faster)
    slower_pct: Optional[float]  # that change / A's mean, in %

    @property
    def noise_known(self) -> bool:
        """A spread needs two steps on a side: with one step per side the noise is unknown (band 0)."""
        return max(self.steps_a, self.steps_b) > 1

    @property
    def outside_noise(self) -> Optional[bool]:
        return abs(self.slower) > self.noise if self.noise_known else None

    def slower_beyond(self, pct: float) -> bool:
        """B slower by more than `pct` % of A and by more than the noise band."""
        return self.slower_pct is not None and self.slower_pct > pct and self.slower > self.noise

    def to_dict(self) -> Dict[str, Any]:
        return {"metric": self.metric, "label": LABELS[self.metric], "unit": UNITS[self.metric], "a": self.a,
                "b": self.b, "steps_a": self.steps_a, "steps_b": self.steps_b, "noise": self.noise if self.noise_known else None,
                "slower": self.slower, "slower_pct": self.slower_pct, "outside_noise": self.outside_noise,
                "source": "per-step values of the Overview's step rows; noise band = the larger side's "
                          "step-to-step spread (max - min)"}


def compare(a: Overview, b: Overview, metric: str) -> Optional[Change]:
    """The change of `metric` from A to B, or None when either side lacks it (no steps, no GPU, no FLOPs)."""
    va, vb = per_step(a, metric), per_step(b, metric)
    if not va or not vb:
        return None
    mean_a, mean_b = sum(va) / len(va), sum(vb) / len(vb)
    if metric == "kernel" and (mean_a <= 0 or mean_b <= 0):
        return None
    slower = mean_a - mean_b if metric == "mfu" else mean_b - mean_a
    noise = max(max(va) - min(va), max(vb) - min(vb))
    return Change(metric, mean_a, mean_b, len(va), len(vb), noise, slower,
                  100 * slower / mean_a if mean_a > 0 else None)


@dataclass
class Verdict:
    """The gate's answer: failed or not, and the one line that says why."""
    failed: bool
    line: str
    change: Change


def gate(a: Overview, b: Overview, metric: str, pct: float, names=("A", "B")) -> Verdict:
    """Fail when B is slower than A by more than `pct` % and by more than the noise band. Raises ConfigError
    when the metric cannot be read on a side (with what to do instead)."""
    if pct < 0:
        raise ConfigError("--fail-if-slower must be a percentage >= 0")
    change = compare(a, b, metric)
    if change is None:
        raise ConfigError(f"the {LABELS[metric]} is not known on both sides ({_why_missing(a, b, metric)})")
    unit = UNITS[metric]
    band = f"noise band {_fmt(change.noise)} {unit}" if change.noise_known else "noise unknown (one step per side)"
    figures = (f"{LABELS[metric]} {_fmt(change.a)} -> {_fmt(change.b)} {unit} "
               f"({_signed(change.slower_pct)} slower, {band}, "
               f"{change.steps_a} vs {change.steps_b} steps)")
    if change.slower_beyond(pct):
        return Verdict(True, f"FAIL: {names[1]} is slower than {names[0]}: {figures}; threshold {pct:g}%", change)
    reason = ("within the noise band" if change.slower > 0 and change.slower <= change.noise else
              f"not beyond {pct:g}%" if change.slower > 0 else "not slower")
    return Verdict(False, f"pass: {reason}: {figures}", change)


def _why_missing(a: Overview, b: Overview, metric: str) -> str:
    if not a.steps or not b.steps:
        return "a side has no steps: " + "; ".join(a.missing + b.missing or ["no ProfilerStep annotations"])
    if metric == "kernel":
        return "no GPU kernel ran on a side (a CPU-only trace): use --metric step"
    return "no FLOP estimate or datasheet peak on a side: use --metric step or kernel"


def _fmt(x: float) -> str:
    return f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.1f}"


def _signed(pct: Optional[float]) -> str:
    return "?%" if pct is None else f"{pct:+.1f}%"
