"""Which CPU op launched each GPU activity (kernel, memcpy, memset), and how ops nest.

Traces link a GPU activity to its launching op in three ways, depending on the PyTorch era; we try them in order:
1. `External id` of the activity equals the op's `External id` (2021 files, and 2024+ files; in 2022-23 files
   the "External id" of activities and launches is their correlation id, so it is not trusted as an op link);
2. the activity's `correlation` finds its runtime/driver launch call, whose `External id` equals the op's;
3. that launch call's time falls inside an op on the same thread: the innermost such op launched it
   (2022-23 files, where activity and launch carry the correlation id as their "External id").
Activities none of these resolve (GPU-only traces, CUDA/HIP graph replay) keep op -1: they stay in every table
as "no op" rather than vanishing. Every activity also keeps the row of its launch call (found by `correlation`), so
that kernels replayed by one `cudaGraphLaunch` / `hipGraphLaunch` are known as graph replays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from ..trace.table import Interner, Table

NO_OP = -1
LINK_NONE, LINK_EXTERNAL_ID, LINK_LAUNCH_ID, LINK_LAUNCH_TIME = 0, 1, 2, 3
LINK_NAMES = {LINK_NONE: "no op", LINK_EXTERNAL_ID: "External id", LINK_LAUNCH_ID: "launch External id",
              LINK_LAUNCH_TIME: "launch time on the op's thread"}


@dataclass
class Links:
    """Per activity row: the launching op's row in the ops table (-1 for none), how it was found, and the row of
    its launch call in the launches table (-1 for none)."""
    op: np.ndarray
    how: np.ndarray
    launch: Optional[np.ndarray] = None

    def counts(self) -> Dict[str, int]:
        """How many activities each link method resolved."""
        values, counts = np.unique(self.how, return_counts=True)
        return {LINK_NAMES[int(v)]: int(c) for v, c in zip(values, counts)}


def op_parents(ops: Table) -> np.ndarray:
    """Row of each op's enclosing op on the same thread (-1 at top level), from time nesting."""
    if not len(ops):
        return np.full(0, NO_OP, dtype=np.int64)
    ts, end = ops["ts"], ops["ts"] + ops["dur"]
    # Per thread, by start time; a longer op first on equal starts, so that it becomes the parent.
    order = np.lexsort((-ops["dur"], ts, ops["tid"], ops["pid"]))
    thread = ops["pid"].astype(np.int64)[order] << 32 | ops["tid"].astype(np.int64)[order]
    # Plain lists in the loop: indexing numpy arrays one scalar at a time costs several times more.
    start_of, end_of = ts.tolist(), end.tolist()
    parents = [NO_OP] * len(ops)
    stack: list = []
    current = None
    for row, key in zip(order.tolist(), thread.tolist()):
        if key != current:
            stack, current = [], key
        start = start_of[row]
        while stack and end_of[stack[-1]] < start:
            stack.pop()
        if stack:
            parents[row] = stack[-1]
        stack.append(row)
    return np.array(parents, dtype=np.int64)


def link_activities(activities: Table, ops: Table, launches: Table, parents: np.ndarray) -> Links:
    """Launching op of every row of `activities` (the kernels or memops table)."""
    n = len(activities)
    op = np.full(n, NO_OP, dtype=np.int64)
    how = np.zeros(n, dtype=np.int8)
    if not n:
        return Links(op, how, np.full(n, NO_OP, dtype=np.int64))
    launch = _lookup(_index_of(launches["correlation"]), activities["correlation"])
    if not len(ops):
        return Links(op, how, launch)
    by_ext = _index_of(ops["ext_id"])
    _fill(op, how, _lookup(by_ext, _op_ids(activities)), LINK_EXTERNAL_ID)
    has_launch = launch >= 0
    via_id = np.full(n, NO_OP, dtype=np.int64)
    via_id[has_launch] = _lookup(by_ext, _op_ids(launches)[launch[has_launch]])
    _fill(op, how, via_id, LINK_LAUNCH_ID)
    todo = (op < 0) & has_launch
    if todo.any():
        rows = launch[todo]
        _fill_where(op, how, todo, _enclosing_ops(ops, parents, launches, rows), LINK_LAUNCH_TIME)
    return Links(op, how, launch)


GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def descends(row: int, op: int, parents: np.ndarray) -> bool:
    """Op `row` is nested (at any depth) inside op `op` (`parents` from `op_parents`)."""
    while row >= 0:
        row = int(parents[row])
        if row == op:
            return True
    return False


