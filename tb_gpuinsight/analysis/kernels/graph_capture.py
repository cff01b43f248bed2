"""Graph capture merged into replay: kernels replayed by a CUDA/HIP graph launch take the ops, shapes and estimates
of the launches recorded while that graph was captured.

A replayed kernel has no launching op: the graph launch call (`cudaGraphLaunch`, `hipGraphLaunch`) runs work
captured earlier. A trace recorded during the capture (vLLM's `capture_traces/`, or the profiler span in which a
`torch.compile(mode="reduce-overhead")` model or `torch.cuda.graph` captured) holds those launches: runtime calls
that executed nothing (no kernel carries their correlation id), each under the op that issued it, with its shapes.

Alignment, per graph launch of the replay (its kernels in capture order: by Kineto's `graph node id` where the
kernels carry it, else in time order) against each capture (the capture launches
between two `*GraphInstantiate*` / `*EndCapture*` calls): tokens are the kernel name (ROCm launch calls carry it in
a `kernel` arg; CUDA ones do not: unknown) or "memset" / "memcpy". A `difflib.SequenceMatcher` pairs equal names in
order; between two matched runs, gaps of equal length on both sides pair position by position where the capture's
name is unknown or equal (a CUDA capture with the same launch count as its replay pairs wholly by position).
A replayed graph (its kernel sequence) is merged with the capture that pairs most of its kernels, at least
MIN_PAIRED of them; where ROCm launch calls give their grid, the capture whose paired launches have the replay's
grids wins a tie (vLLM captures one graph per batch size, all with the same kernels). Each graph launch's paired
kernels then get a copy of the capture ops that issued them (and their enclosing ops, so compiled regions stay
known), and the ordinary analysis runs on those: an op's FLOPs and bytes are split among its kernels of that one
replay exactly as for eager kernels. Merged rows keep their `op` in this trace (the op around the graph launch, if
any) and take the captured op's name and shapes (`op_name`, `op_shape`); their reasons say "from graph capture"
and their `source` is "capture".
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from ..correlate import GRAPH_LAUNCHES, NO_OP, link_activities, op_parents
from .step_sizing import size_attention_from_steps
from .subop_sizing import size_captured

# The launch call's kernel name and grid (ROCm writes them; CUDA does not). A capture trace is read for its launches
# and ops only: "grid" as an extra arg also stands in for its kernels' own grid column, which nothing here reads.
CAPTURE_ARGS = ("kernel", "grid")
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
    grids: List[Optional[Tuple[int, ...]]] = field(default_factory=list)  # launch grid where the call gives it
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # each launch's row in trace.launches

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
        return CaptureLaunches(trace, np.empty(0, np.int64), [], np.empty(0, np.int64), [])
    ran = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    rows = np.flatnonzero(work[launches["name"]] & ~np.isin(launches["correlation"], ran))
    rows = rows[np.argsort(launches["ts"][rows], kind="stable")]
    boundaries = np.sort(launches["ts"][ends[launches["name"]]])
    segment = np.searchsorted(boundaries, launches["ts"][rows])
    probe = Table("captured", {"correlation": launches["correlation"][rows], "ext_id": launches["ext_id"][rows]}, {})
    op = link_activities(probe, trace.ops, launches, op_parents(trace.ops)).op
    named, grid = launches.columns.get("kernel"), launches.columns.get("grid")
    tokens, grids = [], []
    for row in rows.tolist():
        kind = _launch_kind(names[launches["name"][row]])
        name = named[row] if named is not None else None
        tokens.append(kind if kind != "kernel" else (name if isinstance(name, str) and name else None))
        grids.append(_grid(grid[row]) if grid is not None and grid.dtype == object else None)
    return CaptureLaunches(trace, op, tokens, segment, grids, rows)


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
    from ...logdir import capture_companions

    try:
        return [p for p in capture_companions(path) if os.path.abspath(p) != os.path.abspath(path)]
    except OSError:
        return []


def merge_captures(eff, captures: Sequence[Any], report: Optional[MergeReport] = None):
    """`eff` (an unrated or rated analysis of a replay trace) with its graph-replayed activities filled from the
    capture traces (paths, loaded on demand, or KinetoTraces). Each distinct replayed graph (its kernel sequence)
    takes the capture that pairs most of its kernels, launch grids breaking ties (one capture per batch size has the
    same kernels); captures are read in order until every graph is paired wholly, grids agreeing where recorded.
    Returns (unrated Efficiency, or `eff` itself when nothing merged; MergeReport)."""
    from .efficiency import AUTO, Efficiency, analyze_trace

    report = report or MergeReport()
    acts = eff.activities
    groups = replay_groups(eff)
    dur = acts["dur"]
    total = float(dur.sum()) or 1.0
    graph_rows = np.concatenate(list(groups.values())) if groups else np.empty(0, np.int64)
    report.graph_kernels = len(graph_rows)
    report.graph_time_share = float(dur[graph_rows].sum()) / total
    signatures = _signatures(acts, groups)
    best: Dict[Tuple, _Choice] = {}
    loaded: List[CaptureLaunches] = []
    entries: List[Dict[str, Any]] = []  # the report's entry of each loaded capture
    for cap in captures:
        if signatures and all(best.get(sig) is not None and best[sig].whole(len(sig[0])) for sig in signatures):
            break
        launches = _launches_of(cap, report)
        if launches is None:
            continue
        loaded.append(launches)
        entry = {"path": launches.trace.meta.path, "used": False, "captured_launches": len(launches),
                 "reason": f"its launches pair fewer than {100 * MIN_PAIRED:.0f}% of any replayed graph's kernels, "
                           "or fewer than another capture's"}
        report.captures.append(entry)
        entries.append(entry)
        for sig in signatures:
            choice = _best_segment(sig, launches, len(loaded) - 1)
            if choice is not None and (sig not in best or choice.score > best[sig].score):
                best[sig] = choice
    merged = np.zeros(len(acts), dtype=bool)
    state = _Merged(eff)
    for index, launches in enumerate(loaded):
        pairs = [(rows[c.replay], c.capture) for sig, members in signatures.items() for rows in members
                 for c in [best.get(sig)] if c is not None and c.source == index]
        if not pairs:
            continue
        entries[index].update(used=True, graph_launches=len(pairs), paired=int(sum(len(r) for r, _ in pairs)))
        del entries[index]["reason"]
        syn, rows, op_rows = _synthetic_trace(eff.trace, launches, pairs)
        part = analyze_trace(syn, dtype=AUTO, model_config=eff.model_config).activities
        size_captured(part, rows, pairs, launches.trace, launches.rows)  # sizes only the capture's sub-ops show
        state.take(part, rows, syn)
        if launches.trace is eff.trace:  # captured in this trace: its ops are this trace's
            state.captured_op[rows] = np.where(part["op"] >= 0, op_rows[np.maximum(part["op"], 0)], NO_OP)
        merged[rows] = True
    report.merged = int(merged.sum())
    report.merged_time_share = float(dur[merged].sum()) / total
    if not merged.any():
        return eff, report
    size_attention_from_steps(eff.trace.annotations, state.acts, state.shapes.get, eff.model_config,
                              prefix=f"{FROM_CAPTURE}: ")
    unrated = Efficiency(eff.trace, state.acts, {}, AUTO, eff.op_estimates, eff.device_props, state.shapes,
                         model_config=eff.model_config, captured_op=state.captured_op)
    return unrated, report


def _launches_of(cap: Any, report: MergeReport) -> Optional[CaptureLaunches]:
    """The capture launches of a loaded trace or a path; None (reported) when unreadable or it captured nothing."""
    from ...errors import GpuInsightError

    label = cap.meta.path if isinstance(cap, KinetoTrace) else os.fspath(cap)
    try:
        launches = capture_launches(cap if isinstance(cap, KinetoTrace) else load_capture(cap))
    except GpuInsightError as exc:  # a bad capture file costs only its own merge
        report.captures.append({"path": label, "used": False, "reason": str(exc)})
        return None
    if not len(launches):
        report.captures.append({"path": label, "used": False, "reason": "no launches recorded while capturing"})
        return None
    return launches


def replay_groups(eff) -> Dict[int, np.ndarray]:
    """Activity rows of each graph launch (by its correlation id), in capture order: by Kineto's `graph node id`
    where every row of the launch has one (CUPTI numbers a graph's nodes as they are created, i.e. in the order
    the capture recorded them, whatever streams replay them on), else in time order."""
    trace, acts = eff.trace, eff.activities
    corr = np.concatenate([trace.kernels["correlation"], trace.memops["correlation"]])
    rows = np.flatnonzero(acts["graph"])
    rows = rows[np.lexsort((acts["ts"][rows], corr[rows]))]
    keys, starts = np.unique(corr[rows], return_index=True)
    node = graph_nodes(trace)
    groups = {}
    for k, part in zip(keys.tolist(), np.split(rows, starts[1:])):
        ids = node[part]
        groups[int(k)] = part[np.argsort(ids, kind="stable")] if len(ids) and (ids >= 0).all() else part
    return groups


def graph_nodes(trace: KinetoTrace) -> np.ndarray:
    """Per activity (kernels, then memops): the kernel's `graph node id`, -1 where not recorded."""
    kernels = trace.kernels
    node = kernels["graph_node"] if "graph_node" in kernels else np.full(len(kernels), -1, dtype=np.int64)
    return np.concatenate([node.astype(np.int64), np.full(len(trace.memops), -1, dtype=np.int64)])


