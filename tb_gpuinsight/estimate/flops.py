"""FLOP and byte estimates for one Kineto ``cpu_op`` from the shapes it carries: the entry point of the
performance-model registry (:mod:`.registry`; one module per op family, each entry with its FLOP and byte formula
and its source).

GEMMs and forward convolutions count what torch's own formula registry (``torch.utils.flop_counter.flop_registry``)
counts, as closed forms (a test holds them equal; torch is not imported to estimate), with adapters that pick the
right arguments out of the trace's argument list and compute output shapes; where torch's formula is wrong for what
the kernel does, first-principles formulas replace it (attention masks and varlen, convolution backward per
``output_mask`` and ``groups``). Grouped GEMMs, MoE, fused norms, activations, rotary and paged attention have
formulas of their own. Elementwise, reduction, softmax and norm ops get a documented count per element; pure data
movement (copies, casts, cat, views, gathers, fills) has 0 FLOPs, known.

Policy:

* Every op reports its full FLOPs, children included: ``aten::linear`` and its child ``aten::addmm`` report the
  same number. Attribute FLOPs to kernels through the innermost op that launched them (the caller's job).
* Ops without a formula are unknown with a reason; their bytes still count.
* A known figure that is only a bound carries a note starting with "upper bound:" in ``flops_reason``; an exact
  figure carries "".
* ``estimate_op`` never raises and is memoised on its (hashable) arguments: pass tuples, e.g. through
  :func:`freeze`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from .args import OpArgs, UnknownEstimate, check_arg_count, op_key
from .bytes import estimate_bytes
from .inductor import flops_from_inductor  # noqa: F401  (public: efficiency reads Inductor figures through it)
from .registry import lookup, registered, split_result


@dataclass(frozen=True)
class OpEstimate:
    """Estimated work of one op; a None number comes with a short reason."""

    flops: float | None
    flops_reason: str
    bytes: float | None
    bytes_reason: str
    dtype: str | None


def freeze(obj: Any) -> Any:
    """Lists (nested) -> tuples, so trace args can key the memo; other values unchanged."""
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(item) for item in obj)
    if isinstance(obj, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in obj.items()))
    return obj


def estimate_op(name: str, dims: tuple | None, types: tuple | None, concrete: tuple | None,
                out_dims: tuple | None = None) -> OpEstimate:
    """FLOPs, bytes and compute dtype of one trace op. Never raises.

    ``dims``/``types``/``concrete`` are the op's ``Input Dims``, ``Input type`` and
    ``Concrete Inputs`` (None when absent). ``out_dims`` is optional: the op's output shape
    when the caller knows it from elsewhere (e.g. a conv's grad_output in its backward op);
    it is used only where the inputs do not determine it.
    """
    try:
        return _estimate_cached(name, dims, types, concrete, out_dims)
    except TypeError:  # unhashable (lists): freeze and retry
        pass
    try:
        return _estimate_cached(freeze(name), freeze(dims), freeze(types), freeze(concrete),
                                freeze(out_dims))
    except Exception as exc:  # e.g. a dict inside dims: still never raise
        reason = f"estimate failed: {type(exc).__name__}"
        return OpEstimate(None, reason, None, reason, None)


@functools.lru_cache(maxsize=65536)
def _estimate_cached(name: Any, dims: Any, types: Any, concrete: Any, out_dims: Any) -> OpEstimate:
    try:
        args = OpArgs(dims, types, concrete)
        flops, flops_reason = _flops(name, args, out_dims)
        nbytes, bytes_reason = estimate_bytes(name, dims, types, concrete, out_dims)
        return OpEstimate(flops, flops_reason, nbytes, bytes_reason, _dtype(args))
    except Exception as exc:  # defensive: the parts below catch their own errors
        reason = f"estimate failed: {type(exc).__name__}: {exc}"[:200]
        return OpEstimate(None, reason, None, reason, None)


def _dtype(args: OpArgs) -> str | None:
    try:
        return args.compute_dtype()
    except Exception:
        return None



def _flops(name: Any, args: OpArgs, out_dims: Any) -> tuple[float | None, str]:
    """(FLOPs, "") or (None, reason); a known figure that is only a bound carries a note instead of ""."""
    op = op_key(name)
    model = lookup(op) if isinstance(name, str) else None
    if model is None or (model.flops is None and not model.zero_flops):
        return None, _no_formula_reason(name, op)
    if model.zero_flops:
        return 0.0, ""
    if not args.dims:
        return None, "no input shapes recorded"
    try:
        check_arg_count(op, args)
        value, note = split_result(model.flops(op, args, out_dims))
    except UnknownEstimate as exc:
        return None, str(exc)
    except AssertionError as exc:  # torch's formulas assert on inconsistent shapes
        return None, f"inconsistent shapes (corrupted record?): {exc}"[:200]
    except Exception as exc:  # e.g. a shape too large for a float
        return None, f"FLOP formula failed: {type(exc).__name__}: {exc}"[:200]
    if not math.isfinite(value) or value < 0:
        return None, f"FLOP formula returned {value!r}"
    return value, note


def _no_formula_reason(name: Any, op: str) -> str:
    # Deliberately not a torch registry lookup: importing torch only to word a reason would cost every trace ~1 s.
    label = name if isinstance(name, str) and name else "<unnamed op>"
    return f"no FLOP formula for {label}"[:200]


def _covered() -> tuple[str, ...]:
    return tuple(sorted((name if "::" in name else f"aten::{name}") for name, model in registered().items()
                        if model.flops is not None and not model.zero_flops))


COVERED_OPS: tuple[str, ...] = _covered()
"""Trace op names with a FLOP formula (when their shapes and needed scalars are recorded); ``*::name`` entries
match that op name in any namespace."""
