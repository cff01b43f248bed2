"""Collective communication in one trace: every collective instance with its kind, size, process group, step and
time, and the bus-bandwidth arithmetic of NCCL-tests that rates it against the interconnect.

Where a collective is seen, by trace kind:
- GPU traces: each NCCL/RCCL kernel (`ncclKernel_*`, `ncclDevKernel_*`) is one instance (its time is the kernel's).
  What it is comes from the kernel's own collective args (newer Kineto), else from the markers around the CPU op that
  launched it on the same thread: `record_param_comms` with its args (`Collective name`, `In/Out msg nelems`,
  `dtype`, `Group size`, `Process Group Name`...), the `nccl:<collective>` annotation (its `Input Dims` / `Input
  type` give the size) and the `c10d::<collective>` op; else from the kernel name (`AllReduce`, `SendRecv`...).
- CPU (gloo) traces: each `gloo:<collective>` annotation is one instance: gloo runs the collective, waits included,
  on its worker thread under that annotation.

Bus bandwidth (NCCL-tests, doc/PERFORMANCE.md): algbw = S / t, busbw = algbw x factor(n), where S and the factor
depend on the collective (n = ranks in the group):
    all_reduce      S = buffer bytes                     factor 2(n-1)/n
    all_gather      S = gathered (output) bytes          factor (n-1)/n
    reduce_scatter  S = input bytes (all shards)         factor (n-1)/n
    all_to_all      S = bytes each rank sends in total   factor (n-1)/n
    broadcast, reduce, send, recv: S = buffer bytes       factor 1
busbw is the per-link figure that does not depend on n, so it compares with the link's bandwidth in one direction.
When only the input tensor is known (an `nccl:` annotation), all_gather's S is n x input bytes.
"""
from __future__ import annotations

import bisect
import functools
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...estimate.dtypes import itemsize
from ...trace.table import Interner, Table
from ..kernels.names import classify

if TYPE_CHECKING:  # pragma: no cover
    from ...sections import Section, SectionContext
    from ...trace.kineto import KinetoTrace

COMM_KERNEL = re.compile(r"^(nccl|rccl)(Dev)?Kernel|^ncclKernel|^rccl", re.IGNORECASE)
_MARKER_PREFIX = re.compile(r"^(nccl|gloo|rccl|mpi|ucc):", re.IGNORECASE)
_C10D = re.compile(r"^c10d::")
_KERNEL_KIND = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)",
                          re.IGNORECASE)
_ALGO = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)",
                   re.IGNORECASE)
# Canonical kinds by prefix, compared after lower-casing and dropping '_' (so "allgather", "_all_gather_base",
# "allgather_into_tensor_coalesced" agree); longer words first where one starts another (reducescatter, reduce).
_KINDS = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
          ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("sendrecv", "send_recv"), ("reduce", "reduce"),
          ("barrier", "barrier"), ("gather", "gather"), ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))


