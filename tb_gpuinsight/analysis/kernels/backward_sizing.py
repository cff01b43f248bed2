"""Kernels of an autograd Function's backward node, sized from its forward op by sequence number.

A ``torch.autograd.Function`` whose GEMMs run from Python or a C++ extension (Megatron's
``LinearWithGradAccumulationAndAsyncCommunication``, TE's ``_Linear``, flash-attn's ``FlashAttnVarlenFunc``) records
its forward as an op named by its class with its tensor arguments' shapes, and its backward as ``<Class>Backward``
with grad_output at most. The profiler gives both the same "Sequence number". When the backward node's own kernels
have no FLOPs and none of its sub-ops was sized (no double count), they take the forward's estimate times the
factor of its family (`estimate/autograd_functions.py`: 2x for a linear, an upper bound; 2.5x for attention) and
twice its bytes (each operand read again, its gradient written), split by kernel duration like any op's figures.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ...estimate.args import op_key
from ...estimate.autograd_functions import BACKWARD_FACTORS, forward_name
from ...estimate.flops import OpEstimate, estimate_op
from ...estimate.registry import lookup
from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from .subop_sizing import EstimateWriter

FROM_FORWARD = "from its forward op"
UPPER = "upper bound: "


def size_from_forward(trace: KinetoTrace, acts: Table) -> int:
    """Size the eager kernels of backward nodes from their forward ops (rule in the module docstring). Returns how
    many activities were sized."""
    rows = _candidates(trace, acts)
    if not len(rows):
        return 0
    codes, sized = EstimateWriter(acts), 0
    busy = _ops_with_sized_subops(trace, acts)
    backward, which = np.unique(acts["op"][rows], return_inverse=True)
    order = np.argsort(which, kind="stable")
    groups = np.split(rows[order], np.flatnonzero(np.diff(which[order])) + 1)  # each backward node's kernel rows
    for op, forward, mine in zip(backward.tolist(), forward_rows(trace, backward).tolist(), groups):
        est = None if forward < 0 or _encloses(trace, op, busy) else backward_estimate(trace, op, forward)
        if est is None or est.flops is None:
            continue
        dur = acts["dur"][mine].astype(float)
        share = dur / dur.sum() if dur.sum() > 0 else np.full(len(mine), 1.0 / len(mine))
        codes.write(mine, est, share)
        sized += len(mine)
    return sized


def backward_estimate(trace: KinetoTrace, row: int, forward: Optional[int] = None) -> Optional[OpEstimate]:
    """The estimate of backward node `row` from its forward op (`forward`, found by :func:`find_forward` when not
    given); None when it has none with known FLOPs of a family with a backward factor."""
    ops = trace.ops
    name = ops.strings["name"][ops["name"][row]]
    forward = find_forward(trace, row) if forward is None else forward
    base = forward_name(name)
    model = lookup(op_key(base)) if base else None
    if forward is None or model is None or model.family not in BACKWARD_FACTORS:
        return None
    code = int(ops["shape"][forward])
    est = estimate_op(base, *(trace.shape(code) if code >= 0 else (None, None, None)))
    if est.flops is None:
        return None
    factor, note = BACKWARD_FACTORS[model.family]
    seq = int(ops["seq"][row])
    origin = f"{FROM_FORWARD} {base} (sequence number {seq})"
    flops_reason = _flops_reason(note, origin, est.flops_reason)
    nbytes = None if est.bytes is None else 2 * est.bytes
    partial = "partial: " if est.bytes_reason.startswith("partial:") else ""
    bytes_reason = (f"{partial}{origin}: twice its bytes (each operand read again, its gradient written)"
                    if nbytes is not None else f"{origin}: {est.bytes_reason}")
    return OpEstimate(factor * est.flops, flops_reason, nbytes, bytes_reason, est.dtype)


def _flops_reason(note: str, origin: str, forward_reason: str) -> str:
    """The backward figure's reason: an upper bound when the factor is one or the forward's figure is one."""
    bound = forward_reason[len(UPPER):] if forward_reason.startswith(UPPER) else ""
    if not note.startswith(UPPER) and not bound:
        return f"{origin}: {note}"
    reason = f"{UPPER}{note.removeprefix(UPPER)}, {origin}"
    return f"{reason}, whose figure is an upper bound ({bound})" if bound else reason


def find_forward(trace: KinetoTrace, row: int) -> Optional[int]:
    """The forward op of backward node `row` (see :func:`forward_rows`), or None."""
    found = int(forward_rows(trace, np.array([row], dtype=np.int64))[0])
    return found if found >= 0 else None


def forward_rows(trace: KinetoTrace, rows: np.ndarray) -> np.ndarray:
    """Per backward node row: its forward op, the latest op named as its forward with the same sequence number
    that started before it (sequence numbers count per thread, so an earlier one may be another thread's); -1
    where none."""
    ops = trace.ops
    names = ops.strings.get("name", [])
    code = {n: i for i, n in enumerate(names)}
    wanted = {code.get(forward_name(names[ops["name"][r]]) or "", -1) for r in rows.tolist()} - {-1}
    cand = np.flatnonzero(np.isin(ops["name"], list(wanted)) & (ops["seq"] >= 0)) if wanted else \
        np.empty(0, np.int64)
    index: Dict[Tuple[int, int], List[int]] = {}
    for r in cand[np.argsort(ops["ts"][cand], kind="stable")].tolist():
        index.setdefault((int(ops["name"][r]), int(ops["seq"][r])), []).append(r)
    out = np.full(len(rows), -1, dtype=np.int64)
    for i, r in enumerate(rows.tolist()):
        key = (code.get(forward_name(names[ops["name"][r]]) or "", -1), int(ops["seq"][r]))
        before = [f for f in index.get(key, []) if ops["ts"][f] <= ops["ts"][r]]
        out[i] = before[-1] if before and key[1] >= 0 else -1
    return out


def _candidates(trace: KinetoTrace, acts: Table) -> np.ndarray:
    """Eager kernel rows without FLOPs whose launching op is a backward node."""
    names = trace.ops.strings.get("name", [])
    kinds = acts.strings.get("kind", [])
    if not len(acts) or not names or "kernel" not in kinds:
        return np.empty(0, np.int64)
    backward = np.fromiter((forward_name(n) is not None for n in names), dtype=bool, count=len(names))
    op = acts["op"]
    linked = op >= 0
    is_backward = np.zeros(len(acts), dtype=bool)
    is_backward[linked] = backward[trace.ops["name"][op[linked]]]
    mask = is_backward & (acts["kind"] == kinds.index("kernel")) & ~acts["graph"].astype(bool) & np.isnan(acts["flops"])
    return np.flatnonzero(mask)


def _ops_with_sized_subops(trace: KinetoTrace, acts: Table) -> Dict[Tuple[int, int], np.ndarray]:
    """Per (pid, tid): the sorted start times of ops whose activities have FLOPs."""
    ops = trace.ops
    sized = np.unique(acts["op"][(acts["op"] >= 0) & (acts["flops"] > 0)])
    out: Dict[Tuple[int, int], List[float]] = {}
    for r in sized.tolist():
        out.setdefault((int(ops["pid"][r]), int(ops["tid"][r])), []).append(float(ops["ts"][r]))
    return {k: np.sort(np.array(v)) for k, v in out.items()}


def _encloses(trace: KinetoTrace, op: int, busy: Dict[Tuple[int, int], np.ndarray]) -> bool:
    """Whether a sized op starts inside `op` on its thread (a sub-op already carries part of its work)."""
    ops = trace.ops
    starts = busy.get((int(ops["pid"][op]), int(ops["tid"][op])))
    if starts is None:
        return False
    lo, hi = float(ops["ts"][op]), float(ops["ts"][op] + ops["dur"][op])
    return bool(np.searchsorted(starts, hi, side="right") > np.searchsorted(starts, lo, side="right"))


__all__ = ["FROM_FORWARD", "backward_estimate", "find_forward", "forward_rows", "size_from_forward"]
