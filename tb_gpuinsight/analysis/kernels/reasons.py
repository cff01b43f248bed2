"""Why a kernel has no rated figure: one reason code per activity, with a label and a hint on how to get one.

The code is the first gap on the way to an efficiency figure: no launching op (and why), no shapes, no formula,
no byte rule, a helper of unknown size, an unknown device, or an estimate above the roof (kept out of summaries).
"" means rated. Device summaries give the share of kernel time per code (`reason_time_share`).
"""
from __future__ import annotations

from typing import Dict, List, Tuple

RATED = ""
REASONS: Dict[str, Tuple[str, str]] = {  # code -> (label, hint)
    "no_op": ("no launching op in the trace",
              "record the launching ops: start the profiler before the first launch (warm-up outside the window)"),
    "graph_replay": ("CUDA/HIP graph replay: the captured ops do not run again",
                     "record the call that captures the graph too (a reduce-overhead model captures on its second "
                     "call: start tb_gpuinsight.profile(wait=0, warmup=1) before its first; torch.cuda.graph: "
                     "profile its `with` block), keep vLLM's capture_traces/ beside the trace, or pass --capture "
                     "CAPTURE_TRACE: replayed kernels then take the captured ops and shapes"),
    "compiled_region": ("compiled region without Inductor figures",
                        "compile with torch._inductor.config.benchmark_kernel=True (TORCHINDUCTOR_BENCHMARK_KERNEL=1): "
                        "Inductor then records kernel_flop / kernel_num_gb on every kernel"),
    "no_shapes": ("no input shapes recorded",
                  "profile with record_shapes=True, or add an Execution Trace to the run"),
    "no_formula": ("op without a FLOP formula", "a custom or unsupported op: its FLOPs stay unknown"),
    "no_bytes": ("op without a byte estimate",
                 "see the kernel's byte reason (e.g. no input types recorded: a 2021 trace; a custom op)"),
    "hidden_size": ("the op does not show a size its formula needs (MoE expert weights, a KV cache found by layer "
                    "name)", "rated through its sub-ops when they are recorded; the kernel's reason says what is "
                    "missing"),
    "helper": ("helper kernel of unknown size (layout transform, split-K reduction, runtime fill/copy)",
               "its bytes are not in the trace; it takes no FLOPs of its op"),
    "failed": ("estimate failed on the recorded arguments", "see the kernel's FLOP reason in the drawer"),
    "unknown_device": ("device not in the datasheet",
                       "pick the device with --device / the Device menu, or add a row with --devices FILE"),
    "no_peak": ("no datasheet peak for the kernel's dtype, or its dtype is unknown",
                "rate with another dtype (--dtype / the dtype menu); record_shapes=True gives each op's dtype"),
    "comm_unsized": ("communication kernel without a recorded message size",
                     "NCCL/RCCL collectives record their sizes on record_param_comms; DeepEP, NVSHMEM and custom "
                     "all-reduce kernels do not, so their bandwidth is unknown"),
    "comm_internode": ("internode communication (network): no NIC bandwidth in the trace",
                       "the trace names neither the message size nor the network's bandwidth: rate it with the "
                       "sizes your launcher logs against your NIC's figure"),
    "over_roof": ("estimate above the physical roof (left out of summaries)",
                  "see the over-the-roof cause on the kernel; the estimate, not the GPU, is wrong"),
}
CODES: List[str] = [RATED, *REASONS]


def reason_rows(shares: Dict[str, float]) -> List[Dict[str, object]]:
    """JSON-ready rows (code, label, hint, share of kernel time), largest share first."""
    rows = [{"code": code, "label": REASONS[code][0], "hint": REASONS[code][1], "time_share": share}
            for code, share in shares.items() if code in REASONS and share > 0]
    return sorted(rows, key=lambda r: -r["time_share"])


def reason_lines(shares: Dict[str, float]) -> List[str]:
    """Text lines for the CLI: one per reason with its share of kernel time and hint."""
    return [f"  {100 * r['time_share']:5.1f}% of kernel time: {r['label']} ({r['hint']})"
            for r in reason_rows(shares)]


__all__ = ["RATED", "REASONS", "CODES", "reason_rows", "reason_lines"]
