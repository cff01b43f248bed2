"""Recommendations across the ranks of a run, from the Distributed view's report (`analysis.ranks.Report`): the
same shape as the per-span rules of `rules.py`, ranked with them by recoverable time per step.

- `straggler`: a rank the others wait for at collectives. Recoverable: what each other rank waited for it per
  step (the waits it caused / the other ranks / the steps): the time a step would lose if it kept up.
- `exposed_comm_ranks`: on the median rank, communication that no compute hides, its wait for late ranks left
  out (that is the straggler's). Recoverable: up to that transfer time per step.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

STRAGGLER_SHARE = 0.02
EXPOSED_SHARE = 0.10
WHY = {
    "straggler": "the others' wait for one rank >= 2 % of the median step: below it, rank-to-rank jitter",
    "exposed_comm_ranks": "communication transfer not hidden under compute >= 10 % of the median rank's step: "
                          "bucket/prefetch tuning typically hides half of it, so less would recover < 5 %",
}


def rank_recommendations(report: Any) -> List[Dict[str, Any]]:
    """The recommendations the ranks of `report` support, most recoverable time first (none for one rank)."""
    ranks = [r for r in report.ranks if r.get("step_us")]
    if len(ranks) < 2:
        return []
    step_us = statistics.median(r["step_us"] for r in ranks)
    steps = max(len(report.step_numbers), 1)
    found = [rec for rec in (_straggler(report, ranks, step_us, steps), _exposed(ranks, step_us)) if rec]
    return sorted(found, key=lambda r: -r["recoverable_us"])


def _straggler(report: Any, ranks: List[Dict[str, Any]], step_us: float, steps: int) -> Optional[Dict[str, Any]]:
    if not report.stragglers:
        return None
    s = report.stragglers[0]
    per_step = s["others_waited_us"] / (len(ranks) - 1) / steps
    if per_step < STRAGGLER_SHARE * step_us:
        return None
    advice = (f"Rank {s['rank']} ({s['worker']}) arrives last at the collectives and the other ranks wait for it. "
              "Look at what it does before them that the others do not (its own data loading, logging or "
              "checkpointing on that rank, an uneven shard or sequence length, a slower or throttled device or "
              "host): balance the work per rank, move rank-0-only work off the step, or overlap it.")
    return _rec("straggler", f"Rank {s['rank']} is a straggler: the other ranks wait for it", per_step, step_us,
                advice, {"rank": s["rank"], "arrived_last": s["arrived_last"], "of_collectives": s["of_instances"],
                         "others_waited_us": s["others_waited_us"], "wait_share": s["share_of_wait"],
                         "wait_per_rank_per_step_us": per_step},
                [{"name": f"rank {s['rank']} ({s['worker']})", "own_wait_per_step_us": s["own_wait_per_step_us"],
                  "median_wait_per_step_us": s["median_wait_per_step_us"]}])


def _exposed(ranks: List[Dict[str, Any]], step_us: float) -> Optional[Dict[str, Any]]:
    exposed = [max((r.get("comm_exposed_us") or 0.0) - (r.get("comm_wait_us") or 0.0), 0.0) for r in ranks]
    transfer = statistics.median(exposed)
    if transfer < EXPOSED_SHARE * step_us:
        return None
    advice = ("Communication runs while no compute does on a typical rank, even without waiting for a late one. "
              "With DDP, tune bucket_cap_mb and gradient_as_bucket_view so all-reduces start during backward; with "
              "FSDP enable backward/forward prefetch; check the interconnect's bus bandwidth in the Distributed view.")
    return _rec("exposed_comm_ranks", "Exposed communication on the median rank", transfer, step_us, advice,
                {"exposed_transfer_us": transfer, "ranks": len(ranks)})


def _rec(rule: str, title: str, per_step: float, step_us: float, advice: str, figures: Dict[str, Any],
         items: List[Dict[str, Any]] = ()) -> Dict[str, Any]:
    return {"id": rule, "title": title, "advice": advice, "threshold": WHY[rule], "span": "all ranks",
            "spans_fired": 1, "recoverable_us": per_step, "recoverable_share": per_step / step_us if step_us else None,
            "figures": figures, "items": list(items), "links": []}


def merged(span_recs: List[Dict[str, Any]], report: Any) -> List[Dict[str, Any]]:
    """A selection's per-span recommendations with the ranks' (the per-span `exposed_comm` supersedes the ranks'
    one), most recoverable time first."""
    ids = {r["id"] for r in span_recs}
    extra = [r for r in rank_recommendations(report) if not (r["id"] == "exposed_comm_ranks" and "exposed_comm" in ids)]
    return sorted(span_recs + extra, key=lambda r: -r["recoverable_us"])


__all__ = ["rank_recommendations", "merged", "STRAGGLER_SHARE", "EXPOSED_SHARE"]
