"""Routes of the Kernel efficiency tab: devices, the kernel table, roofline points, a kernel's launching ops."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ..analysis.ranks import report as rk
from ..analysis.kernels.efficiency import AUTO, DeviceReport, Efficiency, aggregate
from ..analysis.kernels.grouping import device_summary
from ..analysis.ranks.device_parts import device_ranks, device_reports
from ..analysis.kernels.names import display_name
from ..analysis.kernels.rows import SORTABLE, group_rows, name_filter, sort_order
from ..estimate.devices import DTYPES, DeviceSpec, device_hint
from ..service import ALL_WORKERS, NotReady
from ..trace.table import unique_rows
from . import params
from .ranks import all_ranks_table, span_ranks

MAX_LIMIT = 5000


def routes(plugin) -> Dict[str, Callable]:
    return {
        "/devices": lambda req: devices_route(plugin, req),
        "/kernels": lambda req: kernels_route(plugin, req),
        "/roofline": lambda req: roofline_route(plugin, req),
        "/kernel_ops": lambda req: kernel_ops(plugin.analysis(req), req),
    }


def indexed(plugin, request) -> bool:
    """Whether the run's rank index answers this request: an "All ranks" selection rated as the datasheet says
    (no forced dtype or device), over the whole trace; any other comes from the selection's analysis."""
    return params.selection(request)[1] == ALL_WORKERS and time_window(request) is None and \
        params.choice(request, "dtype", (AUTO,) + tuple(DTYPES), AUTO) == AUTO and \
        params.device_name(request, plugin.service.datasheet()) is None


def devices_route(plugin, request) -> Dict[str, Any]:
    """/devices: for an indexed "All ranks" selection, the cards from the rank index (no span's analysis loaded)."""
    datasheet = plugin.service.datasheet()
    if indexed(plugin, request):
        card = all_ranks_table(plugin, request, "cards")[0]
        # the cards of the selection's table: every rank's GPU together, beside each GPU's own
        return {**device_answer(device_reports(card, datasheet), card["kernels"], datasheet),
                "all_ranks": card["summaries"].get("all"), "device_ranks": card.get("ranks", {})}
    return devices(plugin.analysis(request), datasheet, span_ranks(plugin, request))


def _all_ranks_summary(eff: Efficiency) -> Optional[Dict[str, Any]]:
    """As the index's "all" card (`device_parts.cards`): every GPU of every span together, busy time summed (None
    for one GPU of one span: its card is the whole)."""
    acts = eff.activities
    spans = len(np.unique(acts["span"])) if "span" in acts else min(len(acts), 1)
    if len(np.unique(acts["device"])) < 2 and spans < 2:  # as the index: GPUs or spans that ran something
        return None
    whole = device_summary(eff.activities)
    whole["gpu_busy_us"] = sum(d.summary["gpu_busy_us"] for d in eff.devices.values() if d.summary)
    return whole