@functools.lru_cache(maxsize=4096)  # thousands of collectives share a few names
def canonical_kind(name: str) -> str:
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send, recv, send_recv, barrier,
    gather, scatter, or '' for a name that is no collective."""
    low = _MARKER_PREFIX.sub("", _C10D.sub("", name.strip())).lower().replace("_", "")
    for word, kind in _KINDS:
        if low.startswith(word):
            return kind
    return ""


@functools.lru_cache(maxsize=4096)
def kernel_kind(kernel_name: str) -> str:
    """The collective a NCCL/RCCL kernel name spells (ncclKernel_AllReduce_RING_LL_Sum_float -> all_reduce)."""
    m = _KERNEL_KIND.search(kernel_name)
    return canonical_kind(m.group(1)) if m else ""


@functools.lru_cache(maxsize=4096)
def kernel_algorithm(kernel_name: str) -> str:
    """NCCL algorithm and protocol from a kernel name ("RING LL"), or ''."""
    m = _ALGO.search(kernel_name)
    return f"{m.group(1).upper()} {m.group(2).upper()}" if m else ""


def busbw_factor(kind: str, n: int) -> float:
    """NCCL-tests bus-bandwidth factor for a collective over n ranks (NaN when unknown or n < 1)."""
    if n is None or n < 1:
        return float("nan")
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    if kind in ("broadcast", "reduce", "send", "recv", "send_recv"):
        return 1.0
    return float("nan")


def algbw_bytes(kind: str, in_bytes: float, out_bytes: float, n: int) -> float:
    """S of NCCL-tests for one collective: the bytes its algbw divides by time (NaN when unknown)."""
    known_out = out_bytes == out_bytes and out_bytes > 0
    if kind == "all_gather":
        return out_bytes if known_out else in_bytes * n if n and n > 0 else float("nan")
    if kind == "reduce_scatter":
        return in_bytes if in_bytes == in_bytes else out_bytes * n if n and n > 0 else float("nan")
    if kind in ("barrier", ""):
        return float("nan")
    return in_bytes if in_bytes == in_bytes else out_bytes


# ---------------------------------------------------------------------------------------------- extraction

_RECORD = ("kind", "source", "ts", "dur", "in_bytes", "out_bytes", "group_size", "pg", "seq", "step", "algo",
           "dtype", "stream", "activity")


class _Marker:
    """What the CPU side says of one collective: kind, sizes, dtype, group, sequence."""
    __slots__ = ("kind", "in_nelems", "out_nelems", "itemsize", "dtype", "group_size", "pg", "seq")

    def __init__(self) -> None:
        self.kind = ""
        self.in_nelems = self.out_nelems = float("nan")
        self.itemsize = None
        self.dtype = ""
        self.group_size = -1
        self.pg = ""
        self.seq = -1

    def update_args(self, args: Dict[str, Any]) -> None:
        """Fill from collective args (record_param_comms or the kernel's own)."""
        self.kind = self.kind or canonical_kind(str(args.get("Collective name", "")))
        self.in_nelems = _number(args.get("In msg nelems"), self.in_nelems)
        self.out_nelems = _number(args.get("Out msg nelems"), self.out_nelems)
        if args.get("dtype") and not self.dtype:
            self.dtype = str(args["dtype"])
            self.itemsize = itemsize(self.dtype) or itemsize(self.dtype.lower())
        group = _number(args.get("Group size"), float("nan"))
        if group == group and self.group_size < 0:
            self.group_size = int(group)
        for key in ("Process Group Name", "Process Group ID"):
            if args.get(key) not in (None, "") and not self.pg:
                self.pg = str(args[key])
        seq = _number(args.get("Seq"), float("nan"))
        if seq == seq and self.seq < 0:
            self.seq = int(seq)

    def update_shape(self, dims: Any, types: Any) -> None:
        """Fill the input size from an annotation's first tensor (Input Dims / Input type)."""
        if self.in_nelems == self.in_nelems or not dims or not isinstance(dims, list):
            return
        first, dtype = dims[0], (types[0] if isinstance(types, list) and types else None)
        if isinstance(first, list) and first and all(isinstance(d, int) for d in first) and dtype:
            self.in_nelems = float(np.prod(first))
            self.dtype = self.dtype or str(dtype)
            self.itemsize = self.itemsize or itemsize(str(dtype))


def _number(value: Any, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if np.isfinite(out) else default


# A marker on a thread: (ts, end, table, row, name, comm code, shape code), plain Python values.
_Item = Tuple[float, float, str, int, str, int, int]


def _items(table: Table, table_name: str, rows: np.ndarray) -> List[_Item]:
    """The marker tuples of `rows` of `table`, read column by column (not one numpy scalar at a time)."""
    names = table.strings["name"]
    ts = table["ts"][rows].tolist()
    ends = (table["ts"][rows] + table["dur"][rows]).tolist()
    return [(t, e, table_name, r, names[n], c, sh) for t, e, r, n, c, sh in
            zip(ts, ends, rows.tolist(), table["name"][rows].tolist(), table["comm"][rows].tolist(),
                table["shape"][rows].tolist())]


def _markers_by_thread(trace: "KinetoTrace") -> Dict[Tuple[str, str], List[_Item]]:
    """Per (pid, tid) text pair: collective markers sorted by start."""
    out: Dict[Tuple[str, str], List[_Item]] = {}
    for table_name in ("ops", "annotations"):
        table: Table = getattr(trace, table_name)
        if not len(table):
            continue
        names = table.strings["name"]
        wanted = np.array([bool(_MARKER_PREFIX.match(n) or _C10D.match(n) or n == "record_param_comms")
                           for n in names], dtype=bool)
        rows = np.flatnonzero(wanted[table["name"]] | (table["comm"] >= 0))
        pids, tids = table.strings["pid"], table.strings["tid"]
        for item, pid, tid in zip(_items(table, table_name, rows), table["pid"][rows].tolist(),
                                  table["tid"][rows].tolist()):
            out.setdefault((pids[pid], tids[tid]), []).append(item)
    for items in out.values():
        items.sort(key=lambda item: item[:4])
    return out


def _marker_at(trace: "KinetoTrace", markers, key, start: float, stop: float) -> _Marker:
    """Combine every marker on thread `key` that overlaps [start, stop] (the launching op: a c10d:: op around a
    record_param_comms around an nccl: annotation), innermost first."""
    marker = _Marker()
    items = markers.get(key, [])
    hi = bisect.bisect_right(items, (stop, float("inf")))
    for item in reversed(items[max(0, hi - 16):hi]):  # markers nest a few deep at most
        if item[1] < start:
            continue
        _absorb(trace, marker, item)
    return marker


def _absorb(trace: "KinetoTrace", marker: _Marker, item: _Item) -> None:
    _, _, table_name, _, name, comm, shape = item
    if comm >= 0:
        marker.update_args(trace.comm(comm))
    if name != "record_param_comms":
        marker.kind = marker.kind or canonical_kind(name)
    if shape >= 0 and table_name == "annotations":
        dims, types, _ = trace.shape(shape)
        marker.update_shape(dims, types)


def extract(trace: "KinetoTrace", kernel_ops: Optional[np.ndarray] = None) -> Tuple[Table, Dict[str, Any]]:
    """Every collective instance of a trace as a table (see `_RECORD`), plus what kind of trace it was.

    `kernel_ops`: the launching op row of every kernel (from the efficiency analysis); needed to read the CPU
    markers of GPU collectives (kernel names alone give kind and algorithm, not size)."""
    kernels = trace.kernels
    names = kernels.strings.get("name", [])
    is_comm_name = np.array([bool(COMM_KERNEL.search(n)) or _communication_family(n) is not None for n in names],
                            dtype=bool)
    comm_rows = np.flatnonzero(is_comm_name[kernels["name"]]) if len(kernels) and len(names) else np.empty(0, int)
    markers = _markers_by_thread(trace)
    if len(comm_rows):
        return _from_kernels(trace, comm_rows, kernel_ops, markers), {"source": "kernel"}
    return _from_annotations(trace, markers), {"source": "cpu"}


def _new_columns() -> Dict[str, list]:
    return {k: [] for k in _RECORD}


def _from_kernels(trace: "KinetoTrace", rows: np.ndarray, kernel_ops: Optional[np.ndarray], markers) -> Table:
    k, ops = trace.kernels, trace.ops
    cols = _new_columns()
    kinds, pgs, algos, dtypes = Interner(), Interner(), Interner(), Interner()
    names = k.strings["name"]
    ops_of = (np.where(rows < len(kernel_ops), kernel_ops[np.clip(rows, 0, max(len(kernel_ops) - 1, 0))], -1)
              if kernel_ops is not None and len(kernel_ops) else np.full(len(rows), -1)).astype(np.int64)
    launched = ops_of[ops_of >= 0]  # the launching ops' threads and spans, read once
    threads = dict(zip(launched.tolist(), zip((ops.strings["pid"][p] for p in ops["pid"][launched].tolist()),
                                              (ops.strings["tid"][t] for t in ops["tid"][launched].tolist()),
                                              ops["ts"][launched].tolist(),
                                              (ops["ts"][launched] + ops["dur"][launched]).tolist())))
    for r, comm, op, name, ts, dur, stream in zip(
            rows.tolist(), k["comm"][rows].tolist(), ops_of.tolist(), k["name"][rows].tolist(),
            k["ts"][rows].tolist(), k["dur"][rows].tolist(), k["stream"][rows].tolist()):
        marker = _Marker()
        if comm >= 0:
            marker.update_args(trace.comm(comm))
        if op >= 0:
            pid, tid, start, end = threads[op]
            _merge(marker, _marker_at(trace, markers, (pid, tid), start, end))
        name = names[name]
        if not COMM_KERNEL.search(name):  # symmetric-memory, custom all-reduce, DeepEP: no NCCL markers
            _family_marker(trace, marker, name, op)
        marker.kind = marker.kind or kernel_kind(name)
        algo = kernel_algorithm(name) or ("" if COMM_KERNEL.search(name) else classify(name).family)  # its family
        _append(cols, marker, ts, dur, kinds, pgs, dtypes, algo=algos.code(algo), stream=stream, activity=r,
                source=1)
    return _finish(cols, kinds, pgs, algos, dtypes)


# Collectives of the kernel families outside NCCL, by the words of their names (`_` dropped, lower case).
_FAMILY_KINDS = (("allreduce", "all_reduce"), ("crossdevicereduce", "all_reduce"), ("allgather", "all_gather"),
                 ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all"), ("dispatch", "all_to_all"),
                 ("combine", "all_to_all"))


def _family_marker(trace: "KinetoTrace", marker: _Marker, name: str, op: int) -> None:
    """A communication kernel of another family (symmetric memory / multimem, vLLM / SGLang custom all-reduce,
    DeepEP dispatch and combine): its kind from its name, else its launching op's (`vllm::all_reduce`); its size
    from the launching op's first tensor (an all-reduce's buffer; an all-gather's input), when recorded."""
    low = name.lower().replace("_", "")
    marker.kind = marker.kind or next((kind for word, kind in _FAMILY_KINDS if word in low), "")
    if op < 0:
        return
    ops = trace.ops
    op_name = ops.strings["name"][ops["name"][op]]
    if not marker.kind:
        kind = canonical_kind(op_name.rsplit("::", 1)[-1])
        marker.kind = kind if kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") else ""
    if ops["shape"][op] >= 0:
        dims, types, _ = trace.shape(int(ops["shape"][op]))
        marker.update_shape(dims, types)


def _from_annotations(trace: "KinetoTrace", markers) -> Table:
    """CPU collectives: gloo:/nccl: annotations (outermost per thread and time), with the markers they enclose."""
    ann = trace.annotations
    cols = _new_columns()
    kinds, pgs, algos, dtypes = Interner(), Interner(), Interner(), Interner()
    algos.code("")
    if len(ann):
        names = ann.strings["name"]
        is_marker = np.array([bool(_MARKER_PREFIX.match(n)) for n in names], dtype=bool)
        rows = np.flatnonzero(is_marker[ann["name"]])
        pids, tids = ann.strings["pid"], ann.strings["tid"]
        for item, dur, pid, tid in zip(_items(ann, "annotations", rows), ann["dur"][rows].tolist(),
                                       ann["pid"][rows].tolist(), ann["tid"][rows].tolist()):
            marker = _Marker()
            _absorb(trace, marker, item)
            ts = item[0]
            _merge(marker, _marker_at(trace, markers, (pids[pid], tids[tid]), ts, ts + dur))
            if marker.kind:
                _append(cols, marker, ts, dur, kinds, pgs, dtypes, algo=0, stream=-1, activity=-1, source=0)
    return _finish(cols, kinds, pgs, algos, dtypes)


def _merge(into: _Marker, other: _Marker) -> None:
    for slot in _Marker.__slots__:
        mine, theirs = getattr(into, slot), getattr(other, slot)
        empty = mine in ("", None, -1) or (isinstance(mine, float) and mine != mine)
        if empty:
            setattr(into, slot, theirs)


def _append(cols, m: _Marker, ts: float, dur: float, kinds, pgs, dtypes, algo: int, stream: int, activity: int,
            source: int) -> None:
    size = float(m.itemsize) if m.itemsize else float("nan")
    cols["kind"].append(kinds.code(m.kind or "unknown"))
    cols["source"].append(source)
    cols["ts"].append(ts)
    cols["dur"].append(dur)
    cols["in_bytes"].append(m.in_nelems * size)
    cols["out_bytes"].append(m.out_nelems * size)
    cols["group_size"].append(m.group_size)
    cols["pg"].append(pgs.code(m.pg))
    cols["seq"].append(m.seq)
    cols["step"].append(-1)
    cols["algo"].append(algo)
    cols["dtype"].append(dtypes.code(m.dtype))
    cols["stream"].append(stream)
    cols["activity"].append(activity)


_FLOAT_COLS = {"ts", "dur", "in_bytes", "out_bytes"}


def _finish(cols, kinds: Interner, pgs: Interner, algos: Interner, dtypes: Interner) -> Table:
    arrays = {k: np.asarray(v, dtype=np.float64 if k in _FLOAT_COLS else np.int64) for k, v in cols.items()}
    order = np.argsort(arrays["ts"], kind="stable")
    arrays = {k: v[order] for k, v in arrays.items()}
    return Table("collectives", arrays, {"kind": kinds.items, "pg": pgs.items, "algo": algos.items,
                                         "dtype": dtypes.items})


# ---------------------------------------------------------------------------------------------- rating hook

COMMUNICATION = "communication"


def activity_columns(trace: "KinetoTrace", acts: Table) -> Dict[str, np.ndarray]:
    """For the kernel table: NCCL-tests S (bytes) and the busbw factor of every communication kernel (NaN for
    the other activities), so that rating needs no trace."""
    n = len(acts)
    size, factor = np.full(n, np.nan), np.full(n, np.nan)
    if not n:
        return {"comm_bytes": size, "comm_factor": factor}
    try:
        table, _ = extract(trace, acts["op"][:len(trace.kernels)])
    except Exception:  # sizes are an extra for the kernel table: a surprise here must not cost the whole analysis
        return {"comm_bytes": size, "comm_factor": factor}
    world = _world_size(trace)
    kinds = table.strings["kind"]
    for row, kind, group, in_bytes, out_bytes in zip(*(table[c].tolist() for c in (
            "activity", "kind", "group_size", "in_bytes", "out_bytes"))):
        if row < 0:
            continue
        group = group if group > 0 else world
        size[row] = algbw_bytes(kinds[kind], in_bytes, out_bytes, group)
        factor[row] = busbw_factor(kinds[kind], group)
    return {"comm_bytes": size, "comm_factor": factor}


def _world_size(trace: "KinetoTrace") -> int:
    info = trace.meta.distributed or {}
    try:
        return int(info.get("world_size", 0)) or 0
    except (TypeError, ValueError):
        return 0


def is_communication(acts: Table) -> np.ndarray:
    """Rows of the activity table that are communication kernels: NCCL/RCCL, and every family the kernel-class
    registry names communication (DeepEP dispatch/combine/notify, NVSHMEM, symmetric-memory and custom
    all-reduce kernels)."""
    names = acts.strings.get("name", [])
    if not len(acts) or not names:
        return np.zeros(len(acts), dtype=bool)
    flag = np.array([bool(COMM_KERNEL.search(n)) or _communication_family(n) is not None for n in names],
                    dtype=bool)
    kernel_code = acts.strings["kind"].index("kernel") if "kernel" in acts.strings["kind"] else -1
    return flag[acts["name"]] & (acts["kind"] == kernel_code)


def communication_links(acts: Table) -> np.ndarray:
    """Per row: "internode" / "intranode" where a communication kernel's name says which, else ""."""
    names = acts.strings.get("name", [])
    links = np.array([(_communication_family(n) or "") for n in names] + [""], dtype=object)
    return links[acts["name"]] if len(acts) else np.empty(0, dtype=object)


def _communication_family(name: str) -> Optional[str]:
    """The link a communication kernel's name states ("" when it does not say); None when not communication."""
    match = classify(name)
    return (match.link or "") if match.klass == "communication" else None


def rate_communication(acts: Table, devices: Dict[int, Any]) -> None:
    """Rate communication kernels against the interconnect: achieved busbw (in `gbps`) over the link's per-direction
    bandwidth (in `efficiency`), bound "communication". The kernel's time includes waiting for its peers, so this
    is a lower bound; the Distributed view separates wait from transfer. `devices`: efficiency's DeviceReports."""
    comm = is_communication(acts)
    link_gbps = np.full(len(acts), np.nan)
    for dev, report in devices.items():
        link = getattr(report.match.spec, "interconnect", None) if report.match.spec is not None else None
        if link:
            link_gbps[acts["device"] == dev] = link["per_direction_gbps"]
    if "communication" not in acts.strings["bound"]:
        acts.strings["bound"] = list(acts.strings["bound"]) + [COMMUNICATION]
    code = acts.strings["bound"].index(COMMUNICATION)
    if not comm.any():
        return
    size = acts.columns.get("comm_bytes", np.full(len(acts), np.nan))
    factor = acts.columns.get("comm_factor", np.full(len(acts), np.nan))
    with np.errstate(invalid="ignore", divide="ignore"):
        busbw = size * factor / (acts["dur"] * 1e-6) / 1e9
        eff = busbw / link_gbps
    acts["bound"][comm] = code
    acts["gbps"][comm] = busbw[comm]
    acts["efficiency"][comm] = eff[comm]
    acts["pct_dram"][comm] = np.nan
    if "link_gbps" not in acts.columns:
        acts.columns["link_gbps"] = np.full(len(acts), np.nan)
    acts["link_gbps"][comm] = link_gbps[comm]


def mark_communication_groups(acts: Table, inverse: np.ndarray, first: np.ndarray, bound: np.ndarray,
                              out: Dict[str, np.ndarray]) -> None:
    """Grouped rows of communication kernels: bound "communication", GB/s = the group's busbw (busbw bytes over
    kernel time, summed), no DRAM share."""
    if COMMUNICATION not in acts.strings.get("bound", []) or not len(first):
        return
    moved, busy = communication_sums(acts, inverse, len(first))
    mark_communication_rows(is_communication(acts)[first], acts.strings["bound"].index(COMMUNICATION), moved, busy,
                            bound, out)


def communication_sums(acts: Table, inverse: np.ndarray, g: int) -> Tuple[np.ndarray, np.ndarray]:
    """Per group, the busbw bytes its communication kernels moved and their time (those of a known size)."""
    size = acts.columns.get("comm_bytes", np.full(len(acts), np.nan)) * \
        acts.columns.get("comm_factor", np.full(len(acts), np.nan))
    known = is_communication(acts) & np.isfinite(size)
    moved = np.bincount(inverse, weights=np.where(known, size, 0), minlength=g)
    busy = np.bincount(inverse, weights=np.where(known, acts["dur"], 0), minlength=g)
    return moved, busy


def mark_communication_rows(groups: np.ndarray, code: int, moved: np.ndarray, busy: np.ndarray, bound: np.ndarray,
                            out: Dict[str, np.ndarray]) -> None:
    """Mark the `groups` (a mask) of a grouped table as communication (`code` in its bound strings)."""
    bound[groups] = code
    with np.errstate(invalid="ignore", divide="ignore"):
        out["gbps"][groups] = np.where(busy > 0, moved / (busy * 1e-6) / 1e9, np.nan)[groups]
    out["pct_dram"][groups] = np.nan


# ---------------------------------------------------------------------------------------------- section

def interconnect_gbps(props: Dict[str, Any], datasheet=None) -> Tuple[Optional[float], str]:
    """Per-direction link bandwidth (GB/s) of a trace device and its description, from the datasheet."""
    from ...estimate.devices import match_device
    match = match_device(props, datasheet)
    link = getattr(match.spec, "interconnect", None) if match.spec is not None else None
    if not link:
        return None, "unknown: no interconnect figure for this device in the datasheet"
    return link["per_direction_gbps"], (f"{link['link']}: {link['gbps']:g} GB/s {link['as']}, rated against "
                                        f"{link['per_direction_gbps']:g} GB/s one way ({match.spec.name})")


def pack(table: Table) -> np.ndarray:
    """The records as one float64 matrix, columns in `_RECORD` order (one stored array per trace, not fourteen:
    each array of a summary costs a header to read, and a run of a thousand ranks reads a thousand summaries)."""
    return np.stack([table[k].astype(np.float64) for k in _RECORD], axis=1) if len(table) else \
        np.empty((0, len(_RECORD)))


def unpack(matrix: np.ndarray, strings: Dict[str, List[str]]) -> Table:
    """The records table back from `pack`'s matrix and the interned strings."""
    matrix = matrix.reshape(-1, len(_RECORD))
    cols = {k: matrix[:, i] if k in _FLOAT_COLS else matrix[:, i].astype(np.int64) for i, k in enumerate(_RECORD)}
    return Table("collectives", cols, dict(strings))


__all__ = ["canonical_kind", "kernel_kind", "kernel_algorithm", "busbw_factor", "algbw_bytes", "extract",
           "activity_columns", "rate_communication", "interconnect_gbps", "COMM_KERNEL"]