def graph_replayed(launch: np.ndarray, launches: Table) -> np.ndarray:
    """Per activity: launched by a CUDA/HIP graph launch call (a replay of captured work)."""
    names = launches.strings.get("name", [])
    is_graph = np.fromiter((any(g in n for g in GRAPH_LAUNCHES) for n in names), dtype=bool, count=len(names))
    out = np.zeros(len(launch), dtype=bool)
    has = launch >= 0
    if has.any() and len(names):
        out[has] = is_graph[launches["name"][launch[has]]]
    return out


COMPILED_REGIONS = ("Torch-Compiled Region", "CompiledFunction")


def under_compiled_region(ops: Table, parents: np.ndarray) -> np.ndarray:
    """Per op: it is, or runs inside, a torch.compile region (`Torch-Compiled Region`, `CompiledFunction*`)."""
    names = ops.strings.get("name", [])
    marks = np.fromiter((n.startswith(COMPILED_REGIONS) for n in names), dtype=bool, count=len(names))
    flag = marks[ops["name"]] if len(ops) and len(names) else np.zeros(len(ops), dtype=bool)
    up = parents.copy()
    while (up >= 0).any():  # pointer jumping: log(depth) passes
        has = up >= 0
        flag[has] |= flag[up[has]]
        up[has] = up[up[has]]
    return flag


def _op_ids(table: Table) -> np.ndarray:
    """External ids that name an op. In 2022-23 traces kernels and launches carry their correlation id as
    "External id", which may collide with an unrelated op's id by chance: such ids are not op links."""
    ids = table["ext_id"].copy()
    ids[ids == table["correlation"]] = NO_OP
    return ids


def _index_of(ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted ids, their rows) for ids >= 0; the last row wins among duplicates."""
    rows = np.flatnonzero(ids >= 0)
    keys = ids[rows]
    order = np.argsort(keys, kind="stable")
    keys, rows = keys[order], rows[order]
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last], rows[last]


def _lookup(index: Tuple[np.ndarray, np.ndarray], ids: np.ndarray) -> np.ndarray:
    keys, rows = index
    out = np.full(len(ids), NO_OP, dtype=np.int64)
    if not len(keys):
        return out
    pos = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
    hit = (keys[pos] == ids) & (ids >= 0)
    out[hit] = rows[pos[hit]]
    return out


def _fill(op: np.ndarray, how: np.ndarray, found: np.ndarray, method: int) -> None:
    _fill_where(op, how, op < 0, found[op < 0], method)


def _fill_where(op: np.ndarray, how: np.ndarray, where: np.ndarray, found: np.ndarray, method: int) -> None:
    targets = np.flatnonzero(where)
    ok = found >= 0
    op[targets[ok]] = found[ok]
    how[targets[ok]] = method


def _enclosing_ops(ops: Table, parents: np.ndarray, launches: Table, rows: np.ndarray) -> np.ndarray:
    """Innermost op on the launch call's thread whose span contains the launch's start."""
    out = np.full(len(rows), NO_OP, dtype=np.int64)
    op_thread, launch_thread = _thread_keys(ops, launches)
    query_thread, t = launch_thread[rows], launches["ts"][rows]
    end = ops["ts"] + ops["dur"]
    for key in np.unique(query_thread).tolist():
        on_thread = np.flatnonzero(op_thread == key)
        if not len(on_thread):
            continue
        # Longer first on equal starts, so the last op starting at or before t is the innermost candidate.
        on_thread = on_thread[np.lexsort((-ops["dur"][on_thread], ops["ts"][on_thread]))]
        queries = np.flatnonzero(query_thread == key)
        pos = np.searchsorted(ops["ts"][on_thread], t[queries], side="right") - 1
        found = np.where(pos >= 0, on_thread[np.clip(pos, 0, None)], NO_OP)
        out[queries] = found  # the candidate contains the launch, the usual case: done without a loop
        ended = np.flatnonzero((found >= 0) & (end[np.clip(found, 0, None)] < t[queries]))
        for q, row in zip(queries[ended].tolist(), found[ended].tolist()):
            while row >= 0 and end[row] < t[q]:  # that op ended before the launch: try its parents
                row = int(parents[row])
            out[q] = row
    return out


def _thread_keys(ops: Table, launches: Table) -> Tuple[np.ndarray, np.ndarray]:
    """One integer key per (pid, tid) text, shared by the ops and launches tables."""
    pids, tids = Interner(), Interner()
    keys = []
    for table in (ops, launches):
        pid = np.fromiter(pids.encode(table.strings["pid"]), dtype=np.int64, count=len(table.strings["pid"]))
        tid = np.fromiter(tids.encode(table.strings["tid"]), dtype=np.int64, count=len(table.strings["tid"]))
        keys.append((pid[table["pid"]] << 32) | tid[table["tid"]] if len(table) else np.empty(0, np.int64))
    return keys[0], keys[1]
