"""Triton kernels that Inductor launched without its own figures (``kernel_flop`` / ``kernel_num_gb`` are recorded
only when the model was compiled with ``torch._inductor.config.benchmark_kernel=True``).

The launch op's arguments are the kernel's buffers, inputs and outputs alike, so the bytes are inferred as a range:
at least the largest buffer (touched once), at most every buffer touched once in full. The upper bound is the
figure (so a rate above the DRAM peak is caught, not hidden) and the reason starts with "inferred:". Reductions
over broadcast inputs and in-place buffers touch less; nothing here is exact. FLOPs stay unknown, with the one
step that records them.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel
from .registry import register_prefix

ENABLE = ("compile with torch._inductor.config.benchmark_kernel=True (TORCHINDUCTOR_BENCHMARK_KERNEL=1): Inductor "
          "then records kernel_flop and kernel_num_gb on every Triton kernel")


def _flops(op: str, args: OpArgs, out_dims: Any) -> None:
    raise UnknownEstimate(f"Triton kernel without Inductor's kernel_flop: {ENABLE}")


def _bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    sizes = [numel(s) * b for _, s, b in tensors]
    low, high = max(sizes), sum(sizes)
    return float(high), (f"inferred: buffer sizes give {low:.4g} to {high:.4g} bytes; the upper bound (every buffer "
                         f"touched once in full) is used. For exact bytes, {ENABLE}")


for _prefix in ("triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "triton_mm", "triton_bmm", "triton_"):
    register_prefix(_prefix, "triton", flops=_flops, bytes=_bytes, source="Triton buffer arguments (inferred range)")
