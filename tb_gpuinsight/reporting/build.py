"""The report as data: one page, short and ranked, from the analyses the tabs show (Overview headline, breakdown
and recommendations, kernel efficiency, Memory, Distributed, Diff). Nothing is derived here that those analyses
do not already compute; this module picks, ranks and labels.

Every figure is `{"value", "unit", "source"}` and every table `{"columns": [{"key", "label", "unit"}], "rows",
"source"}`, so that a reader (or an agent) knows what each number is and where it comes from. The output is
deterministic: the same inputs give the same report, byte for byte (no clock, no absolute path). The layout is
documented in docs/reference.md ("Report schema") and versioned by `SCHEMA_VERSION`.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

from ..version import __version__
from ..analysis.diff.attribution import attribute
from ..analysis.diff.compare import diff
from ..analysis.kernels import coverage
from ..analysis.kernels.names import name_fields
from ..analysis.overview import KINDS, LABELS
from ..analysis.overview.rank_rules import merged
from ..analysis.overview.rules import SpanData
from ..jsonutil import finite
from .gate import METRICS, compare
from .sides import Side, memory_summaries

SCHEMA_VERSION = 1
TOP_RECOMMENDATIONS = 5
TOP_KERNELS = 8
TOP_COLLECTIVES = 5
TOP_CHANGES = 10


def fig(value: Any, unit: str, source: str) -> Dict[str, Any]:
    """One figure with its unit and where it comes from."""
    return {"value": value, "unit": unit, "source": source}


def table(columns: List[tuple], rows: List[Dict[str, Any]], source: str) -> Dict[str, Any]:
    """A table: `columns` as (key, label, unit) triples."""
    return {"columns": [{"key": k, "label": label, "unit": unit} for k, label, unit in columns], "rows": rows,
            "source": source}


def build_report(side: Side, baseline: Optional[Side] = None, ranks: Any = None) -> Dict[str, Any]:
    """The report of `side` (with `baseline`: what changed from it; with `ranks`, an `analysis.ranks.Report` of
    the run: the Distributed section) as JSON-ready data."""
    ov = side.overview
    report = {"schema_version": SCHEMA_VERSION, "generator": f"tb-gpuinsight {__version__}",
              "subject": _subject(side), "devices": _devices(side)}
    if ov.headline:
        recs = merged(ov.recommendations, ranks) if ranks is not None else ov.recommendations
        report.update(step=_step(ov), utilization=_utilization(ov), recommendations=_recommendations(recs))
    report["waste"] = _waste(side)
    report["memory"] = _memory(side)
    if ranks is not None:
        report["distributed"] = _distributed(ranks)
    if baseline is not None:
        report["comparison"] = _comparison(baseline, side)
    report["notes"] = list(ov.missing)
    return finite(report)


# ----------------------------------------------------------------------------------------------------- parts

def _subject(side: Side) -> Dict[str, Any]:
    ov = side.overview
    return {"label": side.label, "worker": side.worker, "spans": [p.name for p in side.parts],
            "steps": ov.headline.get("steps", 0) if ov.headline else 0, "step_source": ov.source}


def _pct(x: Optional[float]) -> Optional[float]:
    return None if x is None else 100 * x


def _devices(side: Side) -> List[Dict[str, Any]]:
    """Each GPU: the datasheet row it is rated against and how it was matched, and how much of its kernel time
    has a FLOP / byte estimate (the coverage of every rated figure below)."""
    out = []
    for d in side.eff.summary():
        s = d["summary"]
        src = "kernel efficiency analysis (share of kernel time)"
        out.append({"id": d["id"], "trace_name": d["trace_name"], "datasheet": d["spec"]["name"] if d["spec"] else None,
                    "how": d["how"],
                    "kernel_time": fig(s["kernel_time_us"] / 1000, "ms", "sum of kernel durations, all spans"),
                    "flops_known": fig(_pct(s.get(coverage.KEY)), "%", coverage.SOURCE),
                    "bytes_known": fig(_pct(s["byte_time_share"]), "%", src),
                    "efficiency": fig(_pct(s["efficiency"]), "%", "time-weighted efficiency of rated kernels "
                                      "against their roof (compute or DRAM)")})
    return out


def _step(ov) -> Dict[str, Any]:
    h = ov.headline
    st = h["step_time_us"]
    src = f"{h['steps']} step(s) from {ov.source or 'the trace'} (Overview)"
    steps = max(h["steps"], 1)
    wall = h["wall_us"]
    rows = [{"category": k, "label": LABELS[k], "kind": KINDS[k],
             "ms_per_step": v / steps / 1000, "share": 100 * v / wall if wall > 0 else None}
            for k, v in h["breakdown_us"].items() if v > 0]
    cpu_only = "cpu_ops" in h["breakdown_us"]
    rows.sort(key=lambda r: -r["ms_per_step"])
    return {"time": {k: fig(None if st[k] is None else st[k] / 1000, "ms", src)
                     for k in ("mean", "median", "p90", "spread")},
            "split": table([("label", "where the time went", ""), ("ms_per_step", "per step", "ms"),
                            ("share", "share of step time", "%")], rows,
                           "Overview breakdown: CPU ops, collectives, data loading and idle threads (a CPU-only run), "
                           "summing to the wall time" if cpu_only else
                           "Overview breakdown: GPU time by kernel class, GPU idle by cause, summing to the wall time"),
            "comm_overlapped": fig(h["comm_overlapped_us"] / steps / 1000, "ms per step",
                                   "communication kernel time overlapped by compute (Overview)"),
            **_phases(h.get("phases") or {})}


def _phases(phases: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Serving steps by phase, when the steps are a serving engine's (vLLM / SGLang annotations)."""
    if not phases:
        return {}
    rows = [{"phase": name, "steps": p["steps"], "ms": p["wall_us_mean"] / 1000, "busy": _pct(p["gpu_busy_pct"]),
             "batch": p["batch_mean"], "tokens": p["tokens_mean"], "mfu": _pct(p["mfu"])} for name, p in phases.items()]
    return {"phases": table([("phase", "phase", ""), ("steps", "steps", "count"), ("ms", "mean step time", "ms"),
                             ("busy", "GPU busy", "%"), ("batch", "mean batch", "requests"),
                             ("tokens", "mean tokens", "tokens"), ("mfu", "MFU", "%")], rows,
                            "Overview: serving steps (vLLM / SGLang step annotations) by phase")}


