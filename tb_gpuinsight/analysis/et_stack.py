"""ET shapes for ops no iteration match reached, by call stack: an op without shapes takes the shapes the ET gave
(directly or through a matched iteration) to every op of the same name under the same chain of enclosing ops, when
all of those agree on one shape. Iterations whose op sequence differs from the ET's (a first step with extra ops,
an autograd thread whose order varies) are thereby sized where their call stack says which op they are. A backward op's call stack alone often names several shapes (every layer's
AddmmBackward0 runs an mm); its autograd node's sequence number then names the forward op it differentiates, and
the forward op's shapes (sized by then) tell the layers apart. An op still without one shape stays unknown, and is
listed by `enrich`'s report as unmatched."""
from __future__ import annotations

from typing import Dict, Set, Tuple

import numpy as np

from .correlate import op_parents

_DEPTH = 8  # enclosing ops read: enough to tell one module's op from another's, without unbounded keys


def call_stacks(ops, parents: np.ndarray) -> np.ndarray:
    """Per op, a code for its call stack: its name and its rank among the same-named children of its enclosing op
    (an AddmmBackward0 runs two mm, grad_input's and grad_weight's), then its enclosing ops' names up to _DEPTH;
    equal codes, equal call stacks."""
    names = ops["name"].tolist()
    parent = parents.tolist()
    rank = np.zeros(len(names), dtype=np.int64)
    seen: Dict[Tuple[int, int], int] = {}
    for row in np.lexsort((ops["ts"],)).tolist():  # siblings in start order
        key = (parent[row], names[row]) if parent[row] >= 0 else (-1 - row, names[row])
        rank[row] = seen.get(key, 0)
        seen[key] = rank[row] + 1
    keys: Dict[Tuple[int, ...], int] = {}
    out = np.empty(len(names), dtype=np.int64)
    for row in range(len(names)):
        chain, up = [names[row], int(rank[row])], parent[row]
        while up >= 0 and len(chain) <= _DEPTH + 1:
            chain.append(names[up])
            up = parent[up]
        out[row] = keys.setdefault(tuple(chain), len(keys))
    return out


def forward_anchors(ops, parents: np.ndarray) -> np.ndarray:
    """Per op, the shape code of the forward op its nearest autograd node (an enclosing op recorded with a sequence
    number and a forward thread other than its own; 0 is "none") differentiates; -1 outside a backward node or when that op has no shapes."""
    seq, fwd_tid, shape = ops["seq"].tolist(), ops["fwd_tid"].tolist(), ops["shape"].tolist()
    tid = ops["tid"].tolist()
    node = [s >= 0 and f > 0 and f != t for s, f, t in zip(seq, fwd_tid, tid)]  # an autograd node (backward)
    forward: Dict[int, int] = {}
    for row in range(len(seq)):
        if seq[row] >= 0 and not node[row] and shape[row] >= 0:
            forward.setdefault(seq[row], shape[row])  # the first (outermost) forward op of that sequence number
    out = np.full(len(seq), -1, dtype=np.int64)
    for row in range(len(seq)):
        up, depth = row, 0
        while up >= 0 and depth <= _DEPTH and not node[up]:
            up, depth = int(parents[up]), depth + 1
        if up >= 0 and depth <= _DEPTH:
            out[row] = forward.get(seq[up], -1)
    return out


def fill_by_call_stack(ops, from_et: np.ndarray, source_code: int) -> int:
    """Give each op without shapes the one shape the ET-sized ops (`from_et`: mask) of its call stack (and, in a
    backward node, its forward op's shapes) share; mark them `source_code`. Returns how many ops were filled."""
    todo = ops["shape"] < 0
    if not from_et.any() or not todo.any():
        return 0
    parents = op_parents(ops)
    stack = call_stacks(ops, parents)
    anchor = forward_anchors(ops, parents)
    filled = 0
    for keys in (np.stack([stack, anchor], axis=1), stack[:, None]):  # the narrower key first
        shapes: Dict[Tuple[int, ...], Set[int]] = {}
        for key, code in zip(map(tuple, keys[from_et].tolist()), ops["shape"][from_et].tolist()):
            shapes.setdefault(key, set()).add(code)
        for row in np.flatnonzero(ops["shape"] < 0).tolist():
            found = shapes.get(tuple(keys[row].tolist()))
            if found is not None and len(found) == 1:
                ops["shape"][row] = next(iter(found))
                ops["shape_source"][row] = source_code
                filled += 1
    return filled
