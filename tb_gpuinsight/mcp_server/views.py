"""The MCP tools over the other views: diff with the regression gate's verdict, ranks, critical path, memory peak,
the report and a timeline window. As in `tools.py`: the plugin's routes answer, this module shapes."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..analysis.kernels.names import display_name
from ..errors import GpuInsightError
from .desk import Desk, ToolProblem, check_text
from .tools import MAX_LIMIT, _ms, _pct, _selection, _short, bounded, page

MAX_LANES = 512  # the timeline route's cap per query

METRICS = ("step", "kernel", "mfu")


def diff_runs(desk: Desk, run_a: str, run_b: str, worker_a: Optional[str] = None, span_a: Optional[str] = None,
              worker_b: Optional[str] = None, span_b: Optional[str] = None, by: str = "kernel",
              metric: str = "step", threshold_pct: float = 5.0, limit: int = 10) -> Dict[str, Any]:
    if by not in ("kernel", "op"):
        raise ToolProblem("argument 'by' must be 'kernel' or 'op'")
    if metric not in METRICS:
        raise ToolProblem(f"argument 'metric' must be one of {', '.join(METRICS)}")
    if isinstance(threshold_pct, bool) or not isinstance(threshold_pct, (int, float)) or \
            not 0 <= threshold_pct <= 1000:
        raise ToolProblem("argument 'threshold_pct' must be a number from 0 to 1000")
    bounded("limit", limit, 1, MAX_LIMIT)
    a, b = desk.selection(run_a, worker_a, span_a), desk.selection(run_b, worker_b, span_b)
    args = {f"{p}_{k}": v for p, sel in (("a", a), ("b", b)) for k, v in zip(("run", "worker", "span"), sel)}
    result = desk.get("/diff", **args, by=by, sort="impact", limit=limit)
    return {"a": _selection(*a), "b": _selection(*b),
            "verdict": _verdict(desk, a, b, metric, float(threshold_pct)),
            "summary": result["summary"], "classes": result["classes"],
            "changes": {"total": result["total"], "rows": [_change(r) for r in result["rows"]]},
            "units": {"time_ms_a / time_ms_b / delta_ms": "ms per span (average over each side's spans)",
                      "delta_pct": "% of A", "summary time_us_* / delta_us": "us per span"},
            "source": "Diff tab (kernels matched by normalized name or by op and shapes; noise from the spans' "
                      "spread); verdict: the regression gate of `tb-gpuinsight diff --fail-if-slower`"}


def _verdict(desk: Desk, a, b, metric: str, pct: float) -> Dict[str, Any]:
    """The gate's answer on the sides' per-step metrics, with every metric's change and noise band."""
    from ..reporting.gate import compare, gate
    from ..routes.report import side

    sides = [desk.direct(side, desk.plugin, *sel) for sel in (a, b)]
    changes = [c.to_dict() for c in (compare(sides[0].overview, sides[1].overview, m) for m in METRICS) if c]
    try:
        verdict = gate(sides[0].overview, sides[1].overview, metric, pct, names=("A", "B"))
    except GpuInsightError as exc:
        return {"failed": None, "line": str(exc), "metric": metric, "threshold_pct": pct, "metrics": changes}
    return {"failed": verdict.failed, "line": verdict.line, "metric": metric, "threshold_pct": pct,
            "metrics": changes}


def _change(r: Dict[str, Any]) -> Dict[str, Any]:
    return {"kernel": r.get("display_name") or r["name"], "class": r.get("class"), "status": r["status"],
            "time_ms_a": _ms(r.get("time_us_a")), "time_ms_b": _ms(r.get("time_us_b")),
            "delta_ms": _ms(r.get("delta_us")), "delta_pct": r.get("delta_pct"),
            "within_noise": r.get("within_noise"), "efficiency_pct_a": _pct(r.get("efficiency_a")),
            "efficiency_pct_b": _pct(r.get("efficiency_b"))}


