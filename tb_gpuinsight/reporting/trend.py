"""Trends of a logdir read from files (the CLI and the Python API): one digest per run (its first worker, every
span), then `analysis.diff.trend`. The plugin's `/trend` route builds the same digests from its stored summaries."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from ..analysis.diff.stats import threshold
from ..analysis.diff.trend import Digest, check_metric, digest, recording_order, trend
from ..errors import ConfigError, GpuInsightError


def logdir_trend(logdir: "os.PathLike[str] | str", metric: str = "step", pct: float = 5.0,
                 order_by: Optional[str] = None, **options: Any) -> Dict[str, Any]:
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
    for run in discover(logdir):
        if not run.workers:
            continue
        worker = sorted(run.workers)[0]
        spans = run.workers[worker]
        try:
            side = side_from_path(run.path, worker=worker, label=run.name, **options)
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
    return out


def _hparam(folder: str, name: str) -> Any:
    """The run's value of hparam `name` (None when it has none: such runs come last)."""
    from ..capture.scalars import read_hparams

    value = read_hparams(folder).get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else \
        (None if value is None else str(value))
