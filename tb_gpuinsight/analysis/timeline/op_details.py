"""What the timeline's details panel shows of a CPU op beyond its name and time, stored in the index by the workers
(a request never reads the trace): its inputs' shapes, dtypes and scalar values (record_shapes), its Python stack
(the nn.Module calls around it, with_stack; the `Module Hierarchy` and `Call stack` args older traces carry) and the
op at the other end of its forward -> backward link.

Per event the index keeps four codes (-1 for none or for GPU events): `op_shape` into the info list `shapes`
(distinct input signatures, decoded), `op_module` into `modules` (the innermost nn.Module call around it, each
module with its parent: the stack is a walk up), `op_path` into `module_paths` (the Module Hierarchy text) and
`op_call` into `call_stacks` (the Call stack's Python frames, outermost first).
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ...trace.text import safe_text
from ..correlate import op_parents

MAX_STACK = 32  # frames shown for one op: deeper nesting is recursion, not information


def add_details(trace, arrays: Dict[str, np.ndarray], op_rows: np.ndarray) -> Dict[str, list]:
    """Add the per-event codes to `arrays`; answer the lists they index (kept in the index's info)."""
    ops = trace.ops
    op_rows = np.asarray(op_rows, dtype=np.int64)  # an empty trace's concatenation is float
    cpu = np.flatnonzero(op_rows >= 0)
    rows = op_rows[cpu]
    none = np.full(len(rows), -1, dtype=np.int64)
    arrays["op_shape"], shapes = _coded(len(op_rows), cpu, ops["shape"][rows] if "shape" in ops else none,
                                        lambda code: _shape(trace, code))
    arrays["op_path"], paths = _coded(len(op_rows), cpu, _texts(ops, "module", rows),
                                      lambda code: safe_text(ops.strings["module"][code]))
    arrays["op_call"], calls = _coded(len(op_rows), cpu, _texts(ops, "stack", rows),
                                      lambda code: _frames(ops.strings["stack"][code]))
    arrays["op_module"], modules = _modules(trace.modules, ops, len(op_rows), cpu, rows)
    return {"shapes": shapes, "module_paths": paths, "call_stacks": calls, "modules": modules}


def _texts(ops, column: str, rows: np.ndarray) -> np.ndarray:
    """The string codes of a text column at `rows`, -1 where the op has none (absent or empty says nothing)."""
    if column not in ops:
        return np.full(len(rows), -1, dtype=np.int64)
    codes = ops[column][rows]
    empty = np.array([not text for text in ops.strings[column]] + [True], dtype=bool)
    return np.where(empty[codes], -1, codes)  # -1 reads the last entry: absent is empty


def _frames(call_stack: str) -> List[str]:
    """Kineto's `Call stack` ("file(line): function;..." innermost first) as frames, outermost first."""
    frames = [safe_text(f.strip()) for f in call_stack.split(";") if f.strip()]
    return frames[::-1][-MAX_STACK:]


def _coded(n: int, cpu: np.ndarray, codes: np.ndarray, decode) -> tuple:
    """Per event a dense code into a list of the decoded values actually used (-1 where none)."""
    out = np.full(n, -1, dtype=np.int32)
    codes = np.asarray(codes, dtype=np.int64)
    used = np.unique(codes[codes >= 0])
    out[cpu] = np.where(codes >= 0, np.searchsorted(used, codes), -1)
    return out, [decode(int(c)) for c in used.tolist()]


def _shape(trace, code: int) -> Dict[str, Any]:
    dims, types, concrete = trace.shape(code)
    return {"dims": dims, "types": types, "concrete": concrete}


def _modules(modules, ops, n: int, cpu: np.ndarray, rows: np.ndarray) -> tuple:
    """Per event its innermost enclosing nn.Module call (a row of the `modules` list, which holds [name, parent]),
    found by time nesting on the op's thread."""
    out = np.full(n, -1, dtype=np.int32)
    if not len(modules) or not len(rows):
        return out, []
    parents = op_parents(modules)
    names = modules.strings["name"]
    listed = [[safe_text(names[c]), p] for c, p in zip(modules["name"].tolist(), parents.tolist())]
    start, end = modules["ts"], modules["ts"] + modules["dur"]
    threads: Dict[tuple, int] = {}
    thread, op_thread = _threads(modules, threads), _threads(ops, threads)[rows]
    op_start, op_end = ops["ts"][rows], ops["ts"][rows] + ops["dur"][rows]
    inner = np.full(len(rows), -1, dtype=np.int64)
    for key in np.unique(thread).tolist():
        at = np.flatnonzero(op_thread == key)
        if not len(at):
            continue
        mine = np.flatnonzero(thread == key)
        mine = mine[np.lexsort((-modules["dur"][mine], start[mine]))]
        # The last module to start at or before the op, then up its parents until one ends after the op does.
        j = np.searchsorted(start[mine], op_start[at], side="right") - 1
        cand = np.where(j >= 0, mine[np.maximum(j, 0)], -1)
        for _ in range(4 * MAX_STACK):
            bad = (cand >= 0) & (end[np.maximum(cand, 0)] < op_end[at])
            if not bad.any():
                break
            cand[bad] = parents[cand[bad]]
        inner[at] = cand
    out[cpu] = inner
    return out, listed


def _threads(table, keys: Dict[tuple, int]) -> np.ndarray:
    """Each row's (pid, tid) as a number shared by every table passed the same `keys` (string codes differ
    between tables, so the strings are matched, once per distinct pair)."""
    pair = table["pid"].astype(np.int64) << 32 | table["tid"].astype(np.int64)
    distinct, which = np.unique(pair, return_inverse=True)
    pid_s, tid_s = table.strings["pid"], table.strings["tid"]
    number = [keys.setdefault((pid_s[d >> 32], tid_s[d & 0xFFFFFFFF]), len(keys)) for d in distinct.tolist()]
    return np.asarray(number, dtype=np.int64)[which.reshape(-1)] if len(pair) else pair


def stack(index, row: int) -> List[str]:
    """The nn.Module calls around event `row`, outermost first (empty when the trace recorded no stack)."""
    if "op_module" not in index.arrays:
        return []
    modules = index.details.get("modules", [])
    at, out = int(index.op_module[row]), []
    while 0 <= at < len(modules) and len(out) < MAX_STACK:
        out.append(modules[at][0])
        at = modules[at][1]
    return out[::-1]


def details(index, row: int) -> Dict[str, Any]:
    """The stored details of one CPU op event: inputs, module stack, module path, Python call stack and its
    forward/backward peer."""
    if "op_shape" not in index.arrays or int(index.act[row]) >= 0:
        return {}
    out: Dict[str, Any] = {}
    shape = int(index.op_shape[row])
    if shape >= 0:
        out["inputs"] = index.details["shapes"][shape]
    frames = stack(index, row)
    if frames:
        out["stack"] = frames
    path = int(index.op_path[row])
    if path >= 0:
        out["module_path"] = index.details["module_paths"][path]
    call = int(index.op_call[row]) if "op_call" in index.arrays else -1
    if call >= 0:
        out["call_stack"] = index.details["call_stacks"][call]
    other = int(index.fb_peer[row]) if "fb_peer" in index.arrays else -1
    if other >= 0:  # the backward op starts after its forward op
        side = "backward" if index.start[other] > index.start[row] else "forward"
        lane = int(np.searchsorted(index.lane_off, other, side="right") - 1)
        out[side] = {"index": other, "lane": lane, "name": index.names[index.name[other]],
                     "start": float(index.start[other]), "dur": float(index.end[other] - index.start[other])}
    return out
