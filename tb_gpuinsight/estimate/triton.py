"""Triton kernels that Inductor launched without its own figures (``kernel_flop`` / ``kernel_num_gb`` are recorded
only when the model was compiled with ``torch._inductor.config.benchmark_kernel=True``).

The launch op's arguments are the kernel's buffers in Inductor's fixed order (``KernelArgs.python_argdefs``):
buffers updated in place (``in_out_ptr*``, read and written), then read-only inputs (``in_ptr*``), then outputs
(``out_ptr*``, written), then size scalars ending with the iteration space (``xnumel``, and ``r0_numel`` for a
reduction). The roles follow from that order and the iteration space:

* an output of a pointwise kernel (``triton_poi_``) has ``xnumel`` elements; of a reduction (``triton_red_`` /
  ``triton_per_``) ``xnumel`` (the reduced result) or ``xnumel * r0_numel`` (a per-element result);
* so when the LAST buffer cannot be an output, there are no ``out_ptr``\\s and the first buffer is ``in_out_ptr0``:
  read and written (an epilogue such as ``triton_poi_fused_addmm_gelu`` updating the GEMM's output in place);
* when the FIRST buffer cannot be an output, there is no ``in_out_ptr`` and every buffer is touched once;
* when both could be, the order does not decide: every buffer once is the figure and a lower bound (the first may be
  updated in place); a single buffer is read and written unless the fused ops only create values (a fill).

A buffer larger than the iteration space (a slice, a strided view or a gather of a bigger buffer) is counted in full
(an upper bound for it) unless the fused ops name a gather (``embedding``, ``index``, ``gather``): one element read
per iterated element. FLOPs stay unknown, with the one step that records them.

Where the kernel's generated file is found (estimate/inductor_source.py, applied per launch by the attribution),
its named roles and index expressions replace these order-based figures: exact, slices included.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from .args import OpArgs, UnknownEstimate, numel
from .registry import register_prefix

ENABLE = ("compile with torch._inductor.config.benchmark_kernel=True (TORCHINDUCTOR_BENCHMARK_KERNEL=1): Inductor "
          "then records kernel_flop and kernel_num_gb on every Triton kernel")
# The exact figure without benchmark_kernel: the kernel's generated file (estimate/inductor_source.py).
SOURCE = "; exact with the kernel's Inductor source (<kernel_hash>.py) beside the trace"
POINTWISE, REDUCTION = ("triton_poi_",), ("triton_red_", "triton_per_")
# Fused ops that only create values: a kernel of one buffer made of them writes it without reading it.
_CREATION = {"fill", "zeros", "ones", "full", "arange", "iota", "empty", "new_zeros", "new_ones", "new_full",
             "zeros_like", "ones_like", "full_like", "scalar_tensor", "lift_fresh", "copy"}
_GATHER = {"embedding", "index", "gather", "index_select", "take"}


def fused_ops(name: str) -> list[str]:
    """The aten ops an Inductor kernel name lists (``triton_poi_fused_addmm_gelu_view_15`` -> addmm, gelu, view);
    an op of several words (``native_layer_norm``) comes out split, which the callers tolerate."""
    match = re.match(r"triton_(?:poi|red|per|tem)_(?:fused_)?(.*?)(?:_\d+)?$", name)
    return [w for w in match.group(1).split("_") if w] if match else []


@dataclass(frozen=True)
class Traffic:
    """Bytes of one Inductor kernel from its buffer roles, and how sure the figure is."""

    bytes: float
    kind: str  # "exact", "lower bound", "upper bound" or "range"
    note: str


def _numels(op: str, args: OpArgs, sizes: list[int]) -> Optional[tuple[int, ...]]:
    """The iteration space: the trailing integer scalars (xnumel[, r0_numel]), None when not recorded. A tiled
    pointwise kernel passes ynumel, xnumel (and znumel): the fewest trailing numels whose product is the size of
    one of its buffers (an output has it) make its space, as one number."""
    want = 1 if op.startswith(POINTWISE) else 2 if op.startswith(REDUCTION) else 0
    if not want:
        return None
    ints = [args.opt_value(i) for i in range(len(args)) if not args.is_tensor(i)]
    ints = [v for v in ints if isinstance(v, int) and not isinstance(v, bool)]
    if want == 1:
        tiled = next((k for k in (1, 2, 3) if len(ints) >= k and all(v > 0 for v in ints[-k:])
                      and numel(tuple(ints[-k:])) in sizes), 1)
        return (numel(tuple(ints[-tiled:])),) if ints and all(v > 0 for v in ints[-tiled:]) else None
    return tuple(ints[-want:]) if len(ints) >= want and all(v > 0 for v in ints[-want:]) else None


def inductor_traffic(op: str, args: OpArgs, tensors: list) -> Optional[Traffic]:
    """Read + written bytes from Inductor's argument roles, or None when the iteration space is not recorded."""
    sizes = [numel(s) for _, s, _ in tensors]
    space = _numels(op, args, sizes)
    if space is None:
        return None
    outputs = {space[0], numel(space)}  # sizes an output can have
    nbytes = [n * b for n, (_, _, b) in zip(sizes, tensors)]
    ops = set(fused_ops(op))
    gather = bool(ops & _GATHER)
    read_space = numel(space)
    over = [i for i, n in enumerate(sizes) if n > read_space]
    once = float(sum(nbytes))
    notes, kind = [], "exact"
    if over and gather:
        once -= sum(nbytes[i] - read_space * tensors[i][2] for i in over)
        notes.append(f"buffer(s) {over} gathered: one element read per iterated element ({read_space})")
    elif over:
        kind = "upper bound"
        notes.append(f"buffer(s) {over} larger than the iteration space ({read_space} elements) counted in full; "
                     "a slice or strided view of them reads less")
    first_out, last_out = sizes[0] in outputs, sizes[-1] in outputs
    if len(tensors) == 1:
        if not first_out:
            return None
        if ops and ops <= _CREATION | {"view", "reshape", "permute", "expand"}:
            return Traffic(once, kind, "; ".join(["one buffer written, not read (its ops only create values)"] + notes))
        return Traffic(2 * once, kind, "; ".join(["one buffer: updated in place (in_out_ptr0), read and written"] + notes))
    if not first_out and last_out:
        return Traffic(once, kind, "; ".join(["every buffer once (no in-place buffer: the first cannot be one)"]
                                             + notes))
    if first_out and not last_out:
        more = [i for i in range(1, len(sizes)) if sizes[i] in outputs]
        more = more[:next((k for k, i in enumerate(more) if i != k + 1), len(more))]  # in_out_ptrs are a prefix
        note = "buffer 0 updated in place (in_out_ptr0: read and written; the last buffer cannot be an output)"
        if more:
            kind = "lower bound" if kind == "exact" else "range"
            note += f"; buffers {more} may be updated in place too (+{sum(nbytes[i] for i in more):.4g} bytes)"
        return Traffic(once + nbytes[0], kind, "; ".join([note] + notes))
    if first_out and last_out:
        kind = "lower bound" if kind == "exact" else "range"
        return Traffic(once, kind, "; ".join([f"every buffer once; if buffer 0 is updated in place (in_out_ptr0) the "
                                              f"kernel moves {once + nbytes[0]:.4g} bytes"] + notes))
    return None  # no buffer of an output's size: not the layout assumed here


def _flops(op: str, args: OpArgs, out_dims: Any) -> None:
    raise UnknownEstimate(f"Triton kernel without Inductor's kernel_flop: {ENABLE}")


def _bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
    traffic = inductor_traffic(op, args, tensors)
    if traffic is not None:
        if traffic.kind == "exact":
            return traffic.bytes, f"Inductor argument roles: {traffic.note}"[:400]
        prefix = "inferred: " if traffic.kind == "range" else f"{traffic.kind}: "
        return traffic.bytes, f"{prefix}Inductor argument roles: {traffic.note}"[:400 - len(SOURCE)] + SOURCE
    sizes = [numel(s) * b for _, s, b in tensors]
    low, high = max(sizes), sum(sizes)
    return float(high), (f"inferred: buffer sizes give {low:.4g} to {high:.4g} bytes; every buffer touched once in "
                         f"full is used (the iteration space is not recorded). For exact bytes, {ENABLE}{SOURCE}")


for _prefix in ("triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "triton_mm", "triton_bmm", "triton_"):
    register_prefix(_prefix, "triton", flops=_flops, bytes=_bytes, source="Inductor's buffer argument roles")
