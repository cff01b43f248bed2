"""Graph capture merged into replay: kernels replayed by a CUDA/HIP graph launch take the ops, shapes and estimates
of the launches recorded while that graph was captured.

A replayed kernel has no launching op: the graph launch call (`cudaGraphLaunch`, `hipGraphLaunch`) runs work
captured earlier. A trace recorded during the capture (vLLM's `capture_traces/`, or the profiler span in which a
`torch.compile(mode="reduce-overhead")` model or `torch.cuda.graph` captured) holds those launches: runtime calls
that executed nothing (no kernel carries their correlation id), each under the op that issued it, with its shapes.

Alignment, per graph launch of the replay (its kernels in time order) against each capture (the capture launches
between two `*GraphInstantiate*` / `*EndCapture*` calls): tokens are the kernel name (ROCm launch calls carry it in
a `kernel` arg; CUDA ones do not: unknown) or "memset" / "memcpy". A `difflib.SequenceMatcher` pairs equal names in
order; between two matched runs, gaps of equal length on both sides pair position by position where the capture's
name is unknown or equal (a CUDA capture with the same launch count as its replay pairs wholly by position).
A replay is merged with the capture that pairs most of its kernels, and only when that is at least MIN_PAIRED of
them. Each graph launch's paired kernels then get a copy of the capture ops that issued them (and their enclosing
ops, so compiled regions stay known), and the ordinary analysis runs on those: an op's FLOPs and bytes are split
among its kernels of that one replay exactly as for eager kernels. Merged rows keep "no op in this trace" (`op` -1)
and say "from graph capture" in their reasons; their `source` is "capture".
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..trace.kineto import KinetoTrace
from ..trace.table import Table
from .correlate import GRAPH_LAUNCHES, NO_OP, link_activities, op_parents

CAPTURE_ARGS = ("kernel",)  # the launch call's kernel name (ROCm writes it; CUDA does not)
FROM_CAPTURE = "from graph capture"
MIN_PAIRED = 0.5  # share of a replay's kernels a capture must pair to be taken as that graph's capture
_SEGMENT_ENDS = ("GraphInstantiate", "EndCapture")
_MEMSET, _MEMCPY = "memset", "memcpy"


@dataclass
class CaptureLaunches:
    """The launches of one trace that executed nothing (recorded while a graph was captured), in time order."""
    trace: KinetoTrace
    op: np.ndarray  # launching op row in trace.ops (-1 none)
    tokens: List[Optional[str]]  # kernel name, "memset" / "memcpy", None where the call does not name it
    segment: np.ndarray  # which capture each launch belongs to

    def __len__(self) -> int:
        return len(self.tokens)

    def segments(self) -> List[np.ndarray]:
        return [np.flatnonzero(self.segment == s) for s in np.unique(self.segment).tolist()]


@dataclass
class MergeReport:
    """What `merge_captures` did: per capture trace whether it was used and why, and the kernels it rated."""
    captures: List[Dict[str, Any]] = field(default_factory=list)
    graph_kernels: int = 0  # activities replayed by a graph launch
    merged: int = 0  # of those, paired with a capture launch
    graph_time_share: float = 0.0  # share of activity time replayed by graph launches
    merged_time_share: float = 0.0  # share of activity time paired with a capture launch

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


def capture_launches(trace: KinetoTrace) -> CaptureLaunches:
    """Launch calls of kernels, memsets and memcpys whose work did not run in this trace: captured launches."""
    launches = trace.launches
    names = launches.strings.get("name", [])
    work = np.array([_launch_kind(n) is not None for n in names], dtype=bool)
    ends = np.array([any(e in n for e in _SEGMENT_ENDS) for n in names], dtype=bool)
    if not len(launches) or not len(names):
        return CaptureLaunches(trace, np.empty(0, np.int64), [], np.empty(0, np.int64))
    ran = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    rows = np.flatnonzero(work[launches["name"]] & ~np.isin(launches["correlation"], ran))
    rows = rows[np.argsort(launches["ts"][rows], kind="stable")]
    boundaries = np.sort(launches["ts"][ends[launches["name"]]])
    segment = np.searchsorted(boundaries, launches["ts"][rows])
    probe = Table("captured", {"correlation": launches["correlation"][rows], "ext_id": launches["ext_id"][rows]}, {})
    op = link_activities(probe, trace.ops, launches, op_parents(trace.ops)).op
    named = launches.columns.get("kernel")
    tokens = []
    for row in rows.tolist():
        kind = _launch_kind(names[launches["name"][row]])
        name = named[row] if named is not None else None
        tokens.append(kind if kind != "kernel" else (name if isinstance(name, str) and name else None))
    return CaptureLaunches(trace, op, tokens, segment)


def _launch_kind(name: str) -> Optional[str]:
    if any(g in name for g in GRAPH_LAUNCHES):
        return None
    if "LaunchKernel" in name or name.startswith("cuLaunch") or "LaunchCooperativeKernel" in name:
        return "kernel"
    if "Memset" in name:
        return _MEMSET
    if "Memcpy" in name and "Async" in name:  # a synchronous copy cannot be captured
        return _MEMCPY
    return None


def align(capture: Sequence[Optional[str]], replay: Sequence[str]) -> List[Tuple[int, int]]:
    """(capture position, replay position) pairs: equal tokens in order (SequenceMatcher), then gaps of equal
    length paired position by position where the capture token is unknown (None: a kernel) or equal. Sequences
    of one length whose every named token agrees pair wholly by position."""
    if len(capture) == len(replay) and all(_fits(c, r) for c, r in zip(capture, replay)):
        return [(k, k) for k in range(len(replay))]
    unknown = [object() for _ in capture]  # never equal to anything: an unnamed launch matches only in gaps
    a = [t if t is not None else unknown[i] for i, t in enumerate(capture)]
    matcher = difflib.SequenceMatcher(None, a, list(replay), autojunk=False)
    pairs: List[Tuple[int, int]] = []
    i0 = j0 = 0
    for block in matcher.get_matching_blocks():
        if block.a - i0 == block.b - j0:
            pairs.extend((i0 + k, j0 + k) for k in range(block.a - i0)
                         if _fits(capture[i0 + k], replay[j0 + k]))
        pairs.extend((block.a + k, block.b + k) for k in range(block.size))
        i0, j0 = block.a + block.size, block.b + block.size
    return pairs


def _fits(captured: Optional[str], replayed: str) -> bool:
    if captured is None:
        return replayed not in (_MEMSET, _MEMCPY)
    return captured == replayed


# ------------------------------------------------------------------------------------------------------ merge

def with_captures(eff, captures: Optional[Sequence[Any]] = None, dtype: str = "auto", datasheet=None,
                  device_name: Optional[str] = None):
    """`eff` rated again with its graph-replayed activities merged from capture traces (paths or loaded traces,
    tried in order); None: the trace itself, then those discovery pairs with it (`logdir.capture_companions`).
    What was tried is kept on `eff.trace.enrichment.graph_capture`. Returns `eff` itself when nothing merged."""
    from .efficiency import rate

    if eff.trace is None or not eff.activities["graph"].any():
        return eff
    if captures is None:
        captures = [eff.trace, *_discovered(eff.trace.meta.path)]
    merged, report = merge_captures(eff, captures)
    if getattr(eff.trace, "enrichment", None) is not None:
        eff.trace.enrichment.graph_capture = report.to_dict()
    return eff if merged is eff else rate(merged, dtype, datasheet, device_name)


def _discovered(path: str) -> List[str]:
    from ..logdir import capture_companions

    try:
        return [p for p in capture_companions(path) if os.path.abspath(p) != os.path.abspath(path)]
    except OSError:
        return []


def merge_captures(eff, captures: Sequence[Any], report: Optional[MergeReport] = None):
    """`eff` (an unrated or rated analysis of a replay trace) with its graph-replayed activities filled from the
    capture traces (paths, loaded on demand, or KinetoTraces; each pairs the graph launches the ones before left).
    Returns (unrated Efficiency, or `eff` itself when nothing merged; MergeReport)."""
    from .efficiency import AUTO, Efficiency, analyze_trace
    from ..errors import GpuInsightError

    report = report or MergeReport()
    acts = eff.activities
    groups = replay_groups(eff)
    dur = acts["dur"]
    total = float(dur.sum()) or 1.0
    graph_rows = np.concatenate(list(groups.values())) if groups else np.empty(0, np.int64)
    report.graph_kernels = len(graph_rows)
    report.graph_time_share = float(dur[graph_rows].sum()) / total
    merged = np.zeros(len(acts), dtype=bool)
    state = _Merged(eff)
    for cap in captures:
        todo = {k: rows for k, rows in groups.items() if not merged[rows].any()}
        if not todo:
            break
        label = cap.meta.path if isinstance(cap, KinetoTrace) else os.fspath(cap)
        try:
            launches = capture_launches(cap if isinstance(cap, KinetoTrace) else load_capture(cap))
        except GpuInsightError as exc:  # a bad capture file costs only its own merge
            report.captures.append({"path": label, "used": False, "reason": str(exc)})
            continue
        if not len(launches):
            report.captures.append({"path": label, "used": False, "reason": "no launches recorded while capturing"})
            continue
        pairs = _pair(eff, todo, launches)
        if not pairs:
            report.captures.append({"path": label, "used": False, "captured_launches": len(launches),
                                    "reason": f"its launches pair fewer than {100 * MIN_PAIRED:.0f}% of any "
                                              "replayed graph's kernels"})
            continue
        syn, rows = _synthetic_trace(eff.trace, launches, pairs)
        part = analyze_trace(syn, dtype=AUTO)
        state.take(part.activities, rows, syn)
        merged[rows] = True
        report.captures.append({"path": label, "used": True, "captured_launches": len(launches),
                                "graph_launches": len(pairs), "paired": len(rows)})
    report.merged = int(merged.sum())
    report.merged_time_share = float(dur[merged].sum()) / total
    if not merged.any():
        return eff, report
    unrated = Efficiency(eff.trace, state.acts, {}, AUTO, eff.op_estimates, eff.device_props, state.shapes)
    return unrated, report


def replay_groups(eff) -> Dict[int, np.ndarray]:
    """Activity rows of each graph launch (by its correlation id), in time order."""
    trace, acts = eff.trace, eff.activities
    corr = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    rows = np.flatnonzero(acts["graph"])
    rows = rows[np.lexsort((acts["ts"][rows], corr[rows]))]
    keys, starts = np.unique(corr[rows], return_index=True)
    return {int(k): part for k, part in zip(keys.tolist(), np.split(rows, starts[1:]))}


def _tokens(acts: Table, rows: np.ndarray) -> Tuple[str, ...]:
    kinds, names = acts.strings["kind"], acts.strings["name"]
    return tuple(names[acts["name"][r]] if kinds[acts["kind"][r]] == "kernel" else
                 (_MEMSET if kinds[acts["kind"][r]] == _MEMSET else _MEMCPY) for r in rows.tolist())


def _pair(eff, groups: Dict[int, np.ndarray], launches: CaptureLaunches) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per graph launch that a capture explains: (its paired activity rows, the capture launch positions)."""
    by_signature: Dict[Tuple[str, ...], Optional[Tuple[np.ndarray, np.ndarray]]] = {}
    segments = launches.segments()
    out = []
    for rows in groups.values():
        sig = _tokens(eff.activities, rows)
        if sig not in by_signature:
            by_signature[sig] = _best_segment(sig, segments, launches.tokens)
        hit = by_signature[sig]
        if hit is not None:
            out.append((rows[hit[0]], hit[1]))
    return out


