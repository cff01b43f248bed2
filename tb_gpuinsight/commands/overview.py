"""`tb-gpuinsight overview TRACE|RUN`: where each step's time goes, headline figures and ranked recommendations.

    tb-gpuinsight overview TRACE                 # headline, per-step breakdown, recommendations
    tb-gpuinsight overview RUN_DIR --worker W    # every span of one worker (default: the first)
    tb-gpuinsight overview TRACE --format json   # everything, as the plugin's /overview route answers
    tb-gpuinsight overview TRACE --format csv    # the per-step rows
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from ..analysis.kernels import coverage
from ..analysis.overview import LABELS, Overview
from .options import model_config_arg, model_config_option
from .text import elide, print_csv


def register(sub) -> None:
    """Add the `overview` subcommand."""
    p = sub.add_parser("overview", help="per-step time breakdown, MFU and ranked recommendations")
    p.add_argument("path", help="a Kineto trace, or a run directory")
    p.add_argument("--worker", help="the worker of a run directory (default: the first)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    model_config_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Entry of `tb-gpuinsight overview`."""
    from .. import overview

    result = overview(args.path, worker=args.worker, model_config=model_config_arg(args))
    if args.format == "json":
        print(json.dumps(result.to_json(), indent=1))
    elif args.format == "csv":
        print_csv(result.steps)
    else:
        for line in render(result):
            print(line)
    for note in result.missing:
        print(f"note: {note}", file=sys.stderr)
    return 0


STEP_TITLE = 32  # the widest step column title


def _ms(us: Any) -> str:
    return "-" if us is None else f"{us / 1000:,.3f}"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render(result: Overview) -> List[str]:
    """The text report: headline, the breakdown (one column per step, up to 8), recommendations."""
    h = result.headline
    if not h:
        return ["no overview: " + "; ".join(result.missing)]
    st = h["step_time_us"]
    out = [f"{h['steps']} step(s) ({_SOURCES.get(result.source, result.source)})"
           f"  step time mean {_ms(st['mean'])} ms  median {_ms(st['median'])}  p90 {_ms(st['p90'])}"
           f"  spread {_ms(st['spread'])}",
           *(_cpu_lines() if "cpu_ops" in result.categories else [*_gpu_lines(h), *_phase_lines(h.get("phases") or {})]),
           ""]
    steps = result.steps[:8]
    # A column as wide as its step's title (up to STEP_TITLE; a longer one is cut in the middle, whole in JSON/CSV).
    titles = [elide(_title(r), STEP_TITLE) for r in steps]
    widths = [max(12, len(t)) + 1 for t in titles]

    def row(label: str, cells: List[str]) -> str:
        return f"{label:<28}" + "".join(c.rjust(w) for c, w in zip(cells, widths))

    out.append(row("ms per step", titles))
    for key in result.categories:
        if any(r.get(f"{key}_us", 0.0) > 0 for r in result.steps):
            out.append(row(LABELS[key], [_ms(r[f"{key}_us"]) for r in steps]))
    out.append(row("= wall time", [_ms(r["wall_us"]) for r in steps]))
    out.append(row("(comm. overlapped)", [_ms(r["comm_overlapped_us"]) for r in steps]))
    out.append("")
    out.append("recommendations (recoverable time per step):" if result.recommendations else
               "recommendations: none (no rule's threshold is reached)")
    for i, rec in enumerate(result.recommendations, 1):
        out.append(f"{i}. {rec['title']}: ~{_ms(rec['recoverable_us'])} ms/step ({_pct(rec['recoverable_share'])})")
        out.append(f"   {rec['advice']}")
        out.append(f"   evidence: {_figures(rec['figures'])}")
        for item in rec["items"][:3]:
            out.append(f"   - {_item(item)}")
    return out


_SOURCES = {"ProfilerStep": "ProfilerStep annotations", "serving": "serving steps: vLLM / SGLang annotations"}


def _title(row: Dict[str, Any]) -> str:
    """A step's column title: `decode bs32` for a serving step, else its label."""
    if row.get("phase"):
        return f"{row['phase']}" + (f" bs{row['batch']}" if row.get("batch") is not None else "")
    return row["step"]


def _phase_lines(phases: Dict[str, Dict[str, Any]]) -> List[str]:
    """One line per serving phase: steps, mean step time, GPU busy, batch, tokens, MFU."""
    return [f"{name}: {p['steps']} step(s), mean {_ms(p['wall_us_mean'])} ms, GPU busy {_pct(p['gpu_busy_pct'])}, "
            f"batch {_num(p['batch_mean'])}, tokens {_num(p['tokens_mean'])}, MFU {_pct(p['mfu'])}"
            for name, p in phases.items()]
def _cpu_lines() -> List[str]:
    return ["no GPU activity (a CPU-only run): the split below is CPU time - CPU ops, collectives, data loading and "
            "idle threads - with no GPU busy, TFLOP/s or MFU figures"]


def _gpu_lines(h: Dict[str, Any]) -> List[str]:
    """GPU busy, TFLOP/s, MFU and kernel counts; one line saying why when the steps ran no GPU work."""
    if not h["compute_us"] and not h["kernels_per_step"]:
        return ["no GPU activity in these steps: no GPU busy, TFLOP/s or MFU figures"]
    tflops = f"achieved {_num(h['tflops'])} TFLOP/s" if h["tflops"] is not None else "TFLOP/s unknown"
    mfu = (f"MFU {_pct(h['mfu'])} of {h['mfu_dtype']} peak {_num(h['peak_tflops'])}" if h["peak_tflops"]
           else "MFU unknown (no datasheet peak)")
    return [f"GPU busy {_pct(h['gpu_busy_pct'])}  {tflops} ({coverage.label(_pct(h[coverage.KEY]))})  {mfu}  Tensor Cores {_pct(h['tensor_core_share'])} of kernel time",
            f"kernels per step {_num(h['kernels_per_step'])}  median kernel {_num(h['kernel_median_us'])} us"]


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:,.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _figures(figures: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={_num(v) if isinstance(v, (int, float)) else v}" for k, v in figures.items())


def _item(item: Dict[str, Any]) -> str:
    name = item.get("display_name") or item.get("name") or item.get("call") or ""
    rest = {k: v for k, v in item.items() if k not in ("name", "call", "display_name")}
    return f"{name[:90]}  " + ", ".join(f"{k}={_num(v) if isinstance(v, (int, float)) else v}" for k, v in rest.items())
