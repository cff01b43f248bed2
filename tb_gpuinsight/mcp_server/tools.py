"""The MCP tools' answers: each asks the plugin's routes (through `Desk`) and shapes a compact answer for a model's
context: top-N rows with the total and the offset to page on, every figure named with its unit, and where it
comes from. No figure is computed here that the routes or the report do not already give; the tool layer picks,
ranks and renames. Numbers keep 6 significant digits.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional

from .desk import Desk, ToolProblem, check_text

KEY = re.compile(r"^[0-9a-f]{16}$")
MAX_LIMIT = 200
MAX_NAME = 400  # characters of a raw kernel name kept in a row (C++ names reach tens of kilobytes)


def compact(value: Any) -> Any:
    """Floats to 6 significant digits (NaN / infinity as null), recursively."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2 ** 53 else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [compact(v) for v in value]
    return value


def bounded(name: str, value: int, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ToolProblem(f"argument {name!r} must be an integer from {lo} to {hi}")
    return value


def page(rows: List[Any], offset: int, limit: int) -> Dict[str, Any]:
    """A page of rows with what the next call needs."""
    shown = rows[offset: offset + limit]
    nxt = offset + len(shown)
    return {"total": len(rows), "offset": offset, "rows": shown, "next_offset": nxt if nxt < len(rows) else None}


def _ms(us: Optional[float]) -> Optional[float]:
    return None if us is None else us / 1000


def _pct(share: Optional[float]) -> Optional[float]:
    return None if share is None else 100 * share


def _short(name: Optional[str]) -> Optional[str]:
    return name if name is None or len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


# ----------------------------------------------------------------------------------------------- runs

def list_runs(desk: Desk, offset: int = 0, limit: int = 20) -> Dict[str, Any]:
    bounded("offset", offset, 0, 10 ** 7)
    bounded("limit", limit, 1, MAX_LIMIT)
    listing = desk.get("/runs")
    out = page(listing["runs"], offset, limit)
    if listing.get("logdir_error"):
        out["logdir_error"] = listing["logdir_error"]
    out["rows"] = [_run_row(desk, r) for r in out["rows"]]
    out["note"] = ("status 'loading': spans still being analysed (tools wait, then ask to call again); "
                   "devices and steps are given for ready runs (first worker, every span)")
    return out


def _run_row(desk: Desk, run: Dict[str, Any]) -> Dict[str, Any]:
    row = {"run": run["run"], "status": run["status"],
           "workers": [{"worker": w["worker"], "spans": [_span_row(s) for s in w["spans"][:20]],
                        "span_count": len(w["spans"])} for w in run["workers"][:64]],
           "worker_count": len(run["workers"]), "errors": run["errors"][:5]}
    if run["status"] == "ready" and run["workers"]:
        sel = dict(run=run["run"], worker=run["workers"][0]["worker"], span="all")
        try:
            devices = desk.get("/devices", **sel)["devices"]
            row["devices"] = [{"id": d["id"], "trace_name": d["trace_name"],
                               "datasheet": (d.get("spec") or {}).get("name")} for d in devices]
            row["steps"] = (desk.get("/overview", **sel).get("headline") or {}).get("steps", 0)
        except ToolProblem as exc:
            row["facts_error"] = str(exc)
    return row


def _span_row(span: Dict[str, Any]) -> Dict[str, Any]:
    return {k: span[k] for k in ("span", "status", "reason") if k in span}


def overview(desk: Desk, run: str, worker: Optional[str] = None, span: Optional[str] = None, top: int = 5,
             steps_limit: int = 20) -> Dict[str, Any]:
    bounded("top", top, 1, 20)
    bounded("steps_limit", steps_limit, 0, MAX_LIMIT)
    run, worker, span = desk.selection(run, worker, span)
    report = desk.get("/report", run=run, worker=worker, span=span, format="json")
    steps = desk.get("/overview", run=run, worker=worker, span=span).get("steps") or []
    out = {"selection": _selection(run, worker, span)}
    out.update({k: report[k] for k in ("subject", "devices", "step", "utilization") if k in report})
    out["recommendations"] = report.get("recommendations", [])[:top]
    out["steps"] = page([{"step": s["step"], "span": s["span"], "wall_ms": _ms(s["wall_us"]),
                          "kernel_ms": _ms(s["kernel_us"]), "gpu_busy_pct": _pct(s["gpu_busy_pct"])}
                         for s in steps], 0, steps_limit)
    out["notes"] = report.get("notes", [])
    return out


def _selection(run: str, worker: str, span: str) -> Dict[str, str]:
    return {"run": run, "worker": worker, "span": span}


# ----------------------------------------------------------------------------------------------- kernels

KERNEL_UNITS = {"total_ms": "ms, all calls in the selection", "mean_us": "us per call",
                "time_share_pct": "% of the selection's GPU kernel time", "tflops": "TFLOP/s achieved",
                "gbps": "GB/s of DRAM traffic achieved", "efficiency_pct": "% of the roof of the kernel's bound",
                "pct_of_peak_flops": "% of the datasheet peak of its dtype", "pct_of_dram": "% of DRAM bandwidth",
                "intensity": "FLOP per byte", "waste_ms": "ms: time x (1 - efficiency)"}
KERNEL_SOURCE = ("kernel table of the GPU Insight plugin (FLOPs and bytes from the estimate registry, rated "
                 "against the device datasheet row); 'provenance' says which estimates are known and why not")


def top_kernels(desk: Desk, run: str, worker: Optional[str] = None, span: Optional[str] = None, by: str = "time",
                offset: int = 0, limit: int = 10, filter: str = "") -> Dict[str, Any]:
    if by not in ("time", "waste"):
        raise ToolProblem("argument 'by' must be 'time' or 'waste'")
    bounded("offset", offset, 0, 10 ** 7)
    bounded("limit", limit, 1, MAX_LIMIT)
    check_text("filter", filter)
    run, worker, span = desk.selection(run, worker, span)
    sel = dict(run=run, worker=worker, span=span, filter=filter or None, sort="total_us")
    if by == "time":
        table = desk.get("/kernels", **sel, offset=offset, limit=limit)
        rows, total = table["rows"], table["total"]
    else:  # every row, ranked by the report's waste: time x (1 - efficiency) of rated compute kernels
        every = desk.get("/kernels", **sel, limit=5000)["rows"]
        rated = sorted((r for r in every if r.get("efficiency") is not None and r["kind"] == "kernel" and
                        "communication" not in (r.get("kernel_class"), r.get("bound"))),
                       key=lambda r: (-_waste_us(r), r["name"]))
        rows, total = rated[offset: offset + limit], len(rated)
    out = {"selection": _selection(run, worker, span), "by": by, "total": total, "offset": offset,
           "rows": [dict(rank=offset + i, **kernel_row(r)) for i, r in enumerate(rows, 1)],
           "next_offset": offset + len(rows) if offset + len(rows) < total else None,
           "units": KERNEL_UNITS, "source": KERNEL_SOURCE}
    return out


def _waste_us(row: Dict[str, Any]) -> float:
    return row["total_us"] * (1 - row["efficiency"])


def kernel_row(r: Dict[str, Any]) -> Dict[str, Any]:
    """One kernel table row, renamed with its units and its estimates' provenance."""
    return {"kernel": r.get("display_name") or r["name"], "name_key": r["name_key"], "name": _short(r["name"]),
            "class": r.get("kernel_class"), "kind": r["kind"], "device": r["device"],
            **({"op": r["op"]} if r.get("op") else {}), "count": r["count"], "total_ms": _ms(r["total_us"]),
            "mean_us": r["mean_us"], "time_share_pct": _pct(r["time_share"]), "dtype": r.get("dtype"),
            "tflops": r.get("tflops"), "gbps": r.get("gbps"), "intensity": r.get("intensity"),
            "bound": r.get("bound"), "efficiency_pct": _pct(r.get("efficiency")),
            "pct_of_peak_flops": _pct(r.get("pct_peak")), "pct_of_dram": _pct(r.get("pct_dram")),
            "waste_ms": _ms(_waste_us(r)) if r.get("efficiency") is not None else None,
            "provenance": provenance(r)}


def provenance(r: Dict[str, Any]) -> Dict[str, Any]:
    """Where a row's figures come from: estimated FLOPs / bytes (with the note the estimate carries, e.g. taken
    from identical launches), or unknown with the reason; over-roof marks."""
    def known(value, reason):
        if value is None:
            return f"unknown: {reason or 'not estimated'}"
        return f"estimated; {reason}" if reason else "estimated"

    out = {"flops": known(r.get("flops"), r.get("flops_reason")),
           "bytes": known(r.get("bytes"), r.get("bytes_reason")),
           "estimated_time_pct": _pct(r.get("covered_share"))}
    if r.get("reason"):
        out["unrated_reason"] = r["reason"]
    if r.get("over_roof"):
        out["over_roof"] = {"share_pct": _pct(r.get("over_roof_share")), "cause": r.get("roof_cause")}
    return out


def kernel_detail(desk: Desk, run: str, kernel: str, worker: Optional[str] = None, span: Optional[str] = None,
                  occurrences: int = 10) -> Dict[str, Any]:
    bounded("occurrences", occurrences, 0, MAX_LIMIT)
    check_text("kernel", kernel)
    if not kernel:
        raise ToolProblem("argument 'kernel' must be a name_key from top_kernels or a part of a kernel name")
    run, worker, span = desk.selection(run, worker, span)
    sel = dict(run=run, worker=worker, span=span)
    by_key = bool(KEY.match(kernel))
    found = desk.get("/kernels", **sel, sort="total_us", limit=5, **({"name_key": kernel} if by_key else
                                                                       {"filter": kernel}))
    if not found["rows"]:
        raise ToolProblem(f"no kernel {'with name_key' if by_key else 'matching'} {kernel!r} in run {run!r} "
                          f"(worker {worker!r}, span {span!r}); top_kernels lists them")
    row = found["rows"][0]
    out = {"selection": _selection(run, worker, span), "matches": found["total"],
           "kernel": {**kernel_row(row), "name": row["name"][:4000]}, "launch": {"grid": _dims(row.get("grid")),
           "block": _dims(row.get("block")), "registers": row.get("registers"), "occupancy": row.get("occupancy")},
           "roofline": _roofline(desk, sel, row),
           "ops": desk.get("/kernel_ops", **sel, name_key=row["name_key"], device=row["device"])["ops"][:10],
           "timeline": _occurrences(desk, run, worker, desk.first_span(run, worker, span), row, occurrences),
           "units": {**KERNEL_UNITS, "ops.total_us": "us", "ops.flops": "FLOP",
                     "timeline start_us/end_us": "us from the span's first event"}, "source": KERNEL_SOURCE}
    if found["total"] > 1:
        out["other_matches"] = [{"kernel": r.get("display_name"), "name_key": r["name_key"],
                                 "total_ms": _ms(r["total_us"])} for r in found["rows"][1:]]
    return out


def _dims(text: Optional[str]) -> Any:
    """A launch dimension the trace records as JSON text ("[40, 2, 1]") as a list; other text as is."""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _roofline(desk: Desk, sel: Dict[str, str], row: Dict[str, Any]) -> Dict[str, Any]:
    """The kernel against its device's roofs (ridge point of its dtype, peak, DRAM bandwidth)."""
    device = next((d for d in desk.get("/devices", **sel)["devices"] if d["id"] == row["device"]), None)
    spec = (device or {}).get("spec") or {}
    dtype = row.get("dtype")
    return {"device": (device or {}).get("trace_name"), "datasheet": spec.get("name"),
            "peak_tflops": (spec.get("peak_tflops") or {}).get(dtype), "dram_gbps": spec.get("dram_gbps"),
            "ridge_flop_per_byte": ((device or {}).get("ridge_points") or {}).get(dtype),
            "intensity_flop_per_byte": row.get("intensity"), "bound": row.get("bound"),
            "source": spec.get("source"), "rated_how": (device or {}).get("how")}


def _occurrences(desk: Desk, run: str, worker: str, span: str, row: Dict[str, Any], limit: int) -> Dict[str, Any]:
    sel = dict(run=run, worker=worker, span=span)
    lanes = {lane["id"]: lane["label"] for lane in desk.get("/timeline/meta", **sel)["lanes"]}
    found = desk.get("/timeline/find", **sel, name_key=row["name_key"])

    def where(o):
        return {"lane": lanes.get(o["lane"]), "start_us": o["start"], "end_us": o["end"]}

    return {"span": span, "count": found["count"], "first": [where(o) for o in found["occurrences"][:limit]],
            "longest": where(found["longest"]) if found.get("longest") else None}