def _best_segment(sig: Tuple[str, ...], segments: List[np.ndarray], tokens: List[Optional[str]]):
    """(replay positions, capture launch positions) of the capture that pairs most of `sig`, or None."""
    best: Tuple[int, Any] = (0, None)
    for seg in segments:
        pairs = align([tokens[i] for i in seg.tolist()], sig)
        if len(pairs) > best[0]:
            a = np.array([p[0] for p in pairs], dtype=np.int64)
            b = np.array([p[1] for p in pairs], dtype=np.int64)
            best = (len(pairs), (b, seg[a]))
    return best[1] if best[0] >= MIN_PAIRED * len(sig) and best[0] else None


def _synthetic_trace(replay: KinetoTrace, launches: CaptureLaunches,
                     pairs: List[Tuple[np.ndarray, np.ndarray]]) -> Tuple[KinetoTrace, np.ndarray]:
    """A trace whose ops are copies of the capture's (one set per graph launch, shifted apart in time) and whose
    activities are the paired replayed ones, linked to those copies by External id. Returns it and the replay's
    activity rows in the synthetic trace's activity order (kernels, then memops)."""
    cap = launches.trace
    parents = op_parents(cap.ops)
    span = float(np.nanmax(cap.ops["ts"] + cap.ops["dur"]) - np.nanmin(cap.ops["ts"])) + 1.0 if len(cap.ops) else 1.0
    op_rows, shift, act_rows, act_ext = [], [], [], []
    n_kernels = len(replay.kernels)
    for g, (rows, positions) in enumerate(pairs):
        ops = launches.op[positions]
        keep = ops >= 0
        closure = _with_ancestors(np.unique(ops[keep]), parents)
        base = len(op_rows)
        op_rows.extend(closure.tolist())
        shift.extend([g * span] * len(closure))
        act_rows.append(rows[keep])
        act_ext.append(base + np.searchsorted(closure, ops[keep]))
    op_rows_a = np.array(op_rows, dtype=np.int64)
    ops = cap.ops.take(op_rows_a)
    ops.columns["ts"] = ops["ts"] + np.array(shift)
    ops.columns["ext_id"] = np.arange(len(op_rows_a), dtype=ops["ext_id"].dtype)
    rows = np.concatenate(act_rows)
    ext = np.concatenate(act_ext)
    is_kernel = rows < n_kernels
    kernels = _relinked(replay.kernels, rows[is_kernel], ext[is_kernel])
    memops = _relinked(replay.memops, rows[~is_kernel] - n_kernels, ext[~is_kernel])
    syn = KinetoTrace(meta=replay.meta, devices=replay.devices, ops=ops, kernels=kernels, memops=memops,
                      launches=replay.launches.take(np.empty(0, np.int64)), annotations=cap.annotations,
                      shapes=cap.shapes, comms=cap.comms)
    return syn, np.concatenate([rows[is_kernel], rows[~is_kernel]])


