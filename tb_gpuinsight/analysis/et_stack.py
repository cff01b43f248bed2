"""ET shapes for ops no iteration match reached, by call stack: an op without shapes takes the shapes the ET gave
(directly or through a matched iteration) to every op of the same name under the same chain of enclosing ops, when
all of those agree on one shape. Iterations whose op sequence differs from the ET's (a first step with extra ops,
an autograd thread whose order varies) are thereby sized where their call stack says which op they are. A backward op's call stack alone often names several shapes (every layer's
AddmmBackward0 runs an mm); its autograd node's sequence number then names the forward op it differentiates, and
the forward op's shapes (sized by then) tell the layers apart. An op still without one shape stays unknown, and is
listed by `enrich`'s report as unmatched.

Where the trace recorded the Python code that ran each op (its "Call stack" frames, its "Module Hierarchy", or the
nn.Module calls of `with_stack` that hold it), that code is part of the key, tried first: two layers whose ops nest
alike (every Linear's addmm under an aten::linear) are then told apart by the line or module that called them."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from ..trace.table import Table
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


def python_stacks(trace) -> np.ndarray:
    """Per op, a code for the Python code that ran it (-1 where none is recorded): its "Call stack" frames (with_stack
    in 2021-22 releases), else its "Module Hierarchy", else the names of the nn.Module calls (python_function events
    of later releases) that hold it on its thread, innermost first, up to _DEPTH."""
    ops = trace.ops
    for col in ("stack", "module"):
        texts = ops.strings.get(col, []) if col in ops else []
        if any(texts):
            blank = np.array([not t for t in texts] + [True], dtype=bool)  # the last entry: code -1
            codes = ops[col].astype(np.int64)
            return np.where(blank[codes], -1, codes)
    return _module_chains(ops, trace.modules)


def _module_chains(ops, modules) -> np.ndarray:
    out = np.full(len(ops), -1, dtype=np.int64)
    if not len(modules) or not len(ops):
        return out
    threads: Dict[Tuple[str, str], int] = {}
    tid = [threads.setdefault(key, len(threads)) for table in (modules, ops)
           for key in zip(table.values("pid"), table.values("tid"))]
    both = Table("nesting", {"ts": np.concatenate([modules["ts"], ops["ts"]]),
                             "dur": np.concatenate([modules["dur"], ops["dur"]]),
                             "pid": np.zeros(len(tid), dtype=np.int64), "tid": np.array(tid, dtype=np.int64)})
    parents = op_parents(both).tolist()
    names = modules.values("name")
    keys: Dict[Tuple[str, ...], int] = {}
    first = len(modules)
    for row in range(len(ops)):
        chain: List[str] = []
        up, steps = parents[first + row], 0
        while up >= 0 and len(chain) < _DEPTH and steps < 4 * _DEPTH:
            if up < first:
                chain.append(names[up] or "")
            up, steps = parents[up], steps + 1
        if chain:
            out[row] = keys.setdefault(tuple(chain), len(keys))
    return out


def fill_by_call_stack(ops, from_et: np.ndarray, source_code: int,
                       python: Optional[Callable[[], np.ndarray]] = None) -> Tuple[int, int]:
    """Give each op without shapes the one shape the ET-sized ops (`from_et`: mask) of its call stack (and, in a
    backward node, its forward op's shapes) share; mark them `source_code`. `python`: gives, per op, the code of the
    Python stack that ran it (-1 none; `python_stacks`), tried first where recorded; called only when there is an
    op to fill. Returns how many ops were filled, and how many of them by a key with the Python stack."""
    todo = ops["shape"] < 0
    if not from_et.any() or not todo.any():
        return 0, 0
    parents = op_parents(ops)
    stack = call_stacks(ops, parents)
    anchor = forward_anchors(ops, parents)
    variants = [np.stack([stack, anchor], axis=1), stack[:, None]]  # the narrower key first
    pystack = python() if python is not None else np.full(len(stack), -1, dtype=np.int64)
    with_python = bool((pystack >= 0).any())
    if with_python:
        variants = [np.stack([stack, pystack, anchor], axis=1), np.stack([stack, pystack], axis=1)] + variants
    filled = by_python = 0
    for i, keys in enumerate(variants):
        shapes: Dict[Tuple[int, ...], Set[int]] = {}
        for key, code in zip(map(tuple, keys[from_et].tolist()), ops["shape"][from_et].tolist()):
            shapes.setdefault(key, set()).add(code)
        for row in np.flatnonzero(ops["shape"] < 0).tolist():
            if with_python and i < 2 and pystack[row] < 0:
                continue  # no Python stack recorded for this op: its key would say nothing more
            found = shapes.get(tuple(keys[row].tolist()))
            if found is not None and len(found) == 1:
                ops["shape"][row] = next(iter(found))
                ops["shape_source"][row] = source_code
                filled += 1
                by_python += int(with_python and i < 2)
    return filled, by_python
