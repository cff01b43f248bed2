"""A store's summaries as Parquet tables for pandas / DuckDB / Spark users: one row per GPU activity (kernels,
memcpy, memset), per (op, device), per step and per collective instance, of every rank at once, each row naming its
trace (run, worker, rank, span).

Kernel rows are rated against the datasheet at export time (as the plugin does on load), so a changed devices file
applies without re-analysing traces. When a store holds several versions of one trace (it was summarised, changed
and summarised again), only the newest is exported; `logdir` restricts the export to the traces a logdir holds now.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..analysis.kernels.efficiency import AUTO
from .envelope import CorruptSummary, Summary, load_summary
from ..errors import ConfigError
from ..estimate.devices import load_datasheet
from ..logdir import split_name
from ..terminal import atomic_file
from ..trace.text import safe_text
from .summaries import open_store

TABLES = ("kernels", "ops", "steps", "collectives")
# What a summary whose sections lack a field or hold a value of another type raises while it becomes tables.
_DAMAGE = (KeyError, IndexError, TypeError, ValueError, OverflowError, AttributeError)


@dataclass
class ExportReport:
    """What was written: rows per table, the summaries used and those skipped (with why)."""
    out: str
    rows: Dict[str, int] = field(default_factory=dict)
    traces: int = 0
    skipped: List[Tuple[str, str]] = field(default_factory=list)

    def lines(self) -> List[str]:
        out = [f"wrote     {self.out}: {self.traces} trace(s)"]
        out += [f"  {name + '.parquet':<22}{self.rows.get(name, 0):>12,} rows" for name in TABLES]
        out += [f"skipped   {name}: {why}" for name, why in self.skipped]
        return out


def export_parquet(store: str, out: str, logdir: Optional[str] = None,
                   devices_file: Optional[str] = None) -> ExportReport:
    """Write `out/{kernels,ops,steps,collectives}.parquet` from every summary in `store` (a path or URL)."""
    try:
        import pandas as pd
        import pyarrow  # noqa: F401  (pandas writes Parquet through it)
    except ImportError:
        raise ConfigError("export-parquet needs pyarrow: pip install 'tb_gpuinsight[parquet]'") from None
    source = open_store(store)
    if not source.remote and not os.path.isdir(source.directory or ""):
        raise ConfigError(f"{store}: no such store directory")
    wanted = _current_names(logdir, source) if logdir else None
    report = ExportReport(out)
    frames: Dict[str, List[Any]] = {name: [] for name in TABLES}
    datasheet = load_datasheet(devices_file)
    for name, summary in _newest(source, report, wanted).items():
        try:
            parts = _frames(name, summary, datasheet)
        except _DAMAGE as exc:  # one summary that does not fit the tables is skipped, not the whole export
            report.skipped.append((safe_text(name), f"{type(exc).__name__}: {exc}"[:200]))
            continue
        for table, frame in parts.items():
            frames[table].append(frame)
        report.traces += 1
    try:
        os.makedirs(out, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{out}: not a folder (a file is in the way); give the folder to write into") from None
    for table, parts in frames.items():
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        with atomic_file(os.path.join(out, f"{table}.parquet"), "wb") as f:  # never a partial file
            frame.to_parquet(f, index=False)
        report.rows[table] = len(frame)
    return report


def _current_names(logdir: str, source) -> Dict[str, str]:
    """{trace name: summary key} of the spans a logdir holds now."""
    from ..logdir import discover
    from ..trace.source import is_url
    from .jobs import logdir_jobs

    root = logdir if is_url(logdir) else os.path.abspath(logdir)
    return {job.identity["path"]: job.key for job in logdir_jobs(root, discover(root))}


def _newest(source, report: ExportReport, wanted: Optional[Dict[str, str]]) -> Dict[str, Summary]:
    """The summary of each trace name (its newest version), loaded; unloadable ones are reported."""
    chosen: Dict[str, Tuple[Tuple[int, str], Summary]] = {}
    for key, data in source.summaries():
        if wanted is not None and key not in wanted.values():
            continue
        try:
            summary = load_summary(data)
        except CorruptSummary as exc:
            report.skipped.append((key, str(exc)))
            continue
        ident = summary.identity or {}
        name = str(ident.get("path") or key)
        version = str(ident.get("version", ""))
        rank = (int(version) if version.isdigit() else 0, version)
        if name not in chosen or rank > chosen[name][0]:
            chosen[name] = (rank, summary)
    return {name: summary for name, (_, summary) in sorted(chosen.items())}


def _frames(name: str, summary: Summary, datasheet) -> Dict[str, Any]:
    """The four tables of one trace, each with the columns that name it."""
    import pandas as pd

    from ..analysis.ranks.collectives import unpack
    from ..analysis.overview.figures import step_rows
    from ..analysis.ranks.report import rank_from_name

    run, _, filename = safe_text(name).rpartition("/")  # names from files: any bytes
    worker, _ = split_name(filename)
    distributed = summary.sections.get("distributed")
    rank = (distributed.info.get("distributed") or {}).get("rank") if distributed and not distributed.error \
        else None
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 1 << 31:
        rank = None  # a summary from before ranks were checked at read time may hold 2**70: no Parquet int64
    ident = {"run": run or ".", "worker": worker, "rank": rank if rank is not None else rank_from_name(worker),
             "span": filename}
    eff = summary.eff.rerate(AUTO, datasheet)
    frames = {"kernels": eff.activities.to_pandas(), "ops": eff.by_op().to_pandas()}
    overview = summary.sections.get("overview")
    frames["steps"] = pd.DataFrame(step_rows(overview, filename) if overview and not overview.error else [])
    frames["collectives"] = (unpack(distributed.arrays["collectives"], distributed.info["collective_strings"])
                             .to_pandas() if distributed and not distributed.error else pd.DataFrame())
    for frame in frames.values():
        for i, (col, value) in enumerate(ident.items()):
            if col not in frame.columns:
                frame.insert(i, col, value)
        _plain_strings(frame)
    return frames


def _plain_strings(frame) -> None:
    """Categoricals as plain strings: the categories differ per trace, and concatenating them would fall back to
    object columns anyway; Parquet dictionary-encodes repeated strings itself."""
    for col in frame.columns:
        if str(frame[col].dtype) == "category":
            frame[col] = frame[col].astype(object)
