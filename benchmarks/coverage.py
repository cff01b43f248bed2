"""Estimate coverage over a folder of traces: per trace and device, the share of kernel time with a FLOP estimate
and with a byte estimate, the datasheet row matched, and the time-weighted efficiency.

    python benchmarks/coverage.py [FOLDER]     (default: ../shared/traces)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import tb_gpuinsight
from tb_gpuinsight.errors import GpuInsightError

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(os.environ.get("TB_GPUINSIGHT_CORPUS",
                                                                             ROOT.parent / "shared" / "traces"))
    print(f"{'trace':<58}{'dev':>4}  {'datasheet row':<30}{'kernels':>8}{'FLOPs':>8}{'bytes':>8}{'eff.':>7}")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if tb_gpuinsight.sniff(path).kind != "kineto":
            continue
        name = str(path.relative_to(folder))[:57]
        try:
            result = tb_gpuinsight.analyze(path)
        except GpuInsightError as exc:
            print(f"{name:<58}  error: {exc}")
            continue
        devices = [d for d in result.summary() if d["summary"]["kernel_count"]]
        if not devices:
            print(f"{name:<58}     (no GPU kernels)")
        for d in devices:
            s = d["summary"]
            row = (d["spec"] or {}).get("name") or "unknown"
            print(f"{name:<58}{d['id']:>4}  {row[:29]:<30}{s['kernel_count']:>8}{_pct(s['flop_time_share']):>8}"
                  f"{_pct(s['byte_time_share']):>8}{_pct(s['efficiency']):>7}")


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


if __name__ == "__main__":
    main()
