"""Trends of a logdir for the CLI and the Python API: one digest per run (its first worker, every span), then
`analysis.diff.trend`. With a summary store (`tb-gpuinsight summarize LOGDIR --store DIR`, or the plugin's cache
directory), each run is read from its spans' stored summaries and no trace is read; a run the store lacks is read
from its files. The plugin's `/trend` route builds the same digests from its own stored summaries."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from ..analysis.diff.stats import threshold
from ..analysis.diff.trend import Digest, check_metric, digest, recording_order, trend
from ..errors import ConfigError, GpuInsightError


def logdir_trend(logdir: "os.PathLike[str] | str", metric: str = "step", pct: float = 5.0,
                 order_by: Optional[str] = None, store: Optional[str] = None, **options: Any) -> Dict[str, Any]:
    """The trend of every run under `logdir` (see `tb_gpuinsight.trend`)."""
    from ..logdir import discover
    from .sides import side_from_path

    try:
        check_metric(metric)
        pct = threshold(pct, "threshold")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    digests: List[Digest] = []
    problems: List[str] = []
    from ..trace.source import is_url

    remote = is_url(os.fspath(logdir))
    if remote and not store:
        raise ConfigError(f"{os.fspath(logdir)}: the trend of a remote logdir reads its summaries: give --store "
                          "(the store `tb-gpuinsight summarize LOGDIR --store DIR` filled)")
    stored = _Stored(store, logdir, options) if store else None
    for run in discover(logdir):
        if not run.workers:
            continue
        worker = sorted(run.workers)[0]
        spans = run.workers[worker]
        try:
            side = stored and stored.side(run, worker)
            if side is None and remote:
                raise ConfigError("not in the store: summarise it first")
            side = side or side_from_path(run.path, worker=worker, label=run.name, **options)
        except GpuInsightError as exc:  # one unreadable run never hides the others
            problems.append(f"{run.name}: {exc}")
            continue
        order = _hparam(run.path, order_by) if order_by else \
            recording_order([s.stamp for s in spans], [s.trace.mtime_ns for s in spans])
        digests.append(digest(run.name, worker, order, side.overview, side.eff))
    if not digests:
        raise ConfigError(f"{os.fspath(logdir)}: no run with a readable trace" +
                          (f" ({'; '.join(problems)})" if problems else ""))
    out = trend(digests, metric, pct)
    out["order"] = f"hparam {order_by}" if order_by else "recording time (earliest span stamp)"
    out["problems"] = problems
    out["from_store"] = stored.runs if stored else 0
    return out


class _Stored:
    """Runs read from a summary store: each span's summary found by the key the plugin and `summarize` give it,
    rated as the plugin rates it."""

    def __init__(self, url: str, logdir: "os.PathLike[str] | str", options: Dict[str, Any]) -> None:
        from ..estimate.devices import load_datasheet
        from ..store import open_store
        from ..trace.source import is_url

        root = os.fspath(logdir)
        self.root = root if is_url(root) else os.path.abspath(root)
        self.store = open_store(url)
        self.datasheet = load_datasheet(options.get("devices_file"))
        self.dtype = options.get("dtype") or "auto"
        self.device = options.get("device")
        self.runs = 0

    def side(self, run, worker: str):
        """The run's side from its summaries, or None when one of its spans has no valid summary."""
        from ..sections import Section
        from ..store.envelope import CorruptSummary, load_summary
        from ..store.jobs import span_job
        from .sides import SpanPart, make_side

        parts = []
        for span in run.workers[worker]:
            job = span_job(self.root, run, span)
            data = self.store.get(job.key)
            if data is None:
                return None
            try:
                summary = load_summary(data, job.identity)
            except CorruptSummary:
                return None
            eff = summary.eff.rerate(self.dtype, self.datasheet, self.device)
            overview = summary.sections.get("overview") or Section("overview", error="not in this summary")
            parts.append(SpanPart(span.name, overview, summary.sections.get("memory"), eff))
        self.runs += 1
        return make_side(run.name, worker, parts)


def _hparam(folder: str, name: str) -> Any:
    """The run's value of hparam `name` (None when it has none: such runs come last)."""
    from ..capture.scalars import read_hparams

    value = read_hparams(folder).get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else \
        (None if value is None else str(value))
