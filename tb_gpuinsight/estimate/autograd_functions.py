"""Linear layers run as ``torch.autograd.Function`` subclasses (Megatron-LM's tensor-parallel linears and their FP8
variants): their GEMMs run from Python or a C++ extension, so the only shapes a trace holds are those the profiler
records on the Function's forward, named by its class, with its tensor arguments' Input Dims and types.

Megatron-LM (``megatron/core/tensor_parallel/layers.py``) defines
``LinearWithGradAccumulationAndAsyncCommunication.forward(ctx, input, weight, bias, gradient_accumulation_fusion,
allreduce_dgrad, sequence_parallel, grad_output_buffer, wgrad_deferral_limit, tp_group)`` and computes
``torch.matmul(total_input, weight.t())``: x ``[..., K]`` then w ``[N, K]``. Forks keep that order (MS-AMP's
``FP8LinearWithGradAccumulationAndAsyncCommunication``, ``LinearWithGradAccumulationFP8`` of FP8 trainers).

Attention Functions (flash-attn's ``FlashAttnVarlenFunc``...) have their entries in `estimate/attention_functions.py`.

The backward node (``<Class>Backward``) records no operands: `analysis/kernels/backward_sizing.py` sizes its kernels
from this forward by sequence number (:data:`BACKWARD_FACTORS`).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from .args import OpArgs, UnknownEstimate, numel, read_bytes
from .registry import register, register_prefix

SOURCE = ("Megatron-LM megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication."
          "forward(ctx, input, weight, bias, ...): torch.matmul(input, weight.t()) = 2 * M * N * K")
SEQUENCE_PARALLEL = ("under sequence parallelism the Function all-gathers its input over the tensor-parallel group "
                     "first (a size the trace does not record): the GEMM is then that many times larger")
FP8_NOTE = "partial: x and w read, y written; FP8 casts and scales (not recorded) move more"

# Exact names besides the prefix below: forks that put a tag in front of Megatron's name.
LINEAR_FUNCTIONS = ("FP8LinearWithGradAccumulationAndAsyncCommunication",)
LINEAR_PREFIX = "LinearWithGradAccumulation"

# Backward FLOPs per forward FLOP, by the forward entry's family, and what the figure means.
BACKWARD_FACTORS = {
    "gemm": (2.0, "upper bound: dgrad + wgrad (2x the forward; a frozen weight needs only dgrad)"),
    "attention": (2.5, "2.5x the forward (flash-attn's convention: dq, dk, dv and the recomputed scores)"),
}
_BACKWARD = re.compile(r"^(?P<forward>[A-Za-z_][\w.]*?)Backward\d*$")


def forward_name(op: str) -> Optional[str]:
    """The forward Function's name of a backward node (``FooBackward``, ``FooBackward0`` -> ``Foo``), else None."""
    hit = _BACKWARD.match(op)
    return hit.group("forward") if hit else None


def linear_operands(args: OpArgs) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(x, w): the first two tensor arguments, in order, where w is a matrix ``[N, K]`` and x ends in K."""
    tensors = [(i, s) for i, s, _ in args.tensor_items()]
    for pos, (_, x) in enumerate(tensors):
        for _, w in tensors[pos + 1:]:
            if x and len(w) == 2 and x[-1] == w[1]:
                return x, w
    shapes = ", ".join(str(s) for _, s in tensors) or "none"
    raise UnknownEstimate(f"no input [..., K] followed by a weight [N, K] among the recorded tensors ({shapes})")


def refuse_backward(op: str) -> None:
    """Raise for a backward node (``<Class>Backward``): its kernels are sized from its forward op instead."""
    if forward_name(op.rsplit("::", 1)[-1]) is not None:
        raise UnknownEstimate(f"{op}: a backward node records only grad_output; its kernels are sized from the "
                              "forward op with the same sequence number")


def _linear_flops(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    refuse_backward(op)
    x, (n, k) = linear_operands(args)
    return 2 * (numel(x) // k) * n * k, ""


def _linear_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    """x and w (and a bias [N] when recorded) read, y = x[..., N] written in x's dtype."""
    refuse_backward(op)
    x, (n, k) = linear_operands(args)
    size = next((b for _, s, b in tensors if s == x and b), 2)
    operands = [t for t in tensors if t[1] in (x, (n, k), (n,))]
    return read_bytes(operands) + (numel(x) // k) * n * size, FP8_NOTE


register(LINEAR_FUNCTIONS, "gemm", flops=_linear_flops, bytes=_linear_bytes, source=SOURCE)
register_prefix(LINEAR_PREFIX, "gemm", flops=_linear_flops, bytes=_linear_bytes, source=SOURCE)

__all__ = ["BACKWARD_FACTORS", "LINEAR_FUNCTIONS", "LINEAR_PREFIX", "SOURCE", "forward_name", "linear_operands",
           "refuse_backward"]
