"""Ops that wrap the op whose arguments describe their kernel: rated through that child.

A Python wrapper registered as a custom op (SGLang's and aiter's profiler-visible wrappers around a paged decode
attention) may own the kernel launch while the op that records the attention's real arguments (query, page list,
block tables) runs inside it without launching anything itself. The wrapper has no rule of its own, so its
generic custom-op bytes charge every argument it was given: the whole KV pool, tens of times the read. Such a
wrapper takes the figures of its one ruled sub-op that launched nothing (its reasons say "through its sub-op"),
never both: the sub-op's own figures reach no kernel. Where that rule cannot size the call, the wrapper is unknown
with the rule's reason, not charged every argument.
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Set, Tuple

import numpy as np

from ...estimate.args import op_key
from ...estimate.custom import is_custom
from ...estimate.flops import OpEstimate
from ...estimate.registry import lookup
from ...trace.kineto import KinetoTrace
from ..correlate import descends

GENERIC = "partial: custom op without a byte rule"
THROUGH = "through its sub-op {name}: {reason}"


def rate_through_children(trace: KinetoTrace, ops: List[Tuple[str, int]], rows: Sequence[int],
                          table: List[OpEstimate], parents: np.ndarray, launched: Set[int],
                          estimate: Callable[[List[Tuple[str, int]]], List[OpEstimate]]) -> List[int]:
    """Replace, in place, the generic estimate of each custom-op signature (`ops[i]`, first op row `rows[i]`) by
    that of its single kind of ruled sub-op that launched nothing (`launched`: op rows that launched something);
    returns the indices replaced."""
    done = []
    for i, (name, _) in enumerate(ops):
        est = table[i]
        if not is_custom(name) or est.flops is not None or not (est.bytes_reason or "").startswith(GENERIC):
            continue
        subs = _silent_children(trace, int(rows[i]), parents, launched)
        if len(subs) != 1:
            continue
        (sub_name, code), = subs
        found = estimate([(sub_name, code)])[0]
        if lookup(op_key(sub_name)) is None or (found.bytes_reason or "").startswith(GENERIC):
            continue  # no rule knows the child either: the wrapper keeps its own (partial) figures
        table[i] = OpEstimate(found.flops, THROUGH.format(name=sub_name, reason=found.flops_reason), found.bytes,
                              THROUGH.format(name=sub_name, reason=found.bytes_reason), found.dtype)
        done.append(i)
    return done


def _silent_children(trace: KinetoTrace, row: int, parents: np.ndarray, launched: Set[int]) -> Set[Tuple[str, int]]:
    """(name, shape code) of the custom ops with recorded shapes nested in op `row` that launched nothing."""
    ops = trace.ops
    names = ops.strings.get("name", [])
    start, end = float(ops["ts"][row]), float(ops["ts"][row] + ops["dur"][row])
    inside = np.flatnonzero((ops["ts"] >= start) & (ops["ts"] <= end) & (ops["tid"] == ops["tid"][row]) &
                            (ops["pid"] == ops["pid"][row]) & (ops["shape"] >= 0))
    out = set()
    for sub in inside.tolist():
        name = names[ops["name"][sub]]
        if sub != row and sub not in launched and is_custom(name) and descends(sub, row, parents):
            out.add((name, int(ops["shape"][sub])))
    return out


__all__ = ["rate_through_children"]