def _with_ancestors(ops: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """`ops` and every op enclosing one of them, sorted."""
    seen = set(ops.tolist())
    frontier = ops
    while len(frontier):
        up = parents[frontier]
        up = np.unique(up[up >= 0])
        frontier = np.array([u for u in up.tolist() if u not in seen], dtype=np.int64)
        seen.update(frontier.tolist())
    return np.array(sorted(seen), dtype=np.int64)


def _relinked(table: Table, rows: np.ndarray, ext: np.ndarray) -> Table:
    """Rows of a kernels / memops table pointing at synthetic ops by External id (no launch call)."""
    out = table.take(rows)
    out.columns["ext_id"] = ext.astype(out["ext_id"].dtype)
    out.columns["correlation"] = np.full(len(rows), NO_OP, dtype=out["correlation"].dtype)
    return out


class _Merged:
    """The replay's activity columns with merged rows written in (string codes re-interned, shapes added)."""

    _DIRECT = ("flops", "bytes", "role", "gap", "comm_bytes", "comm_factor")

    def __init__(self, eff) -> None:
        from .efficiency import SOURCES

        acts = eff.activities
        self.acts = Table(acts.name, {k: v.copy() for k, v in acts.columns.items()},
                          {k: list(v) for k, v in acts.strings.items()})
        self.shapes = dict(eff.shapes)
        self.next_shape = max([len(eff.trace.shapes) if eff.trace is not None else 0, *self.shapes]) + 1
        self.source = SOURCES.index("capture")

    def take(self, part: Table, rows: np.ndarray, syn: KinetoTrace) -> None:
        acts = self.acts
        for col in self._DIRECT:
            if col in part and col in acts:
                acts[col][rows] = part[col]
        for col in ("flops_reason", "bytes_reason"):
            texts = [FROM_CAPTURE if not t else f"{FROM_CAPTURE}: {t}" for t in part.strings[col]]
            acts[col][rows] = self._codes(col, texts, part[col])
        acts["dtype"][rows] = self._codes("dtype", part.strings["dtype"], part["dtype"])
        acts["op_name"][rows] = self._codes("op_name", part.strings["op_name"], part["op_name"])
        acts["source"][rows] = np.where(part["source"] > 0, self.source, 0)
        acts["op_shape"][rows] = self._shape_codes(part["op_shape"], syn)

    def _codes(self, col: str, texts: List[str], codes: np.ndarray) -> np.ndarray:
        items = self.acts.strings[col]
        index = {t: i for i, t in enumerate(items)}
        lookup = np.empty(len(texts) + 1, dtype=np.int64)
        lookup[-1] = -1
        for i, t in enumerate(texts):
            if t not in index:
                index[t] = len(items)
                items.append(t)
            lookup[i] = index[t]
        return lookup[np.where(codes >= 0, codes, len(texts))]

    def _shape_codes(self, codes: np.ndarray, syn: KinetoTrace) -> np.ndarray:
        out = np.full(len(codes), -1, dtype=np.int64)
        new: Dict[int, int] = {}
        for i, code in enumerate(codes.tolist()):
            if code < 0:
                continue
            if code not in new:
                new[code] = self.next_shape
                self.shapes[self.next_shape] = syn.shape(code)
                self.next_shape += 1
            out[i] = new[code]
        return out


def load_capture(path: "os.PathLike[str] | str") -> KinetoTrace:
    """A capture trace read with the launch args alignment uses, its shapes filled from its own companions."""
    from .. import companion_execution_traces, load
    from .enrich import enrich

    trace = load(path, extra_args=CAPTURE_ARGS)
    enrich(trace, companion_execution_traces(os.fspath(path)))
    return trace


__all__ = ["CAPTURE_ARGS", "FROM_CAPTURE", "CaptureLaunches", "MergeReport", "capture_launches", "align",
           "merge_captures", "with_captures", "replay_groups", "load_capture"]
