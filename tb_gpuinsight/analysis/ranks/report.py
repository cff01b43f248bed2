"""Distributed runs: which worker is which rank, a per-rank and per-step breakdown, collectives matched across
ranks (wait versus transfer), bus bandwidth against the interconnect, and the straggler named with its evidence.

Everything here works on per-trace summaries (the "distributed" section each analysis worker stores), never on
the traces themselves, so a run of a thousand ranks costs a thousand small sections.

Per trace (`build_section`):
- rank and world size from `distributedInfo`, else from the worker name (`rank3`, `rank-3`, `worker3`, `_rank3`);
- on traces without GPU activity (gloo on CPU), each step split into CPU compute (the CPU ops), exposed and
  overlapped communication (the gloo collectives) and idle, over the Overview's step windows;
- the collective instances (`collectives.extract`).
A GPU trace's step split is the Overview's (its stored "overview" section): compute = the compute kernel classes,
exposed communication, overlapped communication, memcpy + memset, and idle by cause (host-bound, launch-bound,
synchronisation, data loading, other), summing to the step's wall time; nothing is classified twice.
Across ranks (`analyze`): instances are matched by (process group, collective, n-th of its kind in that group);
for each, the last rank to arrive sets the start of the transfer: a rank's wait = last arrival - its arrival
(clipped to its own end), transfer = its end - last arrival. A rank's wait per step is the union of its wait
intervals inside the step (collectives in flight together, as DDP's buckets, are not added: `waits.py`). The
straggler is the rank that arrives last at the most collective time: others' waits for it (united per waiting rank,
inside their steps) are the time lost.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import GpuInsightError
from ...trace.table import Table, unique_rows
from . import collectives as coll
from ..overview.breakdown import COMPUTE
from ..overview.steps import step_windows
from ..overview.cpu import CPU_CATEGORIES, compute_ops, split_cpu_steps
from ..overview.host import Intervals, dataloader_intervals
from .waits import WaitLedger, Windows

SECTION = "distributed"
_STEP_COLUMNS = ("number", "ts", "dur", "compute", "comm", "overlap", "memcpy", "idle")
# Idle by cause: (step metric, the Overview's category); a CPU-only trace has no GPU idle causes (None).
IDLE_CAUSES = (("idle_host_bound", "host_bound"), ("idle_launch_bound", "launch_bound"), ("idle_sync", "sync"),
               ("idle_data_loading", "data_loading"), ("idle_other", "idle_other"))
_RANK_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)(?!.*(?:rank|worker)[-_]?\d)", re.IGNORECASE)
_MAX_PG_RANKS = 64  # pg_config rank lists longer than this are stored as their count


class RanksError(GpuInsightError):
    """A run that has no usable distributed data (no traces analysed yet, say)."""


# ---------------------------------------------------------------------------------------------- per trace

def rank_from_name(worker: str) -> Optional[int]:
    """The rank a worker's name spells (rank3, rank-3, host_rank3, worker3, worker3_step_12), or None."""
    m = _RANK_NAME.search(worker)
    return int(m.group(1)) if m and len(m.group(1)) <= 7 else None  # past 10 million: no rank of a real job


def build_section(ctx) -> "Any":
    """Section builder (sections.py): steps, their breakdown and the collective instances of one trace."""
    from ...sections import Section
    trace, eff = ctx.trace, ctx.eff
    kernel_ops = eff.activities["op"][:len(trace.kernels)]
    table, how = coll.extract(trace, kernel_ops)
    windows = step_windows(trace)
    steps = {"number": windows.number, "ts": windows.start, "dur": windows.end - windows.start}
    table.columns["step"] = _step_of(table["ts"], steps)
    # GPU traces take their split from the overview section; only a CPU-only trace is split here.
    breakdown = _cpu_breakdown(trace, table, steps) if not len(eff.activities) else None
    info = {
        "distributed": _trimmed(trace.meta.distributed),
        "source": how["source"],
        "collective_strings": table.strings,
        "devices": [{k: d.get(k) for k in ("id", "name", "numSms", "computeMajor", "totalGlobalMem")}
                    for d in trace.devices[:1]],
    }
    steps_matrix = np.stack([breakdown[k].astype(np.float64) for k in _STEP_COLUMNS], axis=1) if breakdown \
        else np.zeros((0, len(_STEP_COLUMNS)))
    return Section(SECTION, info, {"collectives": coll.pack(table), "steps": steps_matrix})


