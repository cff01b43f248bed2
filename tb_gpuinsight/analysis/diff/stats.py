"""The comparison statistics: one rule, used by the regression gate, the report's baseline section, the Diff tab
and the trends over runs.

A side's sample is the per-step values of a metric (step time, GPU kernel time per step, MFU) over its steps.

1. Warm-up: the first step of every span that recorded more than one step is reported and left out: the first
   profiled step carries the profiler's start-up and the caches' and allocator's warm-up.
2. Hiccups: of the other steps, one farther from their median than `OUTLIER_Z` robust standard deviations is an
   outlier (Iglewicz and Hoaglin's modified z-score > 3.5), reported and left out: a data-loader stall, a
   checkpoint, a profiler flush. The robust standard deviation is 1.4826 x the median absolute deviation (MAD; it
   equals the standard deviation on normal data and one slow step barely moves it). For this test only it is never
   taken below `SIGMA_FLOOR` (5 %) of the median: steps bunched tighter than usual make no outlier of an ordinary
   step; a step within 17.5 % of the median never is one.
3. The kept steps give the median (the figure compared), the step-to-step noise band of the run: `BAND_SIGMAS`
   (2) robust standard deviations (about 95 % of normal step-to-step variation), and the standard error of the
   median: sqrt(pi / 2) x sigma / sqrt(kept steps) (the large-sample error of a median of normal data).
4. Two samples compare their medians: the change in the worse direction (B - A for times, A - B for MFU) and its
   share of A's median. The noise band of the change is 2 standard errors of the difference of the two medians,
   2 x sqrt(se_A^2 + se_B^2) (about a 95 % interval): a change inside it could be step-to-step chance. It shrinks
   with more steps, so the threshold is what says how much change matters. A verdict needs `MIN_STEPS` kept steps
   on each side, else it is `undecided`. At a threshold of p %, B is a `regression` when the change is worse by
   more than p % of A's median and beyond the noise band, an `improvement` when better by as much, else `none`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

MIN_STEPS = 5
OUTLIER_Z = 3.5
MAD_TO_SIGMA = 1.4826
SIGMA_FLOOR = 0.05
BAND_SIGMAS = 2.0
SE_OF_MEDIAN = math.sqrt(math.pi / 2)  # 1.2533: the median's standard error over the mean's, normal data
VERDICTS = ("regression", "improvement", "none", "undecided")
RULE = (f"medians of the kept steps (the first step of each span and outliers beyond {OUTLIER_Z:g} robust "
        f"sigma left out; sigma = {MAD_TO_SIGMA} x MAD); noise band of a change = 2 standard errors of the "
        f"difference of the medians (se = 1.2533 sigma / sqrt(steps)); at least {MIN_STEPS} kept steps per side")


@dataclass(frozen=True)
class Sample:
    """The per-step values of one side and what the rule made of them (indices into `values`)."""
    values: Tuple[float, ...]
    warmup: Tuple[int, ...]
    outliers: Tuple[int, ...]
    median: Optional[float]
    sigma: Optional[float]

    @property
    def kept(self) -> int:
        return len(self.values) - len(self.warmup) - len(self.outliers)

    @property
    def band(self) -> Optional[float]:
        """The noise band: BAND_SIGMAS robust standard deviations of the kept steps (None with fewer than 2)."""
        return None if self.sigma is None or self.kept < 2 else BAND_SIGMAS * self.sigma

    @property
    def se(self) -> Optional[float]:
        """The standard error of the median of the kept steps (None with fewer than 2)."""
        return None if self.sigma is None or self.kept < 2 else SE_OF_MEDIAN * self.sigma / math.sqrt(self.kept)

    def to_dict(self) -> Dict[str, Any]:
        return {"steps": len(self.values), "kept": self.kept, "median": self.median, "band": self.band,
                "se": self.se,
                "warmup": [{"index": i, "value": self.values[i]} for i in self.warmup],
                "outliers": [{"index": i, "value": self.values[i]} for i in self.outliers]}


def sample(values: Sequence[float], spans: Optional[Sequence[str]] = None) -> Sample:
    """The rule's reading of per-step `values`; `spans` names each step's span (None: one span)."""
    vals = tuple(float(v) for v in values)
    spans = list(spans) if spans is not None else [""] * len(vals)
    warmup = tuple(_first_steps(spans))
    rest = [i for i in range(len(vals)) if i not in set(warmup)]
    outliers: Tuple[int, ...] = ()
    if len(rest) >= 3:  # a median of two says nothing about which one is odd
        med, sigma = _robust([vals[i] for i in rest])
        limit = OUTLIER_Z * max(sigma, SIGMA_FLOOR * abs(med))
        outliers = tuple(i for i in rest if abs(vals[i] - med) > limit)
    kept = [vals[i] for i in rest if i not in set(outliers)]
    if not kept:
        return Sample(vals, warmup, outliers, None, None)
    med, sigma = _robust(kept)
    return Sample(vals, warmup, outliers, med, sigma)


def _first_steps(spans: List[str]) -> List[int]:
    """The index of the first step of every span that has more than one step."""
    firsts: Dict[str, int] = {}
    counts: Dict[str, int] = {}
    for i, s in enumerate(spans):
        firsts.setdefault(s, i)
        counts[s] = counts.get(s, 0) + 1
    return sorted(i for s, i in firsts.items() if counts[s] > 1)


def _robust(values: Sequence[float]) -> Tuple[float, float]:
    """Median and robust standard deviation (1.4826 x MAD)."""
    med = statistics.median(values)
    return med, MAD_TO_SIGMA * statistics.median(abs(v - med) for v in values)


@dataclass(frozen=True)
class Comparison:
    """Sample A (before) against sample B (after). `lower_is_better`: times (True) or MFU (False)."""
    a: Sample
    b: Sample
    lower_is_better: bool = True

    @property
    def judgeable(self) -> bool:
        return self.a.kept >= MIN_STEPS and self.b.kept >= MIN_STEPS

    @property
    def worse(self) -> Optional[float]:
        """B's change of the median in the worse direction (negative: B is better)."""
        if self.a.median is None or self.b.median is None:
            return None
        delta = self.b.median - self.a.median
        return delta if self.lower_is_better else -delta

    @property
    def worse_pct(self) -> Optional[float]:
        worse = self.worse
        return None if worse is None or not self.a.median or self.a.median <= 0 else 100 * worse / self.a.median

    @property
    def band(self) -> Optional[float]:
        """The noise band of the change: 2 standard errors of the difference of the medians."""
        if self.a.se is None or self.b.se is None:
            return None
        return 2 * math.sqrt(self.a.se ** 2 + self.b.se ** 2)

    @property
    def beyond_noise(self) -> Optional[bool]:
        if self.worse is None or self.band is None:
            return None
        return abs(self.worse) > self.band

    def verdict(self, pct: float) -> str:
        """`regression`, `improvement`, `none` or `undecided` at a threshold of `pct` % (module doc)."""
        if not self.judgeable or self.worse_pct is None:
            return "undecided"
        if self.beyond_noise and abs(self.worse_pct) > pct:
            return "regression" if self.worse > 0 else "improvement"
        return "none"

    def why_undecided(self) -> str:
        if self.worse_pct is None:
            return "a side has no value to compare"
        return (f"too few steps: {self.a.kept} and {self.b.kept} kept (at least {MIN_STEPS} per side "
                "needed, after the first step of each span and outliers); record more steps (active=8 or more)")

    def to_dict(self, pct: Optional[float] = None) -> Dict[str, Any]:
        out = {"a": self.a.to_dict(), "b": self.b.to_dict(), "worse": self.worse, "change_pct": self.worse_pct,
               "band": self.band, "beyond_noise": self.beyond_noise, "judgeable": self.judgeable, "rule": RULE}
        if pct is not None:
            out.update(threshold=pct, verdict=self.verdict(pct))
        return out


def compare_samples(a: Sample, b: Sample, lower_is_better: bool = True) -> Comparison:
    """A against B under the rule (module doc)."""
    return Comparison(a, b, lower_is_better)


def pooled(samples: Sequence[Sample]) -> Sample:
    """Several runs' kept steps as one sample (their warm-up and outliers stay out; none are flagged again)."""
    kept: List[float] = []
    for s in samples:
        drop = set(s.warmup) | set(s.outliers)
        kept.extend(v for i, v in enumerate(s.values) if i not in drop)
    if not kept:
        return Sample((), (), (), None, None)
    med, sigma = _robust(kept)
    return Sample(tuple(kept), (), (), med, sigma)


def threshold(value: Any, name: str = "threshold") -> float:
    """`value` as a finite positive percentage, or ValueError with a one-line reason."""
    try:
        pct = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number (a percentage), not {value!r}") from None
    if not math.isfinite(pct) or pct <= 0:
        raise ValueError(f"{name} must be a finite percentage > 0, not {value!r}")
    return pct


__all__ = ["Sample", "Comparison", "sample", "compare_samples", "pooled", "threshold", "MIN_STEPS", "RULE",
           "VERDICTS"]
