"""The multi-rank report served from a run's rank index (`store/rank_index.py`) instead of every rank's summary.

`report_for` answers with exactly what `ranks.analyze` gives over the ranks' stored sections (the index keeps those
sections' arrays and facts as they are, and the stored answer is the report itself, round-tripped through JSON,
which keeps every float exactly): from the stored answer when the spans and the datasheet are the ones it was
computed for, else from the index's inputs, reading only the summaries of the spans it does not hold yet.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..analysis.ranks import report as rk
from ..engine_version import ENGINE_VERSION
from ..sections import Section
from . import rank_index as ri
from .envelope import CorruptSummary


class Stopped(Exception):
    """An index build ended early (its `stop` event set) before it wrote anything more."""


# (summary key, worker, span name, identity the summary must carry) of each rank a report is made of
Chosen = Tuple[str, str, str, Dict[str, Any]]
Reader = Callable[[str, str, str], Optional[Dict[str, Section]]]


def to_json(report: rk.Report) -> bytes:
    """The report as JSON (floats written as their shortest exact repr: read back bit for bit)."""
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}  # no deep copy: only read
    return json.dumps(fields, separators=(",", ":")).encode("utf-8")


def from_json(data: bytes) -> rk.Report:
    """A report back from `to_json`."""
    return rk.Report(**json.loads(data.decode("utf-8")))


def digest(chosen: Sequence[Chosen], datasheet: Any) -> str:
    """What an answer depends on: the exact summaries (their keys), the engine and the datasheet (the link
    bandwidth that rates the collectives)."""
    text = json.dumps([ENGINE_VERSION, [(c[0], c[1]) for c in chosen], repr(datasheet)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def report_for(store, run: str, chosen: Sequence[Chosen], present: Sequence[str], datasheet: Any,
               fallback: Optional[Reader] = None, reader: Optional[Reader] = None,
               write: bool = True) -> Tuple[rk.Report, Dict[str, int]]:
    """The report of `chosen` spans of `run` through its rank index in `store` (updated and written back when
    it changed, unless `write` is False: a request reads the index and writes nothing, the index is the
    writer's: `index_logdir`), and what it cost: {"summaries_read", "from_index"}. `present`: every summary key
    the run has now (inputs of other keys are dropped); `fallback` reads a span the store does not hold (in-memory
    summaries); `reader` reads a span instead of the store (default: its summary in `store`)."""
    index = ri.load(store, run, write) or ri.RankIndex(run)
    key = digest(chosen, datasheet)
    stored = index.reports.get(key)
    if stored is not None:
        return from_json(stored), {"summaries_read": 0, "from_index": 1}
    try:
        index.inputs  # decoded now: a damaged part found here means starting afresh
    except CorruptSummary:
        index = ri.RankIndex(run)
    read = _first_of(reader or ri.read_sections(store, {c[0]: c[3] for c in chosen}), fallback)
    count = index.update([(c[0], c[1], c[2]) for c in chosen], present, read)
    traces = [rk.RankTrace(item.worker, item.span, item.sections["distributed"], item.sections["overview"])
              for item in (index.inputs.get(c[0]) for c in chosen) if item is not None]
    if len(traces) < len(chosen):
        raise rk.RanksError(f"run {run!r}: {len(chosen) - len(traces)} rank summary(ies) could not be read")
    report = rk.analyze(traces, datasheet)
    if not write:
        return report, {"summaries_read": count, "from_index": 0}
    try:
        index.remember(key, to_json(report))
    except (TypeError, ValueError):  # a value JSON cannot hold: answered, not stored
        pass
    ri.save(store, index)
    return report, {"summaries_read": count, "from_index": 0}


def _first_of(*readers: Optional[Reader]) -> Reader:
    def read(key: str, worker: str, span: str) -> Optional[Dict[str, Section]]:
        for reader in readers:
            got = reader(key, worker, span) if reader is not None else None
            if got is not None:
                return got
        return None
    return read


def latest_spans(run) -> List[Tuple[str, Any]]:
    """(worker, span) of each worker's latest span of a discovered run, ordered as the service orders them
    (by stamp, else mtime, then name), so that `summarize` stores the answer the plugin asks for first."""
    out = []
    for worker in sorted(run.workers):
        spans = sorted(run.workers[worker], key=lambda s: (s.stamp if s.stamp is not None else s.trace.mtime_ns,
                                                           s.name))
        if spans:
            out.append((worker, spans[-1]))
    return out


HEATMAP_ORDERS = ("rank", "straggler")


def heatmap_page(report: rk.Report, metric: str = "dur", offset: int = 0, limit: int = 64, order: str = "rank",
                 query: str = "") -> Dict[str, Any]:
    """`Report.heatmap` over the ranks in `order` ("rank", or "straggler": the ranks others waited for most first,
    then by own wait), kept to those matching `query` (a rank number, or part of a worker name), one page of them;
    `matches` counts the ranks kept. The per-step median and the maximum stay those of all ranks. What does not
    depend on the page (each metric's matrix, the straggler order) is computed once per report."""
    if metric not in rk.STEP_METRICS:
        raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(rk.STEP_METRICS)}")
    memo = report.__dict__.setdefault("_pages", {})  # the report is never changed once made
    rows = memo.get(order)
    if rows is None:
        rows = memo[order] = _ordered(report, order)
    query = query.strip().lower()
    if query:
        rows = [r for r in rows if str(r[0]) == query or query in r[1]]
    grid = memo.get(metric)
    if grid is None:
        grid = memo[metric] = _grid(report, metric)
    values, median, peak = grid
    page = [r[0] for r in rows[offset:offset + limit]]
    return {"metric": metric, "steps": report.step_numbers, "ranks": page, "values": [values[r] for r in page],
            "offset": offset, "limit": limit, "total_ranks": len(report.ranks), "median_per_step": median,
            "max": peak, "order": order, "query": query, "matches": len(rows)}


def _ordered(report: rk.Report, order: str) -> List[Tuple[int, str]]:
    """(rank, worker in lower case) of every rank in `order`."""
    rows = report.ranks
    if order == "straggler":
        rows = sorted(rows, key=lambda r: (-r["others_waited_us"], -(r["comm_wait_us"] or 0.0), r["rank"]))
    return [(r["rank"], r["worker"].lower()) for r in rows]


def _grid(report: rk.Report, metric: str) -> Tuple[Dict[int, List[Any]], List[Optional[float]], Optional[float]]:
    """Each rank's row of one metric over the run's steps, with the per-step median and the maximum over all
    ranks, computed as `Report.heatmap` computes them."""
    whole = report.heatmap(metric, 0, len(report.ranks))
    return dict(zip(whole["ranks"], whole["values"])), whole["median_per_step"], whole["max"]


def index_logdir(store, root: str, runs: Sequence[Any], extra_args: Sequence[str] = (), datasheet: Any = None,
                 keys: Optional[set] = None, stop: Optional[threading.Event] = None) -> Dict[str, str]:
    """Write the rank index of every run of several workers of a discovered logdir (its latest span per worker,
    as the plugin shows first) from the summaries in `store`; {run: why it has none} for the runs left without
    one. Each summary is read once for both parts of the index. `stop`: once set, the build ends at its next
    summary read (raising `Stopped`), leaving what was written before."""
    from ..estimate.devices import load_datasheet
    from .jobs import span_job

    datasheet = load_datasheet() if datasheet is None else datasheet
    keys = store.keys() if keys is None else keys
    skipped = {}
    for run in runs:
        if len(run.workers) < 2:  # one worker: its Distributed tab reads its one summary
            continue
        jobs = {(s.worker, s.name): span_job(root, run, s, extra_args) for s in run.spans()}
        chosen = [(job.key, worker, span.name, job.identity) for worker, span in latest_spans(run)
                  for job in [jobs[(worker, span.name)]] if job.key in keys]
        if not chosen:
            continue
        present = [j.key for j in jobs.values()]
        reads = _OneRead(store, {j.key: j.identity for j in jobs.values()}, {c[0] for c in chosen}, datasheet, stop)
        failed = []
        for part in (lambda: _index_kernels(store, run, jobs, keys, present, datasheet, reads.activities),
                     lambda: report_for(store, run.name, chosen, present, datasheet, reader=reads.sections)):
            try:  # the kernel rows first: they read every span, keeping the sections the report then needs
                part()
            except Stopped:
                raise
            except Exception as exc:  # noqa: BLE001 - the index only saves time: no run's summaries are lost for it
                failed.append(f"{type(exc).__name__}: {exc}")
        if failed:
            skipped[run.name] = "; ".join(failed)[:300]
    return skipped


class _OneRead:
    """The readers of one run's index build that open each summary once: the kernel rows' reader (`activities`,
    which reads every span it lacks) keeps the rank rows' sections of the spans the report is made of (`wanted`),
    which `sections` then gives without reading them again (it reads the ones it was not given)."""

    def __init__(self, store, identities: Dict[str, Dict[str, Any]], wanted: set, datasheet: Any,
                 stop: Optional[threading.Event]) -> None:
        self.store, self.identities, self.wanted, self.datasheet, self.stop = store, identities, wanted, datasheet, stop
        self.kept: Dict[str, Dict[str, Section]] = {}
        self._store_sections = ri.read_sections(store, identities)

    def _go_on(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped()

    def activities(self, key: str, worker: str, span: str):
        from . import rank_kernels

        identity = self.identities.get(key) or None
        try:
            self._go_on()
            data = self.store.get(key)
            if data is None:
                return None
            if key in self.wanted:
                self.kept[key] = ri.trimmed(key, worker, span, ri.summary_sections(data, identity)).sections
            return rank_kernels.summary_activities(data, identity, self.datasheet)
        except CorruptSummary:
            return None

    def sections(self, key: str, worker: str, span: str) -> Optional[Dict[str, Section]]:
        kept = self.kept.pop(key, None)
        if kept is not None:
            return kept
        self._go_on()
        return self._store_sections(key, worker, span)


def _index_kernels(store, run, jobs: Dict[Tuple[str, str], Any], keys: set, present: Sequence[str],
                   datasheet: Any, reader: Optional[Callable] = None) -> None:
    """The All-ranks kernel table of every summarised span of `run`, as the plugin's "All ranks" selection
    combines them (by stamp, else mtime, then name), and the per-span rows it is merged from."""
    from . import rank_kernels

    every = [s for spans in run.workers.values() for s in spans]  # ties keep this order, as in the service
    spans = sorted(every, key=lambda s: (s.stamp if s.stamp is not None else s.trace.mtime_ns, s.name))
    chosen = [(job.key, span.worker, span.name, job.identity) for span in spans
              for job in [jobs[(span.worker, span.name)]] if job.key in keys]
    workers = {w: i for i, w in enumerate(sorted({c[1] for c in chosen}))}
    if chosen:
        rank_kernels.tables_for(store, run.name, chosen, [workers[c[1]] for c in chosen], present, datasheet,
                                reader=reader)


__all__ = ["index_logdir", "Stopped", "heatmap_page", "HEATMAP_ORDERS", "report_for", "to_json", "from_json", "digest",
           "latest_spans", "Chosen"]