def ranks(desk: Desk, run: str, limit: int = 8) -> Dict[str, Any]:
    bounded("limit", limit, 1, MAX_LIMIT)
    desk.run(run)
    out = desk.get_settled("/ranks", run=run, instance_limit=0)
    by_step = sorted(out["ranks"], key=lambda r: (-(r.get("step_us") or 0), r["rank"]))
    return {"run": run, "world_size": out["world_size"], "rank_count": out["rank_count"],
            "stragglers": out["stragglers"][:limit],
            "ranks_by_step_time": page([_rank_row(r) for r in by_step], 0, limit),
            "collectives": page(sorted(out["collectives"], key=lambda c: -(c.get("total_time_per_rank_us") or 0)),
                                0, limit),
            "interconnect": out["interconnect"], "problems": out["problems"][:10], "pending": out["pending"],
            **({"note": f"{out['pending']} rank(s) still being analysed: call again for every rank"}
               if out["pending"] else {}),
            "units": {"*_ms": "ms per step", "collectives *_us": "us", "*_gbps": "GB/s",
                      "pct_link": "fraction of the interconnect"},
            "source": "Distributed view: ranks aligned on their collectives; a straggler is the rank the others "
                      "waited for (evidence says how much)"}


def _rank_row(r: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("step", "compute", "comm_exposed", "comm_overlapped", "memcpy", "idle", "idle_host_bound",
            "idle_launch_bound", "idle_sync", "idle_data_loading", "idle_other", "comm_wait")
    return {"rank": r["rank"], "worker": r["worker"], "steps": r.get("steps"),
            **{f"{k}_ms": _ms(r.get(f"{k}_us")) for k in keys}, "arrived_last": r.get("arrived_last")}


def critical_path(desk: Desk, run: str, worker: Optional[str] = None, span: Optional[str] = None,
                  step: Optional[str] = None, limit: int = 10) -> Dict[str, Any]:
    bounded("limit", limit, 1, MAX_LIMIT)
    check_text("step", step or "")
    run, worker, span = desk.selection(run, worker, span)
    out = desk.get("/critical_path", run=run, worker=worker, span=span, step=step or None, limit=100_000)
    if not out["available"]:
        return {"selection": _selection(run, worker, span), "available": False, "reason": out["reason"]}
    longest = sorted(out["segments"], key=lambda s: (-s["dur_us"], s["index"]))[:limit]
    return {"selection": _selection(run, worker, span), "available": True, "has_execution_trace": out["has_et"],
            "steps": [{"step": s["step"], "span": s["span"], "wall_ms": _ms(s["wall_us"]),
                       "path_ms": _ms(s["path_us"]), "by_cause_ms": {k: _ms(v) for k, v in s["causes"].items()}}
                      for s in out["steps"][:MAX_LIMIT]],
            "totals_ms": {k: _ms(v) for k, v in out["totals"].items()},
            "longest_segments": [{"step": s["step"], "cause": s["cause"], "kind": s["kind"], "name": s["name"],
                                  "start_us": s["start_us"], "dur_us": s["dur_us"],
                                  "share_of_step_pct": _pct(s["share"]), "thread": s.get("thread"),
                                  "stream": s.get("stream")} for s in longest],
            "segment_count": out["segment_count"],
            "units": {"*_ms": "ms", "start_us": "us from the step's start", "dur_us": "us"},
            "source": "critical path over the CPU + GPU dependency graph (launch, stream order, waits, syncs, "
                      "collectives); causes: " + ", ".join(out["causes"])}


def memory_peak(desk: Desk, run: str, worker: Optional[str] = None, span: Optional[str] = None) -> Dict[str, Any]:
    run, worker, span = desk.selection(run, worker, span)
    out = desk.get("/memory", run=run, worker=worker, span=span)
    result = {"selection": _selection(run, worker, span), "span": out["span"], "has_memory": out["has_memory"]}
    if not out["has_memory"]:
        return {**result, "message": out.get("message")}
    result["devices"] = [_memory_row(d, out["start_us"]) for d in out["devices"]]
    result["units"] = {"*_bytes": "bytes", "at_us": "us from the span's start", "capacity_gb": "GB (datasheet)"}
    result["source"] = "Memory view: the allocator's [memory] events (profile_memory=True); first span of the selection"
    return result


def _memory_row(d: Dict[str, Any], origin: float) -> Dict[str, Any]:
    peak = d.get("peak") or {}
    rated = d.get("rated_as") or {}
    return {"device": d["device"], "peak_allocated_bytes": peak.get("allocated"),
            "at_us": None if peak.get("ts") is None else peak["ts"] - origin,
            "peak_reserved_bytes": d.get("peak_reserved"), "peak_fragmentation_bytes": d.get("peak_fragmentation"),
            "live_at_peak": {"count": peak.get("live_count"), "bytes": peak.get("live_bytes"),
                             "allocated_before_span_bytes": peak.get("before_span")},
            "never_freed_bytes": d.get("never_freed_bytes"), "allocations": d.get("allocations"),
            "capacity_gb": rated.get("memory_gb"), "datasheet": rated.get("name"),
            "sources": {"allocated": d.get("allocated_source"), "reserved": d.get("reserved_source"),
                        "live": d.get("live_source")}}


def report(desk: Desk, run: str, worker: Optional[str] = None, span: Optional[str] = None, format: str = "md",
           baseline_run: Optional[str] = None, baseline_worker: Optional[str] = None,
           baseline_span: Optional[str] = None) -> Any:
    if format not in ("md", "json"):
        raise ToolProblem("argument 'format' must be 'md' or 'json'")
    run, worker, span = desk.selection(run, worker, span)
    args = dict(run=run, worker=worker, span=span, format=format)
    if baseline_run:
        args.update(zip(("b_run", "b_worker", "b_span"), desk.selection(baseline_run, baseline_worker, baseline_span)))
    return desk.get("/report", **args)


def timeline_window(desk: Desk, run: str, t0_us: float, t1_us: float, worker: Optional[str] = None,
                    span: Optional[str] = None, limit: int = 100, lanes: str = "all") -> Dict[str, Any]:
    if lanes not in ("all", "gpu", "cpu"):
        raise ToolProblem("argument 'lanes' must be 'all', 'gpu' or 'cpu'")
    bounded("limit", limit, 1, 1000)
    for name, value in (("t0_us", t0_us), ("t1_us", t1_us)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ToolProblem(f"argument {name!r} must be a number of microseconds from the span's start")
    if not t0_us < t1_us:
        raise ToolProblem("argument 't0_us' must be below 't1_us'")
    run, worker, span = desk.selection(run, worker, span)
    sel = dict(run=run, worker=worker, span=desk.first_span(run, worker, span))
    meta = desk.get("/timeline/meta", **sel)
    kinds = {lane["id"]: lane["kind"] for lane in meta["lanes"]}
    chosen = [i for i, k in kinds.items() if k != "device" and lanes in ("all", k)][:MAX_LANES]
    view = desk.get("/timeline/view", **sel, t0=t0_us, t1=t1_us, width=meta["max_width"],
                    lanes=",".join(map(str, chosen))) if chosen else {"lanes": [], "px_us": 0.0}
    events = _events(view, meta)
    busy = desk.get("/timeline/range", **sel, t0=t0_us, t1=t1_us)
    return {"selection": sel, "t0_us": t0_us, "t1_us": t1_us, "span_duration_us": meta["duration_us"],
            "events": page(events, 0, limit),
            "busy": [{"lane": lane["label"], "busy_us": lane["busy_us"], "by_class_us": lane["classes"]}
                     for lane in busy["devices"] + busy["lanes"] if lanes == "all" or
                     (lanes == "gpu") == lane["label"].startswith("GPU")],
            "units": {"start_us / t0_us / t1_us": "us from the span's first event", "dur_us / busy_us": "us",
                      "pct_of_roof": "% of the kernel's roof"},
            "note": f"events shorter than {view['px_us']:.3g} us are counted in 'busy' only; longest first "
                    f"when a lane holds more than the view's cap",
            "source": "Timeline tab (the span's stored timeline index)"}


def _events(view: Dict[str, Any], meta: Dict[str, Any]) -> List[Dict[str, Any]]:
    labels = {lane["id"]: lane["label"] for lane in meta["lanes"]}
    names, classes = meta["names"], meta["classes"]
    out = []
    for lane in view["lanes"]:
        ev = lane["events"]
        for i in range(len(ev["start"])):
            eff = ev["eff"][i]
            out.append({"start_us": ev["start"][i], "dur_us": ev["dur"][i], "lane": labels.get(lane["id"]),
                        "name": _short(display_name(names[ev["name"][i]])), "class": classes[ev["cls"][i]],
                        **({"pct_of_roof": 100 * eff} if eff is not None else {})})
    out.sort(key=lambda e: (e["start_us"], e["lane"] or "", e["name"]))
    return out
