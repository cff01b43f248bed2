"""The route of the Memory tab's snapshot part: a run's CUDA memory snapshot (`*.pickle[.gz]` beside its traces).

    /memory_snapshot  ?run[&file&device] -> {run, file, files, devices, device, peak_allocated_bytes,
                      peak_reserved_bytes, peak_time_us, at_peak: [{frame, function, bytes, count, stack}],
                      at_peak_by_size, fragmentation: {at_peak, at_dump}, ooms, leak_suspects, curve, ...}
                      (`analysis.memory.snapshot.report`). `file`: one of `files` (default the first);
                      `device`: one of `devices` (default the device with the highest peak). `steps`: the
                      run's profiler steps inside the snapshot's history ({name, t_us, dur_us}, its clock),
                      `clock`: whether and why they line up.
                      A run without a snapshot: {run, file: null, files: [], message}.
    /memory_snapshot_compare ?a_run&b_run -> {a, b, peak_allocated_bytes: {a, b, change}, peak_reserved_bytes,
                      allocated_at_dump_bytes, at_peak: [{frame, function, a_bytes, b_bytes, change_bytes, ...}]}
                      (`snapshot.compare`, each run's first snapshot, default device); {message} when a run has none.

A snapshot is read once per file version, on a background thread (the route answers 503 "still loading" until
then), with the reader that admits only plain data: a pickle that names code answers 422 with the reason.
"""
from __future__ import annotations

import concurrent.futures
from typing import Any, Callable, Dict, Optional

from ..analysis.memory.snapshot import align_steps, compare, report
from ..analysis.memory.snapshot_model import Snapshot, load_snapshot
from ..analysis.memory.snapshot_read import SnapshotError
from ..errors import GpuInsightError
from ..logdir import FileEntry
from ..span_state import NotReady
from ..trace.source import is_url
from . import params
from .lru import Lru

MAX_DEVICE = 4096


def routes(plugin) -> Dict[str, Callable]:
    reports = SnapshotReports()
    return {"/memory_snapshot": lambda req: snapshot_route(plugin, reports, req),
            "/memory_snapshot_compare": lambda req: compare_route(plugin, reports, req)}


class SnapshotReports:
    """Snapshots read in the background, kept as columns with their default report (a few at a time)."""

    def __init__(self, size: int = 4) -> None:
        self._loaded = Lru(size)
        self._other_devices = Lru(16)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpuinsight-snapshot")

    def get(self, entry: FileEntry, device: Optional[int]) -> Dict[str, Any]:
        """The report of `entry` (for `device`, else the default one). Raises NotReady while it is read,
        SnapshotError when it is no readable snapshot."""
        if is_url(entry.path):
            raise SnapshotError(entry.path, "memory snapshots are read from a local logdir only")
        key = (entry.path, entry.version)
        future = self._loaded.get(key, lambda: self._pool.submit(_read, entry.path))
        if not future.done():
            raise NotReady(f"reading the memory snapshot {entry.path.rsplit('/', 1)[-1]}")
        snap, default = future.result()
        if device is None or device == default["device"]:
            return default
        if device not in default["devices"]:
            known = ", ".join(map(str, default["devices"])) or "none"
            raise params.BadRequest(f"parameter 'device' must be one of: {known}")
        return self._other_devices.get((key, device), lambda: report(snap, device))


def _read(path: str):
    snap: Snapshot = load_snapshot(path)
    return snap, report(snap)


def snapshot_route(plugin, reports: SnapshotReports, request) -> Dict[str, Any]:
    run = params.text(request, "run", required=True)
    entries = plugin.service.memory_snapshots(run)
    if not entries:  # not an error: most runs hold none, and the tab asks for every run
        return {"run": run, "file": None, "files": [],
                "message": "no memory snapshot (*.pickle or *.pickle.gz beside the run's traces)"}
    names = [_name(e) for e in entries]
    name = params.choice(request, "file", names, names[0])
    device = params.integer(request, "device", -1, 0, MAX_DEVICE) if request.args.get("device") else None
    answer = reports.get(entries[names.index(name)], device)
    return {"run": run, "file": name, "files": names, **{k: v for k, v in answer.items() if k != "path"},
            **_run_steps(plugin, run, answer)}


def _run_steps(plugin, run: str, answer: Dict[str, Any]) -> Dict[str, Any]:
    """The run's profiler steps (its first worker's analysed spans, from their stored summaries) lined up with the
    snapshot's clock, or why not; the snapshot is shown either way."""
    try:
        worker = plugin.service.run_json(run)["workers"][0]["worker"]
        memory = plugin.service.sections(run, worker, "all", "memory")
        timeline = dict((state.key, section) for state, section in plugin.service.sections(run, worker, "all",
                                                                                             "timeline"))
    except (GpuInsightError, IndexError) as exc:
        return {"steps": [], "clock": f"the run's traces are not analysed ({exc}): steps not shown"[:200]}
    spans = [(section.info.get("steps") or [], _base_us(timeline.get(state.key))) for state, section in memory
             if not section.error]
    return align_steps(spans, answer.get("start_us"), answer.get("end_us"))


def _base_us(section) -> float:
    if section is None or section.error:
        return 0.0
    return float(section.info.get("base_us") or 0.0)


def compare_route(plugin, reports: SnapshotReports, request) -> Dict[str, Any]:
    runs = [params.text(request, f"{side}_run", required=True) for side in ("a", "b")]
    entries = [plugin.service.memory_snapshots(run) for run in runs]
    missing = [run for run, found in zip(runs, entries) if not found]
    if missing:
        return {"a_run": runs[0], "b_run": runs[1], "at_peak": [],
                "message": f"run {missing[0]!r} holds no memory snapshot"}
    result = compare(*(reports.get(found[0], None) for found in entries))
    names = [_name(found[0]) for found in entries]
    return {**result, "a": names[0], "b": names[1], "a_run": runs[0], "b_run": runs[1]}


def _name(entry: FileEntry) -> str:
    return entry.path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