def _trimmed(info: Optional[dict]) -> Dict[str, Any]:
    """distributedInfo without its long rank lists (a 300-rank pg_config is kilobytes per trace)."""
    if not isinstance(info, dict):
        return {}
    out = {k: v for k, v in info.items() if k != "pg_config" and isinstance(v, (int, float, str, bool))}
    pgs = []
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict):
            ranks = pg.get("ranks")
            pgs.append({"name": str(pg.get("pg_name", "")), "desc": str(pg.get("pg_desc", "")),
                        "size": pg.get("pg_size"),
                        "ranks": ranks if isinstance(ranks, list) and len(ranks) <= _MAX_PG_RANKS else None})
    out["process_groups"] = pgs
    return out


def _step_of(ts: np.ndarray, steps: Dict[str, np.ndarray]) -> np.ndarray:
    """Step number of each time (the step whose window holds it; -1 outside every step)."""
    out = np.full(len(ts), -1, dtype=np.int64)
    for n, start, dur in zip(steps["number"].tolist(), steps["ts"].tolist(), steps["dur"].tolist()):
        out[(ts >= start) & (ts < start + dur)] = n
    return out


def _cpu_breakdown(trace, table: Table, steps: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Per step of a CPU-only trace, the Overview's CPU split (`overview/cpu.py`) in this view's columns: compute =
    CPU ops and data loading, communication (all of it, and the part under CPU ops), idle = idle threads (us)."""
    comm = Intervals(table["ts"], table["ts"] + table["dur"])
    matrix, overlap = split_cpu_steps((steps["ts"], steps["ts"] + steps["dur"]), dataloader_intervals(trace),
                                      compute_ops(trace), comm)
    split = dict(zip(CPU_CATEGORIES, matrix.T))
    return {"number": steps["number"], "ts": steps["ts"], "dur": steps["dur"],
            "compute": split["cpu_ops"] + split["cpu_data_loading"], "comm": split["cpu_collectives"] + overlap,
            "overlap": overlap, "memcpy": np.zeros(len(overlap)), "idle": split["cpu_idle"]}


# ---------------------------------------------------------------------------------------------- across ranks

@dataclass
class RankTrace:
    """One rank's data as read from its stored sections: which worker and span it came from, its "distributed"
    section and its "overview" section (the step split of a GPU trace)."""
    worker: str
    span: str
    section: Any
    overview: Any = None


@dataclass
class Report:
    """The multi-rank view of a run; every part JSON-ready through `to_dict`, tables as pandas via the API."""
    ranks: List[Dict[str, Any]]
    steps: List[Dict[str, Any]]
    collectives: List[Dict[str, Any]]
    instances: List[Dict[str, Any]]
    stragglers: List[Dict[str, Any]]
    problems: List[str]
    world_size: Optional[int]
    interconnect: Dict[str, Any]
    source: str
    step_numbers: List[int] = field(default_factory=list)

    def to_dict(self, instance_limit: int = 500) -> Dict[str, Any]:
        return {"world_size": self.world_size, "rank_count": len(self.ranks), "source": self.source,
                "ranks": self.ranks, "collectives": self.collectives, "stragglers": self.stragglers,
                "problems": self.problems, "interconnect": self.interconnect, "step_numbers": self.step_numbers,
                "instances": self.instances[:instance_limit], "instance_count": len(self.instances)}

    def to_pandas(self, part: str = "ranks"):
        """One part as a DataFrame: "ranks", "steps", "collectives", "instances" or "stragglers"."""
        import pandas as pd

        if part not in _PARTS:
            raise ValueError(f"unknown part {part!r}: use one of {', '.join(_PARTS)}")
        return pd.DataFrame(getattr(self, part))

    def heatmap(self, metric: str = "dur", offset: int = 0, limit: int = 64) -> Dict[str, Any]:
        """Ranks x steps matrix of one step metric (microseconds), one page of ranks, with the page's bounds and
        the whole run's per-step median so that a page can be read against all ranks."""
        if metric not in STEP_METRICS:
            raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(STEP_METRICS)}")
        by_rank: Dict[int, Dict[int, float]] = {}
        for row in self.steps:
            by_rank.setdefault(row["rank"], {})[row["step"]] = row[metric]
        ranks = [r["rank"] for r in self.ranks]
        page = ranks[offset:offset + limit]
        matrix = [[by_rank.get(r, {}).get(s) for s in self.step_numbers] for r in page]
        all_values = np.array([[by_rank.get(r, {}).get(s, np.nan) for s in self.step_numbers] for r in ranks],
                              dtype=float).reshape(len(ranks), len(self.step_numbers))
        with np.errstate(all="ignore"):
            median = [_f(np.nanmedian(col)) if np.isfinite(col).any() else None for col in all_values.T]
        return {"metric": metric, "steps": self.step_numbers, "ranks": page, "values": matrix, "offset": offset,
                "limit": limit, "total_ranks": len(ranks), "median_per_step": median,
                "max": _f(np.nanmax(all_values)) if np.isfinite(all_values).any() else None}


