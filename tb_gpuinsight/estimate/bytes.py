"""Estimated DRAM traffic (bytes read + written) of one op, from the shapes in a trace.

The model (every number in the UI rests on it):

* **Default rule**: every tensor argument read once (``numel x itemsize``, TensorList members included; a 0-dim
  tensor counts one element; scalars and int lists nothing), the output written once with the broadcast shape of
  the tensor inputs (the largest input's shape when they do not broadcast) in the dtype torch's type promotion
  gives it (comparisons write bool). ``out=`` variants (recognised by the recorded argument count) write the
  ``out`` tensor and do not read it.
* **Per-family rules** live in the performance-model registry (:mod:`.registry`), one module per family:
  GEMMs and grouped GEMMs (:mod:`.gemm`), convolution (:mod:`.conv`), attention incl. paged KV caches
  (:mod:`.attention`), MoE (:mod:`.moe`), norms (:mod:`.norms`), elementwise / reductions / fused activations /
  rotary (:mod:`.pointwise`), data movement: copies, casts, cat, fills, gathers, indexed writes, KV-cache writes
  (:mod:`.movement`), communication (:mod:`.comm`). Each entry documents its own rule.
* **Custom ops** without an entry (:mod:`.custom`): their non-mutated inputs plus recorded outputs, "partial:".
* Caches are ignored: every operand comes from and goes to DRAM once, so the number is the compulsory traffic: a
  lower bound for ops that re-read operands (large GEMM tiles), an upper bound when inputs are still in L2.
* Unknown (``None``) with a reason when the op has no recorded shapes, no tensor arguments, or a tensor whose dtype
  is not recorded. A figure that leaves something out has a reason starting with "partial:"; a bound one
  "upper bound:"; an exact one "".

Memcpy/memset events carry their own ``bytes`` arg and are not handled here; Inductor kernels may carry
``kernel_num_gb`` (:mod:`.inductor`).
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, broadcast_shapes, checked_tensors, numel, op_key, out_arg_positions, \
    read_bytes, result_itemsize
from .custom import custom_bytes, is_custom
from .registry import lookup, split_result

# Re-exported for the analysis modules that share shapes with the estimates.
from .args import check_arg_count, is_shape  # noqa: E402,F401
from .conv import CONV_BACKWARD_OPS, CONV_FORWARD_OPS, _CONV_SPECS, conv_geometry, conv_output_shape  # noqa: F401
from .gemm import GEMM_OPERANDS, gemm_output_shape, matmul_output_shape  # noqa: F401
from .inductor import bytes_from_inductor  # noqa: F401
from .movement import VIEW_OPS


def estimate_bytes(name: str, dims: Any, types: Any, concrete: Any,
                   out_dims: Any = None) -> tuple[float | None, str]:
    """Estimated DRAM bytes (read + write) of one op and "" or the reason it is unknown, partial or a bound.

    ``out_dims`` optionally gives the op's output shape when the caller knows it from elsewhere; it is used only
    where the inputs do not determine the output. Never raises.
    """
    try:
        op, args = op_key(name), OpArgs(dims, types, concrete)
        if args.dims and op in VIEW_OPS:
            return 0.0, ""
        model = lookup(op)
        if model is not None and model.bytes is not None:
            tensors = checked_tensors(op, args)
            return split_result(model.bytes(op, args, tensors, out_dims))
        if is_custom(name):
            return custom_bytes(op, args, out_dims)
        return default_bytes(op, args), ""
    except UnknownEstimate as exc:
        return None, str(exc)
    except Exception as exc:  # a malformed trace must not break the caller
        return None, f"byte estimate failed: {type(exc).__name__}: {exc}"[:200]


def default_bytes(op: str, args: OpArgs) -> float:
    """Every tensor read once, the (broadcast) output written once; an ``out=`` tensor is written, not read."""
    tensors = checked_tensors(op, args)
    out_positions = out_arg_positions(op, len(args.dims))
    if out_positions:
        return float(read_bytes(tensors))
    read = read_bytes(tensors)  # a broadcast view (expand) reads its storage, not its numel
    shapes = [s for _, s, _ in tensors]
    out = broadcast_shapes(*shapes)
    if out is None:
        out = max(shapes, key=numel)
    return float(read + numel(out) * result_itemsize(op, args, tensors, args.compute_itemsize() or 4))
