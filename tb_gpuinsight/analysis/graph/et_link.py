"""Link Execution Trace nodes to the cpu ops of the Kineto trace of the same run and span.

Tried in order, keeping the first that links most nodes whose names agree:
1. ET `rf_id` == the cpu op's `Record function id` (PyTorch 2.4+);
2. ET `rf_id` + a constant offset == the cpu op's `External id` (2023 files; the offset is the most common
   difference between same-named nodes and ops, 0 in exact pairs);
3. an order-preserving alignment of the ET node names with the cpu op names (by start time).
Nodes a method leaves unlinked are then filled by the alignment, between linked neighbours (in time). The link
rate counts the ET nodes a Kineto trace can hold (every node but the profiler's own process / thread nodes).
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from ...trace.et import ExecutionTrace
from ...trace.table import Table

RF_ID, EXTERNAL_ID, NAME_ORDER, NONE = "record function id", "external id", "name order", "none"
_OFFSET_SAMPLE = 2000  # nodes used to find the External id offset


def host_events(trace) -> Table:
    """The Kineto events an ET node can match: cpu ops, then CPU-side user annotations (record_function ranges
    that older traces write as cpu ops and newer ones as user_annotation). `op_row` is the ops row, -1 for an
    annotation."""
    ops, ann = trace.ops, trace.annotations
    cpu = np.flatnonzero(np.asarray(ann.values("kind"), dtype=object) == "cpu") if len(ann) else np.empty(0, int)
    names = ops.values("name") + [ann.values("name")[i] for i in cpu.tolist()] if len(cpu) else ops.values("name")
    cols = {
        "ts": np.concatenate([ops["ts"], ann["ts"][cpu]]),
        "dur": np.concatenate([ops["dur"], ann["dur"][cpu]]),
        "ext_id": np.concatenate([ops["ext_id"], ann["ext_id"][cpu]]).astype(np.int64),
        "rf_id": np.concatenate([ops["rf_id"], np.full(len(cpu), -1)]).astype(np.int64),
        "tid": np.concatenate([ops["tid"], ann["tid"][cpu]]).astype(np.int64),
        "op_row": np.concatenate([np.arange(len(ops)), np.full(len(cpu), -1)]).astype(np.int64),
        "name": np.arange(len(names), dtype=np.int32),
    }
    return Table("host", cols, {"name": names})


@dataclass
class Link:
    """`op[row]`: the row in `host_events(trace)` of each ET row (-1 unlinked)."""
    op: np.ndarray
    method: str
    offset: int
    linkable: int

    @property
    def linked(self) -> int:
        return int((self.op >= 0).sum())

    @property
    def rate(self) -> float:
        return self.linked / self.linkable if self.linkable else 0.0

    def to_dict(self) -> Dict[str, object]:
        return {"method": self.method, "offset": self.offset, "linked": self.linked, "linkable": self.linkable,
                "rate": self.rate}


def link_et(et: ExecutionTrace, ops: Table) -> Link:
    """Link every ET node to a Kineto cpu op (see the module docstring)."""
    linkable = np.array([not et.is_root(r) for r in range(len(et))], dtype=bool)
    names = ops.values("name") if len(ops) else []
    candidates = [_by_id(et, ops["rf_id"], names, 0, linkable, RF_ID)]
    offset = _external_offset(et, ops["ext_id"], names, linkable) if len(ops) else None
    if offset is not None:
        candidates.append(_by_id(et, ops["ext_id"], names, offset, linkable, EXTERNAL_ID))
    best = max(candidates, key=lambda link: link.linked)
    if best.linked == 0:
        best = Link(np.full(len(et), -1, dtype=np.int64), NAME_ORDER, 0, int(linkable.sum()))
    _align_rest(et, ops, names, best.op, linkable)
    if best.linked == 0:
        best.method = NONE
    return best


def _by_id(et: ExecutionTrace, ids: np.ndarray, names: List[str], offset: int, linkable: np.ndarray,
           method: str) -> Link:
    row_of_id = {int(i): r for r, i in enumerate(ids.tolist()) if i >= 0}
    op = np.full(len(et), -1, dtype=np.int64)
    rf = et.cols["rf_id"]
    for row in np.flatnonzero(linkable & (rf >= 0)).tolist():
        k = row_of_id.get(int(rf[row]) + offset)
        if k is not None and names[k] == et.names[row]:
            op[row] = k
    return Link(op, method, offset, int(linkable.sum()))


def _external_offset(et: ExecutionTrace, ext: np.ndarray, names: List[str], linkable: np.ndarray):
    """The most common (External id - rf_id) among same-named node / op pairs, or None."""
    by_name: Dict[str, List[int]] = {}
    for i, name in zip(ext.tolist(), names):
        if i >= 0:
            by_name.setdefault(name, []).append(i)
    diffs: Counter = Counter()
    rows = np.flatnonzero(linkable & (et.cols["rf_id"] >= 0))[:_OFFSET_SAMPLE].tolist()
    for row in rows:
        ids = by_name.get(et.names[row], ())
        if len(ids) <= 64:  # rare names only: frequent ones add noise and cost
            rf = int(et.cols["rf_id"][row])
            diffs.update(i - rf for i in ids)
    return diffs.most_common(1)[0][0] if diffs else None


def _align_rest(et: ExecutionTrace, ops: Table, names: List[str], op: np.ndarray, linkable: np.ndarray) -> None:
    """Fill unlinked nodes by aligning names in order (ET by id, Kineto ops by start time), only with ops no
    node took yet and, between two nodes linked by id, only with ops that started between their ops: an ET covers
    one window (often one iteration) of a Kineto trace that may hold many, and a node aligned into another
    iteration would give its shapes to the wrong op."""
    if not len(ops):
        return
    taken = np.zeros(len(ops), dtype=bool)
    taken[op[op >= 0]] = True
    order = np.argsort(ops["ts"], kind="stable")
    ts = ops["ts"][order]
    free_rows = np.flatnonzero(linkable & (op < 0))
    anchors = np.flatnonzero(op >= 0)
    # Unlinked nodes grouped by the linked node before them (-1: before the first).
    group = np.searchsorted(anchors, free_rows) - 1
    for g in np.unique(group).tolist():
        rows = free_rows[group == g].tolist()
        lo = ops["ts"][op[anchors[g]]] if g >= 0 else -np.inf
        hi = ops["ts"][op[anchors[g + 1]]] if g + 1 < len(anchors) else np.inf
        lo, hi = min(lo, hi), max(lo, hi)
        window = order[np.searchsorted(ts, lo, side="left"):np.searchsorted(ts, hi, side="right")]
        free_ops = [k for k in window.tolist() if not taken[k]]
        if not free_ops:
            continue
        matcher = difflib.SequenceMatcher(None, [et.names[r] for r in rows], [names[k] for k in free_ops],
                                          autojunk=False)
        for block in matcher.get_matching_blocks():
            for j in range(block.size):
                k = free_ops[block.b + j]
                op[rows[block.a + j]] = k
                taken[k] = True