_PARTS = ("ranks", "steps", "collectives", "instances", "stragglers")
STEP_METRICS = ("dur", "compute", "comm_exposed", "comm_overlapped", "memcpy", "idle",
                *(k for k, _ in IDLE_CAUSES), "comm_wait")


def _f(x: Any) -> Optional[float]:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None


def analyze(traces: Sequence[RankTrace], datasheet=None) -> Report:
    """The multi-rank report of one run from its ranks' sections (one span per rank: the caller picks it)."""
    problems: List[str] = []
    usable = []
    for t in traces:
        if t.section.error:
            problems.append(f"{t.worker}: {t.section.error}")
        else:
            usable.append(t)
    if not usable:
        raise RanksError("no analysed traces with distributed data in this run" +
                         (f" ({problems[0]})" if problems else ""))
    ranked, world = _assign_ranks(usable, problems)
    tables = {r: coll.unpack(t.section.arrays["collectives"], t.section.info["collective_strings"])
              for r, t in ranked.items()}
    splits = {r: _split(r, t, problems) for r, t in ranked.items()}
    for r, rows in splits.items():  # collectives belong to the steps of the split shown
        tables[r].columns["step"] = _step_of(tables[r]["ts"], {k: np.array([s[k] for s in rows]) if rows else
                                                               np.empty(0) for k in ("number", "ts", "dur")})
    ledger, instances, matched = _match(tables, problems)
    windows: Dict[int, Windows] = {r: [(int(s["number"]), s["ts"], s["ts"] + s["dur"]) for s in rows]
                                   for r, rows in splits.items()}
    steps = _step_rows(splits, ledger.per_step(windows))
    ranks = _rank_rows(ranked, steps, instances, ledger.caused(windows))
    link = _interconnect(ranked, datasheet)
    comm_table = _collective_rows(instances, tables, world, link)
    strag = _stragglers(ranks, instances, ledger.total(windows))
    step_numbers = sorted({s["step"] for s in steps})
    _check_steps(ranked, steps, step_numbers, problems)
    source = next(iter(ranked.values())).section.info.get("source", "")
    return Report(ranks, steps, comm_table, instances, strag, problems, world, link, source, step_numbers)


def from_run_dir(path: str, cycle: int = -1, datasheet=None) -> Report:
    """The report of one run directory, read and analysed here (CLI and Python API; the plugin uses the stored
    sections instead). `cycle`: the n-th span of every worker, -1 the latest. The ranks' traces are read on every
    core when there are many small ones (forkmap.py)."""
    from ...forkmap import fork_map, run_workers

    jobs = _rank_jobs(path, cycle)
    workers = run_workers([(trace_path, size) for _, _, trace_path, size in jobs])
    return analyze(fork_map(partial(_rank_trace, datasheet), jobs, workers), datasheet)


def _rank_trace(datasheet, job) -> RankTrace:
    """One rank's sections, from its trace read and analysed (in a worker process for a big run)."""
    from ...sections import SectionContext, build_section
    from ...trace.kineto import load_kineto
    from ..kernels.efficiency import analyze_trace

    worker, span, trace_path, _size = job
    trace = load_kineto(trace_path)
    ctx = SectionContext(trace, analyze_trace(trace, datasheet=datasheet))
    return RankTrace(worker, span, build_section(SECTION, ctx), build_section("overview", ctx))


