"""Ops that hide their weights or KV cache, sized from the model's config (`estimate/model_sized.py`) with what
their sub-ops recorded.

A kernel may pad a size of the config (gpt-oss' intermediate 2880 -> 2944 in triton_kernels' MXFP4 MoE): the op
itself does not show it, its sub-ops do (the `aten::empty` of a buffer with one row per routed token). Each
config-sized op signature takes the shapes its first op's descendants recorded: tensor arguments and the size
lists of allocations and views (`Concrete Inputs` such as `[1, 128, 2944]`).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ...estimate.args import OpArgs, is_shape
from ...estimate.flops import OpEstimate
from ...estimate.model_config import ModelConfig
from ...estimate.model_sized import has_rule, size_from_config
from ...trace.kineto import KinetoTrace
from ..correlate import descends

_MAX_SUB_SHAPES = 400  # a MoE layer records a few dozen sub-ops; a bound keeps a pathological op cheap


def size_from_model_config(trace: KinetoTrace, ops: List[Tuple[str, int]], rows: Sequence[int],
                           table: List[OpEstimate], config: ModelConfig, parents: np.ndarray) -> List[int]:
    """Replace, in place, the estimates (`table[i]` of op signature `ops[i]`, first op row `rows[i]`) of ops a
    model-config rule covers; returns their indices in `table`."""
    sized = []
    for i, (name, code) in enumerate(ops):
        if not has_rule(name) or code < 0:
            continue
        subs = sub_shapes(trace, int(rows[i]), parents) if len(parents) else []
        est = size_from_config(name, *trace.shape(code), config, subs)
        if est is not None:
            table[i] = est
            sized.append(i)
    return sized


def sub_shapes(trace: KinetoTrace, row: int, parents: np.ndarray) -> List[Tuple[int, ...]]:
    """Shapes recorded by the ops op `row` encloses (same thread, by nesting): tensor arguments and int-list
    arguments (sizes of allocations and views)."""
    ops = trace.ops
    start, end = float(ops["ts"][row]), float(ops["ts"][row] + ops["dur"][row])
    inside = np.flatnonzero((ops["ts"] >= start) & (ops["ts"] <= end) & (ops["tid"] == ops["tid"][row]) &
                            (ops["pid"] == ops["pid"][row]))
    out: List[Tuple[int, ...]] = []
    for sub in inside.tolist():
        if sub == row or not descends(sub, row, parents) or ops["shape"][sub] < 0:
            continue
        args = OpArgs(*trace.shape(int(ops["shape"][sub])))
        out.extend(tuple(s) for _, s, _ in args.tensor_items())
        out.extend(tuple(v) for v in (args.opt_value(i) for i in range(len(args.concrete)))
                   if isinstance(v, (list, tuple)) and is_shape(v) and all(isinstance(x, int) for x in v))
        if len(out) >= _MAX_SUB_SHAPES:
            break
    return out[:_MAX_SUB_SHAPES]


__all__ = ["size_from_model_config", "sub_shapes"]