def _utilization(ov) -> Dict[str, Any]:
    h = ov.headline
    cover = ("no compute kernel time to estimate FLOPs for" if h[coverage.KEY] is None else
             coverage.label(_fmt_pct(h[coverage.KEY])) + ": a lower bound below 100%")
    peak = (f"datasheet {h['mfu_dtype']} peak {_num(h['peak_tflops'])} TFLOP/s (dominant dtype)" if h["peak_tflops"]
            else "no datasheet peak for this device and dtype, so unknown")
    return {"gpu_busy": fig(_pct(h["gpu_busy_pct"]), "%", "share of step time some GPU activity ran (Overview)"),
            "tflops": fig(h["tflops"], "TFLOP/s", "estimated kernel FLOPs / step wall time; " + cover),
            "mfu": fig(_pct(h["mfu"]), "%", f"achieved TFLOP/s / {peak}; " + cover),
            "flops_known": fig(_pct(h[coverage.KEY]), "%", coverage.SOURCE),
            "tensor_cores": fig(_pct(h["tensor_core_share"]), "%", "share of kernel time on Tensor Cores "
                                "(kernel names, matrix work in a Tensor Core dtype)")}


def _recommendations(recs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for i, rec in enumerate(recs[:TOP_RECOMMENDATIONS], 1):
        out.append({"rank": i, "id": rec["id"], "title": rec["title"], "span": rec["span"],
                    "recoverable": fig(rec["recoverable_us"] / 1000, "ms per step",
                                       "Overview rule estimate (see 'threshold'); 'up to' rules give a bound"),
                    "recoverable_share": fig(_pct(rec["recoverable_share"]), "%", "of the mean step time (the median rank's for rules across ranks)"),
                    "advice": rec["advice"], "threshold": rec["threshold"],
                    "evidence": [_evidence(k, v) for k, v in rec["figures"].items()],
                    "items": [_item(it) for it in rec["items"][:3]]})
    return out


def _evidence(key: str, value: Any) -> Dict[str, Any]:
    """A rule's figure with the unit its key names (`_us` microseconds, `_share` / `_ratio` a fraction)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key.endswith("_us"):
            return {"name": key[:-3], "value": value / 1000, "unit": "ms"}
        if key.endswith(("_share", "_ratio")) or key in ("share", "ratio"):
            return {"name": key, "value": 100 * value, "unit": "%"}
    return {"name": key, "value": value, "unit": "count" if isinstance(value, (int, float)) else ""}


def _item(item: Dict[str, Any]) -> Dict[str, Any]:
    name = item.get("name") or item.get("call") or ""
    return {"name": name, "display_name": name_fields(name)["display_name"] if item.get("name") else name,
            "evidence": [_evidence(k, v) for k, v in item.items() if k not in ("name", "call", "display_name")]}


def _waste(side: Side) -> Dict[str, Any]:
    """Kernels by wasted time per step: time x (1 - efficiency), efficiency as the kernel table rates it
    (time-weighted over rated launches; communication kernels are the Distributed view's)."""
    ov = side.overview
    first = side.parts[0]
    steps = max(len(ov.steps), 1)
    rows = []
    for r in SpanData("all", first.overview, side.eff, ov.steps).kernel_efficiency():
        fields = name_fields(r["name"])
        rows.append({"kernel": fields["display_name"], "name": r["name"],
                     "class": fields["kernel_class"], "ms_per_step": r["total_us"] / steps / 1000,
                     "efficiency": 100 * r["efficiency"],
                     "waste_ms_per_step": r["total_us"] * (1 - r["efficiency"]) / steps / 1000,
                     "bound": r["bound"], "dtype": r["dtype"]})
    rows.sort(key=lambda r: (-r["waste_ms_per_step"], r["name"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return table([("rank", "#", ""), ("kernel", "kernel", ""), ("class", "class", ""),
                  ("ms_per_step", "time", "ms per step"), ("efficiency", "efficiency", "% of roof"),
                  ("waste_ms_per_step", "waste", "ms per step"), ("bound", "bound", ""), ("dtype", "dtype", "")],
                 rows[:TOP_KERNELS], "kernel efficiency analysis: waste = time x (1 - efficiency against the roof of "
                 "the kernel's bound); kernels without a rating are left out")


def _memory(side: Side) -> Dict[str, Any]:
    """The highest allocated peak per device over the spans, with its reserved peak and provenance."""
    best: Dict[str, Dict[str, Any]] = {}
    for s in memory_summaries(side):
        for d in s["devices"]:
            peak = (d.get("peak") or {}).get("allocated")
            if peak is None or (d["device"] in best and best[d["device"]]["peak_allocated"] >= peak):
                continue
            best[d["device"]] = {"device": d["device"], "span": s["span"], "peak_allocated": peak,
                                 "peak_reserved": d.get("peak_reserved"), "never_freed": d.get("never_freed_bytes"),
                                 "source": f"Memory view: {d['allocated_source']}; reserved: {d['reserved_source']}"}
    rows = [best[k] for k in sorted(best)]
    out = table([("device", "device", ""), ("peak_allocated", "peak allocated", "bytes"),
                 ("peak_reserved", "peak reserved", "bytes"), ("never_freed", "never freed in the span", "bytes")],
                rows, "Memory view (allocator [memory] events); the highest peak over the spans")
    if not rows:
        out["note"] = "no memory events: record with profile_memory=True"
    return out


def _distributed(ranks) -> Dict[str, Any]:
    steps = sorted(r["step_us"] for r in ranks.ranks if r.get("step_us") is not None)
    median = statistics.median(steps) / 1000 if steps else None
    src = "Distributed view: ranks' mean step time"
    colls = sorted(ranks.collectives, key=lambda c: (-(c.get("total_time_per_rank_us") or 0), c["kind"]))
    rows = [{"kind": c["kind"], "dtype": c["dtype"], "bytes": c["bytes"], "count": c["count"],
             "ms_per_rank": (c.get("total_time_per_rank_us") or 0) / 1000, "wait_ms": (c.get("wait_us") or 0) / 1000,
             "busbw": c.get("busbw_gbps"), "pct_link": _pct(c.get("pct_link"))} for c in colls[:TOP_COLLECTIVES]]
    straggler = ranks.stragglers[0] if ranks.stragglers else None
    return {"world_size": ranks.world_size, "ranks": len(ranks.ranks), "problems": list(ranks.problems),
            "step_min": fig(steps[0] / 1000 if steps else None, "ms", src),
            "step_median": fig(median, "ms", src),
            "step_max": fig(steps[-1] / 1000 if steps else None, "ms", src),
            "straggler": None if straggler is None else {
                "rank": straggler["rank"], "worker": straggler["worker"], "evidence": straggler["evidence"],
                "others_waited": fig(straggler["others_waited_us"] / 1000, "ms",
                                     "collectives matched across ranks: waiting for the last to arrive")},
            "interconnect": ranks.interconnect,
            "collectives": table([("kind", "collective", ""), ("dtype", "dtype", ""), ("bytes", "size", "bytes"),
                                  ("count", "calls", ""), ("ms_per_rank", "time per rank", "ms"),
                                  ("wait_ms", "waiting", "ms"), ("busbw", "bus bandwidth", "GB/s"),
                                  ("pct_link", "of the interconnect", "%")], rows,
                                 f"Distributed view ({ranks.source}); busbw = algbw x the collective's factor, "
                                 "rated against " + str((ranks.interconnect or {}).get("how") or "no known link"))}


def _comparison(baseline: Side, side: Side) -> Dict[str, Any]:
    """What changed from the baseline: the headline metrics with their noise band, then kernels, the changes
    outside span-to-span noise first."""
    changes = [c for c in (compare(baseline.overview, side.overview, m) for m in METRICS) if c is not None]
    changes.sort(key=lambda c: (not c.outside_noise, METRICS.index(c.metric)))
    result = diff(baseline.eff, side.eff, names=(baseline.label, side.label))
    rows = sorted(result.rows, key=lambda r: (r["within_noise"] is True, -abs(r["delta_us"]), r["name"] or ""))
    kernels = [{"kernel": r["display_name"], "name": r["name"], "class": r["class"], "status": r["status"],
                "a_ms": (r["time_us_a"] or 0) / 1000, "b_ms": (r["time_us_b"] or 0) / 1000,
                "delta_ms": r["delta_us"] / 1000, "delta_pct": _pct(r["delta_pct"]),
                "noise": {True: "within", False: "outside"}.get(r["within_noise"], "unknown")}
               for r in rows[:TOP_CHANGES]]
    s = result.summary
    return {"baseline": baseline.label, "metrics": [c.to_dict() for c in changes],
            "attribution": _attribution(attribute(result, len(baseline.overview.steps), len(side.overview.steps))),
            "gpu_time": {"a": fig(s["time_us_a"] / 1000, "ms per span", "Diff: GPU activity time"),
                         "b": fig(s["time_us_b"] / 1000, "ms per span", "Diff: GPU activity time"),
                         "delta_pct": fig(_pct(s["delta_pct"]), "%", "Diff")},
            "kernels": table([("kernel", "kernel", ""), ("class", "class", ""), ("status", "status", ""),
                              ("a_ms", "baseline", "ms per span"), ("b_ms", "this run", "ms per span"),
                              ("delta_ms", "change", "ms per span"), ("delta_pct", "change", "%"),
                              ("noise", "vs span-to-span noise", "")], kernels,
                             "Diff (normalised kernel names): changes outside the span-to-span spread first, then "
                             "by size; 'unknown' with one span per side")}


def _attribution(att: Dict[str, Any]) -> Dict[str, Any]:
    """What accounts for the change: the kernel classes and the top kernels, time per step before / after and
    their share of the change in GPU time per step."""
    unit = att["unit"]
    cols = [("a_ms", "baseline", unit), ("b_ms", "this run", unit), ("delta_ms", "change", unit),
            ("share_of_change", "share of the change", "%")]

    def rows(entries, keys):
        return [dict({k: e[k] for k in keys}, a_ms=e["a_ms"], b_ms=e["b_ms"], delta_ms=e["delta_ms"],
                     share_of_change=_pct(e["share_of_change"])) for e in entries]

    return {"gpu_time": {"a": fig(att["a_ms"], unit, att["source"]), "b": fig(att["b_ms"], unit, att["source"])},
            "classes": table([("class", "kernel class", "")] + cols, rows(att["classes"], ("class",)), att["source"]),
            "top": table([("kernel", "kernel", ""), ("class", "class", "")] + cols,
                         [dict(r, kernel=r.pop("display_name")) for r in
                          rows(att["top"], ("name", "display_name", "class"))], att["source"])}


def _fmt_pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _num(x: float) -> str:
    return f"{x:,.3g}"