def kernels_from_run_dir(path: str, cycle: int = -1, datasheet=None, group: str = "name") -> Table:
    """The kernel table of every rank of a run directory together (`across_ranks`), read and analysed here."""
    from ...trace.kineto import load_kineto
    from ..kernels.efficiency import analyze_trace, combine

    parts = [analyze_trace(load_kineto(trace_path), datasheet=datasheet)
             for _, _, trace_path, _ in _rank_jobs(path, cycle)]
    if not parts:
        raise RanksError(f"{path}: no trace for cycle {cycle}")
    eff = parts[0] if len(parts) == 1 else combine(parts, datasheet)
    return across_ranks(eff.activities, np.arange(len(parts)), KERNEL_KEYS[group])


def _rank_jobs(path: str, cycle: int) -> List[Tuple[str, str, str, int]]:
    """(worker, span name, trace path, trace file size) of the cycle-th span of every worker of one run."""
    from ...logdir import discover

    runs = discover(path)
    if len(runs) != 1:
        raise RanksError(f"{path}: holds {len(runs)} runs; give one run directory")
    return [(worker, spans[cycle].name, spans[cycle].trace.path, spans[cycle].trace.size)
            for worker, spans in sorted(runs[0].workers.items()) if -len(spans) <= cycle < len(spans)]


# The kernel table's groupings over all ranks: a kernel over every rank's GPU (no device in the key).
KERNEL_KEYS = {"name": ("kind", "name"), "op": ("op_name", "kind", "name")}
SPREAD_COLUMNS = ("ranks", "rank_min_us", "rank_median_us", "rank_max_us")


