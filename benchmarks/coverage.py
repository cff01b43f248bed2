"""Estimate coverage over a folder of traces: per trace and device, the FLOP coverage (FLOPs known for % of compute
kernel time, analysis/kernels/coverage.py), the share of kernel time with a byte estimate, the datasheet row matched, the time-weighted efficiency, and where the shapes behind
the kernel time came from (rec = recorded by the profiler, ET = an Execution Trace's linked nodes, ET+v = recorded
dims with the ET's Concrete Inputs, ET+p = the ET's shapes propagated to other iterations, cap = a graph's capture,
inf = inferred convolution parameters, none = no shapes or no op) with the companion Execution Trace used
(discovered as `analyze` does: the span's own, then the folder's).

    python benchmarks/coverage.py [FOLDER]              (default: ../shared/traces)
    python benchmarks/coverage.py --reasons [FOLDER]    why the rest has no rating: % of kernel time per reason code
    python benchmarks/coverage.py --families [FOLDER]   FLOPs known for % of compute kernel time (communication,
                                                        copies and fills aside) and the kernel families without FLOPs, with reasons
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import tb_gpuinsight
from tb_gpuinsight.analysis.enrich import shape_sources
from tb_gpuinsight.analysis.kernels.reasons import REASONS
from tb_gpuinsight.errors import GpuInsightError

ROOT = Path(__file__).resolve().parent.parent
_SHORT = {"recorded": "rec", "ET shapes": "ET", "inferred": "inf", "recorded + ET values": "ET+v",
          "ET shapes, propagated": "ET+p", "graph capture": "cap"}


def main() -> None:
    args = sys.argv[1:]
    reasons, families = "--reasons" in args, "--families" in args
    args = [a for a in args if a not in ("--reasons", "--families")]
    folder = Path(args[0]) if args else Path(os.environ.get("TB_GPUINSIGHT_CORPUS", ROOT.parent / "shared" / "traces"))
    if not folder.is_dir():
        sys.exit(f"coverage: no trace folder at {folder} (give one, or set TB_GPUINSIGHT_CORPUS)")
    if families:
        print(f"{'trace':<44}{'dev':>4}{'compute':>9}{'FLOPs':>8}  kernel families without FLOPs (% of compute time)")
    elif reasons:
        print(f"{'trace':<44}{'dev':>4}{'rated':>7}" + "".join(f"{code[:9]:>10}" for code in REASONS))
    else:
        print(f"{'trace':<58}{'dev':>4}  {'datasheet row':<30}{'kernels':>8}{'FLOPs':>8}{'bytes':>8}{'eff.':>7}  "
              f"{'shapes (kernel time)':<28}ET used")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if tb_gpuinsight.sniff(path).kind != "kineto":
            continue
        name = str(path.relative_to(folder))[:57]
        try:
            result = tb_gpuinsight.analyze(tb_gpuinsight.load(path))
        except GpuInsightError as exc:
            print(f"{name:<58}  error: {exc}")
            continue
        devices = [d for d in result.summary() if d["summary"]["kernel_count"]]
        if not devices:
            print(f"{name:<58}     (no GPU kernels)")
        if reasons or families:
            for d in devices:
                print(_family_row(name[:43], d) if families else _reason_row(name[:43], d))
            continue
        sources = _sources(result)
        for d in devices:
            s = d["summary"]
            row = (d["spec"] or {}).get("name") or "unknown"
            print(f"{name:<58}{d['id']:>4}  {row[:29]:<30}{s['kernel_count']:>8}{_pct(s['compute_flop_share']):>8}"
                  f"{_pct(s['byte_time_share']):>8}{_pct(s['efficiency']):>7}  {sources}")


def _sources(result) -> str:
    info = shape_sources(result.trace, result.activities)
    shares = info["kernel_time_share"]
    none = shares.get("no shapes", 0) + shares.get("no op", 0)
    parts = [f"{_SHORT[k]} {100 * v:.0f}%" for k, v in shares.items() if k in _SHORT and v >= 0.005]
    if none >= 0.005:
        parts.append(f"none {100 * none:.0f}%")
    used = [os.path.basename(e["path"]) for e in info["execution_traces"] if e["used"]]
    return f"{', '.join(parts):<28}{used[0][:40] if used else '-'}"


def _reason_row(name: str, device) -> str:
    """One device's kernel time by reason code (blank where 0), and the share rated."""
    shares = {r["code"]: r["time_share"] for r in device["summary"]["reasons"]}
    rated = max(0.0, 1.0 - sum(shares.values()))
    cells = "".join(f"{100 * shares[c]:>10.1f}" if shares.get(c) else f"{'':>10}" for c in REASONS)
    return f"{name:<44}{device['id']:>4}{100 * rated:>7.1f}{cells}"


def _family_row(name: str, device) -> str:
    """FLOP coverage of compute time and the unrated families, largest first."""
    s = device["summary"]
    rest = "; ".join(f"{r['family']} {_pct(r['time_share'])} ({r['code'] or '?'})" for r in s["unrated_families"])
    return f"{name:<44}{device['id']:>4}{s['compute_time_us'] / 1e3:>7.1f}ms{_pct(s['compute_flop_share']):>8}  {rest}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


if __name__ == "__main__":
    main()