def devices(eff: Efficiency, datasheet: Sequence[DeviceSpec] = (),
            span_rank: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """Device reports of an analysis, plus what the device picker needs (`device_answer`); given the rank of each
    span of an All-ranks analysis, per GPU the ranks its card adds up (`device_ranks`)."""
    acts = eff.activities
    kernels = [n for n, k in zip(acts.strings["name"], _kinds_of_names(eff)) if k]
    ranks = device_ranks(acts["device"], acts["span"], span_rank) if "span" in acts else {}
    return {**device_answer(eff.devices, kernels, datasheet), "all_ranks": _all_ranks_summary(eff),
            "device_ranks": ranks}


def device_answer(reports: Dict[int, DeviceReport], kernels: List[str],
                  datasheet: Sequence[DeviceSpec] = ()) -> Dict[str, Any]:
    """Device reports, plus what the device picker needs: the datasheet's rows, whether a device is unknown or
    only matched from its properties, the name being generic or absent (`needs_pick`), the row the kernel names
    (`kernels`, the names kernels carry) point to (`hint`)."""
    return {"devices": [d.to_dict() for d in reports.values()], "dtypes": list(DTYPES),
            "datasheet": [spec.name for spec in datasheet],
            "needs_pick": any(d.match.method != "name" for d in reports.values()),
            "hint": device_hint(kernels, datasheet, display_name,
                                matched=[d.match.spec.name for d in reports.values() if d.match.spec is not None])
            if datasheet else None}


def _kinds_of_names(eff: Efficiency) -> List[bool]:
    """Per name code: whether any kernel (not memcpy/memset) carries it."""
    acts = eff.activities
    kinds = acts.strings["kind"]
    is_kernel = np.array([k == "kernel" for k in kinds], dtype=bool)[acts["kind"]] if len(acts) else np.zeros(0, bool)
    out = np.zeros(len(acts.strings["name"]), dtype=bool)
    out[acts["name"][is_kernel]] = True
    return out.tolist()


def kernels_route(plugin, request) -> Dict[str, Any]:
    """/kernels: an "All ranks" selection rated as the datasheet says, over the whole trace, comes from the run's
    rank index (`all_ranks_table`: no span's analysis loaded); any other from the selection's analysis."""
    group = params.choice(request, "group", ("name", "op"), "name")
    if indexed(plugin, request):
        table, ranks = all_ranks_table(plugin, request, group)
        return table_page(table, request, AUTO, group, ranks)
    return kernels(plugin.analysis(request), request, span_ranks(plugin, request))


def kernels(eff: Efficiency, request, span_rank: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """A page of the grouped kernel table, filtered and sorted on the server. `span_rank` (an "All ranks"
    selection): one row per kernel over every rank's GPU, with its spread over the ranks (`SPREAD_COLUMNS`)."""
    device = params.device(request)
    group = params.choice(request, "group", ("name", "op"), "name")
    window = time_window(request)
    if span_rank is not None:  # all ranks: the device cards keep their own figures, the table spans every GPU
        acts = eff.activities
        last_span = int(acts["span"].max()) if len(acts) and "span" in acts else 0  # one span: not combined
        if len(acts) and last_span >= len(span_rank):  # a rank became ready in between: ask again
            raise NotReady("the ranks of this selection changed while it was read")
        in_window = acts if window is None else acts.take((acts["ts"] >= window[0]) & (acts["ts"] < window[1]))
        table = rk.across_ranks(in_window, span_rank, rk.KERNEL_KEYS[group])
    elif window is None:
        table = eff.by_name(device) if group == "name" else eff.by_op(device)
    else:  # one step of the Overview: activities that start in [t0, t1) of the trace's time
        acts = eff.activities
        mask = (acts["ts"] >= window[0]) & (acts["ts"] < window[1])
        if device is not None:
            mask &= acts["device"] == device
        table = aggregate(acts.take(mask), ("device", "kind", "name") if group == "name" else
                          ("device", "op_name", "kind", "name"))
    ranks = int(span_rank.max()) + 1 if span_rank is not None else None
    return table_page(table, request, eff.dtype, group, ranks)


def table_page(table, request, dtype: str, group: str, rank_count: Optional[int] = None) -> Dict[str, Any]:
    """One page of a grouped kernel table, filtered and sorted as the request asks; `rank_count` for an
    All-ranks table (its rows carry their spread over the ranks)."""
    mask = name_filter(table, params.text(request, "filter", default=""))
    key = params.key(request, "name_key")  # one kernel by its key: names can be any length
    if key:
        hits = np.array([params.name_key(n) == key for n in table.strings["name"]] + [False], dtype=bool)
        mask &= hits[table["name"]]  # a missing name (-1) picks the trailing False
    op = params.text(request, "op", default="")
    if op and "op_name" in table:
        mask &= name_filter(table, op, column="op_name")
    spread = rk.SPREAD_COLUMNS if rank_count is not None else ()
    sort = params.choice(request, "sort", sorted(SORTABLE) + list(spread), "total_us")
    descending = params.choice(request, "order", ("desc", "asc"), "desc") == "desc"
    order = sort_order(table, sort, descending)
    order = order[mask[order]]
    offset = params.integer(request, "offset", 0, 0, 10 ** 9)
    limit = params.integer(request, "limit", 200, 1, MAX_LIMIT)
    page = order[offset: offset + limit].tolist()
    rows = rk.kernel_rows(table, page) if spread else group_rows(table, page)
    for row in rows:  # what /kernel_ops takes back: names can be any length, the key is 16 characters
        row["name_key"] = params.name_key(row["name"])
    return {"total": int(len(order)), "dtype": dtype, "group": group, "rows": rows, "rank_count": rank_count}


def time_window(request) -> Optional[tuple]:
    """Optional `t0`/`t1` (trace microseconds, both or neither): a step's time range."""
    t0, t1 = params.text(request, "t0"), params.text(request, "t1")
    if not t0 and not t1:
        return None
    try:
        lo, hi = float(t0), float(t1)
    except ValueError:
        raise params.BadRequest("parameters 't0' and 't1' must both be numbers") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise params.BadRequest("parameter 't0' must be below 't1'")
    return lo, hi


def roofline_route(plugin, request) -> Dict[str, Any]:
    """/roofline: for an indexed "All ranks" selection, the points and roofs from the rank index."""
    device = params.device(request)
    if not indexed(plugin, request):
        return roofline(plugin.analysis(request), device)
    table = all_ranks_table(plugin, request, "device")[0]
    reports = device_reports(all_ranks_table(plugin, request, "cards")[0], plugin.service.datasheet())
    rows = group_rows(table, None if device is None else np.flatnonzero(table["device"] == device).tolist())
    return roofline_points(rows, reports, AUTO, device)


def roofline(eff: Efficiency, device: Optional[int]) -> Dict[str, Any]:
    """Roofs for the chosen dtype and one point per kernel name with both a FLOP and a byte estimate; a point whose
    figures are over the physical roof says so (`over_roof`, `roof_cause`) and is drawn as a warning."""
    return roofline_points(group_rows(eff.by_name(device)), eff.devices, eff.dtype, device)


def roofline_points(rows: List[Dict[str, Any]], reports: Dict[int, DeviceReport], dtype: str,
                    device: Optional[int]) -> Dict[str, Any]:
    """`roofline` from the rows of the by-name table (of `device`, or every GPU) and the device reports."""
    rows = [r for r in rows if r["intensity"] and r["tflops"]]
    report = reports.get(device) if device is not None else next(iter(reports.values()), None)
    dtype = dtype if dtype != AUTO else _main_dtype(rows)
    match = report.match if report else None
    return {"dtype": dtype,
            "peak_tflops": match.peak_tflops(dtype) if match and dtype else None,
            "dram_gbps": match.dram_gbps if match else None,
            "ridge": match.ridge_point(dtype) if match and dtype else None,
            "points": [{**{k: r[k] for k in ("name", "display_name", "demangled", "kernel_class", "intensity", "tflops",
                                             "total_us", "count", "pct_peak", "dtype", "gbps", "bound", "over_roof",
                                             "roof_cause")},
                        "name_key": params.name_key(r["name"])} for r in rows]}


def kernel_ops(eff: Efficiency, request) -> Dict[str, Any]:
    """The launching ops of one kernel name, chosen by `name_key` (from /kernels rows) or, if short, `name`."""
    acts = eff.activities
    labels = acts.strings["name"]
    key = params.key(request, "name_key")
    if key:
        codes = [i for i, label in enumerate(labels) if params.name_key(label) == key]
        name = labels[codes[0]] if codes else ""
    else:
        name = params.text(request, "name", required=True)
        codes = [i for i, label in enumerate(labels) if label == name]
    mask = np.isin(acts["name"], codes)
    device = params.device(request)
    if device is not None:
        mask &= acts["device"] == device
    return {"name": name, "ops": launching_ops(eff, mask)}


def launching_ops(eff: Efficiency, mask: np.ndarray) -> list:
    """The ops that launched the selected activities, grouped by op name and input shapes."""
    acts = eff.activities
    rows = np.flatnonzero(mask)
    if not len(rows):
        return []
    keys = np.stack([acts["op_name"][rows], acts["op_shape"][rows]], axis=1).astype(np.int64)
    groups, inverse = unique_rows(keys)
    flops = acts["flops"][rows]
    known = ~np.isnan(flops)
    total = np.bincount(inverse, weights=acts["dur"][rows])
    count = np.bincount(inverse)
    flop_sum = np.bincount(inverse, weights=np.where(known, flops, 0.0))
    has_flops = np.bincount(inverse, weights=known) > 0
    first = np.full(len(groups), -1)
    first[inverse[::-1]] = rows[::-1]
    op_names, reasons = acts.strings["op_name"], acts.strings["flops_reason"]
    out = []
    for g, (op, shape) in enumerate(groups.tolist()):
        dims, types, concrete = eff.shapes.get(shape, (None, None, None))
        out.append({"op": op_names[op] if op >= 0 else None, "count": int(count[g]), "total_us": float(total[g]),
                    "flops": float(flop_sum[g]) if has_flops[g] else None,
                    "flops_reason": reasons[acts["flops_reason"][first[g]]],
                    "input_dims": dims, "input_types": types, "concrete_inputs": concrete})
    return sorted(out, key=lambda g: -g["total_us"])


def _main_dtype(rows) -> Optional[str]:
    """The dtype with the most kernel time among rated rows (what an "auto" roofline draws roofs for)."""
    time: Dict[str, float] = {}
    for r in rows:
        if r.get("dtype"):
            time[r["dtype"]] = time.get(r["dtype"], 0.0) + (r["total_us"] or 0.0)
    return max(time, key=time.get) if time else None