def kernel_rows(table: Table, index: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """JSON-ready rows of an `across_ranks` table (all, or those at `index`): the kernel table's columns and the
    spread over the ranks."""
    from ..kernels.rows import group_rows

    index = range(len(table)) if index is None else index
    rows = group_rows(table, index)
    return [{**row, **{c: table[c][i].item() for c in SPREAD_COLUMNS}} for i, row in zip(index, rows)]


def across_ranks(acts: Table, span_rank: np.ndarray, keys: Tuple[str, ...]) -> Table:
    """Activities of several ranks (a `span` column, `span_rank[span]` its rank 0..n-1) grouped by `keys`, rates
    from the group's sums (`aggregate`), with each group's spread over the ranks: `ranks` it ran on, and the
    min / median / max of its time per rank (0 on a rank where it did not run)."""
    from ..kernels.efficiency import aggregate

    table = aggregate(acts, keys)
    n, g = max(int(span_rank.max()) + 1, 1) if len(span_rank) else 1, len(table)
    if len(acts):
        _, inverse = unique_rows(np.stack([acts[k].astype(np.int64) for k in keys], axis=1))  # `aggregate`'s order
        flat = inverse.reshape(-1) * n + (span_rank[acts["span"]] if "span" in acts else 0)
        time = np.bincount(flat, weights=acts["dur"], minlength=g * n).reshape(g, n)
        ran = np.bincount(flat, minlength=g * n).reshape(g, n) > 0
    else:
        time, ran = np.zeros((0, n)), np.zeros((0, n), dtype=bool)
    return Table(table.name, {**table.columns, **rank_spread(time, ran)}, table.strings)


def rank_spread(time: np.ndarray, ran: np.ndarray) -> Dict[str, np.ndarray]:
    """The spread columns (`SPREAD_COLUMNS`) of groups x ranks matrices: time per rank, whether it ran there."""
    return {"ranks": ran.sum(axis=1), "rank_min_us": time.min(axis=1, initial=np.inf),
            "rank_median_us": np.median(time, axis=1) if len(time) else np.zeros(0),
            "rank_max_us": time.max(axis=1, initial=-np.inf)}


def median_rank(report: Report) -> Optional[Dict[str, Any]]:
    """The rank whose mean step time is the median of all ranks (the lower middle one for an even count)."""
    timed = sorted((r for r in report.ranks if r["step_us"] is not None), key=lambda r: (r["step_us"], r["rank"]))
    return timed[(len(timed) - 1) // 2] if timed else None


def _assign_ranks(traces: Sequence[RankTrace], problems: List[str]) -> Tuple[Dict[int, RankTrace], Optional[int]]:
    """Rank of every trace: distributedInfo first, else the worker name, else its position; duplicates and gaps
    are reported, not fatal (a duplicate keeps the first trace)."""
    out: Dict[int, RankTrace] = {}
    worlds = set()
    for i, t in enumerate(sorted(traces, key=lambda t: t.worker)):
        dist = t.section.info.get("distributed") or {}
        rank = dist.get("rank") if isinstance(dist.get("rank"), int) else rank_from_name(t.worker)
        if isinstance(dist.get("world_size"), int):
            worlds.add(dist["world_size"])
        if rank is None:
            rank = i
            problems.append(f"{t.worker}: no rank in distributedInfo or the worker name; taken as rank {rank}")
        if rank in out:
            problems.append(f"{t.worker}: rank {rank} already given by {out[rank].worker}; ignored")
            continue
        out[rank] = t
    if len(worlds) > 1:
        problems.append(f"ranks disagree on the world size: {sorted(worlds)}")
    world = max(worlds) if worlds else len(out)
    missing = sorted(set(range(world)) - set(out)) if world <= 100_000 else []
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        problems.append(f"{len(missing)} of {world} ranks have no trace here: {shown}")
    return dict(sorted(out.items())), world


def _match(tables: Dict[int, Table], problems: List[str]):
    """Match instances across ranks: every rank's wait intervals (`WaitLedger`) and one dict per matched
    instance."""
    keyed: Dict[Tuple[str, str, int], Dict[int, int]] = {}
    for rank, t in tables.items():
        kinds, pgs = t.strings.get("kind", []), t.strings.get("pg", [])
        count: Dict[Tuple[str, str], int] = {}
        for i in range(len(t)):
            k = (pgs[t["pg"][i]] if pgs else "", kinds[t["kind"][i]])
            n = count.get(k, 0)
            count[k] = n + 1
            keyed.setdefault((k[0], k[1], n), {})[rank] = i
    ledger = WaitLedger()
    instances = []
    unmatched = 0
    for (pg, kind, n), members in keyed.items():
        if len(members) < 2:
            unmatched += 1
            continue
        ranks = sorted(members)
        ts = np.array([tables[r]["ts"][members[r]] for r in ranks])
        end = ts + np.array([tables[r]["dur"][members[r]] for r in ranks])
        last = float(ts.max())
        wait = np.clip(np.minimum(last, end) - ts, 0, None)
        transfer = np.clip(end - last, 0, None)
        late = ranks[int(np.argmax(ts))]
        first = tables[ranks[0]]
        row = members[ranks[0]]
        for r, start, w in zip(ranks, ts.tolist(), wait.tolist()):
            ledger.add(r, start, start + w, late)
        instances.append({
            "pg": pg, "kind": kind, "index": n, "ranks": len(ranks), "last_rank": late,
            "step": int(first["step"][row]), "ts": float(ts.min()),
            "in_bytes": _f(first["in_bytes"][row]), "out_bytes": _f(first["out_bytes"][row]),
            "group_size": int(first["group_size"][row]),
            "dtype": first.strings["dtype"][first["dtype"][row]] if first.strings.get("dtype") else "",
            "algo": first.strings["algo"][first["algo"][row]] if first.strings.get("algo") else "",
            "skew_us": float(last - ts.min()), "transfer_us": float(np.median(transfer)),
            "wait_us": {str(r): float(w) for r, w in zip(ranks, wait.tolist())},
            "dur_us": {str(r): float(d) for r, d in zip(ranks, (end - ts).tolist())},
            "lost_us": float(wait.sum()),
        })
    if unmatched:
        problems.append(f"{unmatched} collective instance(s) seen on one rank only (not matched)")
    instances.sort(key=lambda x: x["ts"])
    return ledger, instances, len(instances)


def _split(rank: int, t: RankTrace, problems: List[str]) -> List[Dict[str, Any]]:
    """One rank's steps: the Overview's split for a trace with GPU activity, else the CPU split stored here."""
    ov = t.overview
    if ov is not None and not ov.error and ov.info.get("gpu_activities"):
        a = ov.arrays
        compute = sum(a[f"t_{k}"] for k in COMPUTE)
        causes = {m: a[f"t_{k}"] for m, k in IDLE_CAUSES}
        idle = sum(causes.values())
        out = []
        for i, n in enumerate(a["step_number"].tolist()):
            start = float(a["step_start"][i])
            out.append({"number": n, "ts": start, "dur": float(a["step_end"][i]) - start,
                        "compute": float(compute[i]), "comm_exposed": float(a["t_communication"][i]),
                        "comm_overlapped": float(a["comm_overlapped_us"][i]),
                        "memcpy": float(a["t_memcpy"][i] + a["t_memset"][i]), "idle": float(idle[i]),
                        **{m: float(v[i]) for m, v in causes.items()}})
        return out
    if ov is not None and ov.error:
        problems.append(f"rank {rank}: no step split ({ov.error})")
    out = []
    for values in t.section.arrays["steps"].reshape(-1, len(_STEP_COLUMNS)).tolist():
        s = dict(zip(_STEP_COLUMNS, values))
        out.append({"number": int(s["number"]), "ts": s["ts"], "dur": s["dur"], "compute": s["compute"],
                    "comm_exposed": s["comm"] - s["overlap"], "comm_overlapped": s["overlap"], "memcpy": s["memcpy"],
                    "idle": s["idle"], **{m: None for m, _ in IDLE_CAUSES}})  # no GPU: no GPU idle causes
    return out


def _step_rows(splits: Dict[int, List[Dict[str, Any]]], waits: Dict[Tuple[int, int], float]) -> List[Dict[str, Any]]:
    rows = []
    for rank, split in splits.items():
        for s in split:
            step = int(s["number"])
            rows.append({"rank": rank, "step": step, **{m: s[m] for m in STEP_METRICS if m != "comm_wait"},
                         "comm_wait": waits.get((rank, step), 0.0)})
    return rows


def _rank_rows(ranked: Dict[int, RankTrace], steps: List[Dict[str, Any]], instances: List[Dict[str, Any]],
               caused: Dict[int, float]) -> List[Dict[str, Any]]:
    by_rank: Dict[int, List[Dict[str, Any]]] = {}
    for s in steps:
        by_rank.setdefault(s["rank"], []).append(s)
    last_count: Dict[int, int] = {}
    for inst in instances:
        last_count[inst["last_rank"]] = last_count.get(inst["last_rank"], 0) + 1
    rows = []
    for rank, t in ranked.items():
        mine = by_rank.get(rank, [])
        mean = {m: _mean([s[m] for s in mine]) for m in STEP_METRICS}
        rows.append({"rank": rank, "worker": t.worker, "span": t.span, "steps": len(mine),
                     "step_us": mean["dur"], "compute_us": mean["compute"],
                     "comm_exposed_us": mean["comm_exposed"], "comm_overlapped_us": mean["comm_overlapped"],
                     "memcpy_us": mean["memcpy"], "idle_us": mean["idle"],
                     **{f"{m}_us": mean[m] for m, _ in IDLE_CAUSES}, "comm_wait_us": mean["comm_wait"],
                     "arrived_last": last_count.get(rank, 0), "others_waited_us": caused.get(rank, 0.0)})
    return rows


def _mean(values: List[Optional[float]]) -> Optional[float]:
    """Mean per step; None when there are no steps or the figure is unknown (None) on this rank."""
    return float(np.mean(values)) if values and all(v is not None for v in values) else None


def _interconnect(ranked: Dict[int, RankTrace], datasheet) -> Dict[str, Any]:
    devices = next(iter(ranked.values())).section.info.get("devices") or []
    if not devices:
        return {"gbps": None, "how": "unknown: the trace lists no GPU (CPU collectives are not rated)"}
    gbps, how = coll.interconnect_gbps(devices[0], datasheet)
    return {"gbps": gbps, "how": how, "device": devices[0].get("name")}


UNSIZED = "no tensor recorded: the launching op records no size (a DeepEP or custom kernel moves its own buffers)"


def _collective_rows(instances: List[Dict[str, Any]], tables: Dict[int, Table], world: Optional[int],
                     link: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One row per (process group, collective, size, dtype): count, time per rank, wait, transfer, algbw, busbw."""
    groups: Dict[Tuple, List[Dict[str, Any]]] = {}
    for inst in instances:
        groups.setdefault((inst["pg"], inst["kind"], inst["in_bytes"], inst["out_bytes"], inst["dtype"]),
                          []).append(inst)
    rows = []
    for (pg, kind, in_b, out_b, dtype), items in groups.items():
        n = items[0]["group_size"] if items[0]["group_size"] > 0 else (world or items[0]["ranks"])
        size = coll.algbw_bytes(kind, np.nan if in_b is None else in_b, np.nan if out_b is None else out_b, n)
        factor = coll.busbw_factor(kind, n)
        per_rank = np.array([sum(i["dur_us"].values()) / len(i["dur_us"]) for i in items])
        waits = np.array([sum(i["wait_us"].values()) / len(i["wait_us"]) for i in items])
        transfer = np.array([i["transfer_us"] for i in items])
        with np.errstate(all="ignore"):
            algbw = size / (np.median(transfer) * 1e-6) / 1e9 if np.median(transfer) > 0 else np.nan
        busbw = algbw * factor
        rows.append({"pg": pg, "kind": kind, "dtype": dtype, "bytes": _f(size), "group_size": n,
                     "algo": items[0]["algo"], "count": len(items), "ranks": max(i["ranks"] for i in items),
                     "time_per_rank_us": _f(per_rank.mean()), "total_time_per_rank_us": _f(per_rank.sum()),
                     "wait_us": _f(waits.mean()), "transfer_us": _f(np.median(transfer)),
                     "algbw_gbps": _f(algbw), "busbw_factor": _f(factor), "busbw_gbps": _f(busbw),
                     "pct_link": _f(busbw / link["gbps"]) if link.get("gbps") else None,
                     "reason": "" if size == size else UNSIZED})
    rows.sort(key=lambda r: -(r["total_time_per_rank_us"] or 0))
    return rows


def _stragglers(ranks: List[Dict[str, Any]], instances: List[Dict[str, Any]],
                total_lost: float) -> List[Dict[str, Any]]:
    """The rank(s) others wait for at collectives, with the evidence; none when the lost time is negligible.
    `total_lost`: all ranks' waiting inside their steps (each rank's waits united, `WaitLedger.total`)."""
    if not instances or total_lost <= 0 or len(ranks) < 2:
        return []
    waits = {r["rank"]: r["comm_wait_us"] or 0.0 for r in ranks}
    median_wait = float(np.median(list(waits.values())))
    out = []
    for row in sorted(ranks, key=lambda r: -r["others_waited_us"]):
        share = row["others_waited_us"] / total_lost
        if share < 0.25 or row["others_waited_us"] <= 0:  # a rank last at a minority of the waiting time is noise
            break
        out.append({
            "rank": row["rank"], "worker": row["worker"], "arrived_last": row["arrived_last"],
            "of_instances": len(instances), "others_waited_us": row["others_waited_us"], "share_of_wait": share,
            "own_wait_per_step_us": waits[row["rank"]], "median_wait_per_step_us": median_wait,
            "evidence": (f"rank {row['rank']} arrived last at {row['arrived_last']} of {len(instances)} matched "
                         f"collectives; the other ranks waited {row['others_waited_us'] / 1e3:.3f} ms for it "
                         f"({share:.0%} of all waiting); its own wait is {waits[row['rank']] / 1e3:.3f} ms per step "
                         f"against a median of {median_wait / 1e3:.3f} ms"),
        })
    return out


def _check_steps(ranked: Dict[int, RankTrace], steps: List[Dict[str, Any]], numbers: List[int],
                 problems: List[str]) -> None:
    by_rank: Dict[int, set] = {}
    for s in steps:
        by_rank.setdefault(s["rank"], set()).add(s["step"])
    for rank in ranked:
        missing = sorted(set(numbers) - by_rank.get(rank, set()))
        if missing:
            problems.append(f"rank {rank} has no step {', '.join(map(str, missing[:5]))}"
                            f"{' ...' if len(missing) > 5 else ''} (steps are aligned by number)")


__all__ = ["SECTION", "RankTrace", "Report", "analyze", "from_run_dir", "median_rank", "build_section", "rank_from_name",
           "RanksError", "STEP_METRICS", "IDLE_CAUSES", "across_ranks", "kernels_from_run_dir", "kernel_rows",
           "KERNEL_KEYS", "SPREAD_COLUMNS"]