def _signatures(acts: Table, groups: Dict[int, np.ndarray]) -> Dict[Tuple, List[np.ndarray]]:
    """Graph launches by what they replayed: ((tokens), (grids)) -> the activity rows of each such launch."""
    kinds, names, grids = acts.strings["kind"], acts.strings["name"], acts.strings.get("grid", [])
    out: Dict[Tuple, List[np.ndarray]] = {}
    for rows in groups.values():
        tokens = tuple(names[acts["name"][r]] if kinds[acts["kind"][r]] == "kernel" else
                       (_MEMSET if kinds[acts["kind"][r]] == _MEMSET else _MEMCPY) for r in rows.tolist())
        grid = tuple(_grid(grids[g]) if g >= 0 and grids else None for g in acts["grid"][rows].tolist())
        out.setdefault((tokens, grid), []).append(rows)
    return out


def _grid(value: Any) -> Optional[Tuple[int, ...]]:
    """A launch grid as a tuple of ints, from the reader's text ("[4, 1, 1]") or a decoded arg ([4, 1, 1])."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value if isinstance(v, (int, float)))
    if isinstance(value, (str, bytes)):
        digits = re.findall(r"\d+", value.decode() if isinstance(value, bytes) else value)
        return tuple(int(d) for d in digits) or None
    return None


@dataclass
class _Choice:
    """The best capture segment found for one replayed graph so far."""
    score: Tuple[int, int]  # (kernels paired, of those with the same launch grid)
    replay: np.ndarray  # positions in the replayed sequence
    capture: np.ndarray  # their capture launches (positions in CaptureLaunches)
    source: int  # which loaded capture
    comparable: int  # paired kernels whose grid both sides record

    def whole(self, n: int) -> bool:
        """Every kernel paired, and every grid that can be compared the same: no later capture can do better."""
        return self.score == (n, self.comparable)


def _best_segment(sig: Tuple, launches: CaptureLaunches, source: int) -> Optional[_Choice]:
    """The segment of a capture that pairs most of a replayed graph's kernels (then most launch grids), or None
    when none pairs at least MIN_PAIRED of them."""
    tokens, grids = sig
    best: Optional[_Choice] = None
    for seg in launches.segments():
        pairs = align([launches.tokens[i] for i in seg.tolist()], tokens)
        if not pairs or len(pairs) < MIN_PAIRED * len(tokens):
            continue
        a = seg[np.array([p[0] for p in pairs], dtype=np.int64)]
        b = np.array([p[1] for p in pairs], dtype=np.int64)
        both = [(launches.grids[i], grids[j]) for i, j in zip(a.tolist(), b.tolist())
                if launches.grids[i] is not None and grids[j] is not None]
        choice = _Choice((len(pairs), sum(g == h for g, h in both)), b, a, source, len(both))
        if best is None or choice.score > best.score:
            best = choice
    return best


def _synthetic_trace(replay: KinetoTrace, launches: CaptureLaunches,
                     pairs: List[Tuple[np.ndarray, np.ndarray]]) -> Tuple[KinetoTrace, np.ndarray, np.ndarray]:
    """A trace whose ops are copies of the capture's (one set per graph launch, shifted apart in time) and whose
    activities are the paired replayed ones, linked to those copies by External id. Returns it, the replay's
    activity rows in the synthetic trace's activity order (kernels, then memops) and each synthetic op's row in
    the capture trace."""
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
    return syn, np.concatenate([rows[is_kernel], rows[~is_kernel]]), op_rows_a


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
        self.captured_op = np.full(len(acts), NO_OP, dtype=np.int64)

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
    from ...loading import companion_execution_traces, load
    from ..enrich import enrich

    trace = load(path, extra_args=CAPTURE_ARGS)
    enrich(trace, companion_execution_traces(os.fspath(path)))
    return trace


__all__ = ["CAPTURE_ARGS", "FROM_CAPTURE", "CaptureLaunches", "MergeReport", "capture_launches", "align",
           "merge_captures", "with_captures", "replay_groups", "load_capture"]
