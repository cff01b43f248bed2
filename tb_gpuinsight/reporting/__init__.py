"""One report for people, CI and agents: the headline figures, ranked recommendations, wasteful kernels, memory
peak, the distributed picture and the changes from a baseline, on one page.

Parts: `sides` (what is read of a selection), `build` (the report as data, schema in docs/reference.md), `gate`
(slower beyond the noise?), `markdown` and `html` (renderings). `make_report` is the CLI's and the API's entry;
the plugin's route builds the sides from its stored sections and calls `build_report` and `render`.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from ..errors import ConfigError, GpuInsightError
from ..lazy import lazy_getattr

FORMATS = ("json", "md", "html")
# Imported on first use: `tb-gpuinsight diff` reads the gate's metrics from this package without the analyses
# that building a report needs.
_LAZY = {"SCHEMA_VERSION": "build", "build_report": "build", "Side": "sides"}


def render(report: Dict[str, Any], format: str) -> str:
    """The report as text: "json" (indented, keys in a fixed order), "md" (Markdown) or "html" (standalone)."""
    if format == "json":
        return json.dumps(report, indent=1, allow_nan=False) + "\n"
    if format in ("md", "markdown"):
        from .markdown import render as to_md

        return to_md(report)
    if format == "html":
        from .html import render as to_html

        return to_html(report)
    raise ConfigError(f"unknown report format {format!r}: use one of {', '.join(FORMATS)}")


def make_report(path: "os.PathLike[str] | str", baseline: "Optional[os.PathLike[str] | str]" = None,
                worker: Optional[str] = None, devices_file: Optional[str] = None, **options: Any) -> Dict[str, Any]:
    """The report of a trace or run directory (one worker's spans; every rank's for the Distributed part), with
    `baseline` (a trace or run directory) compared. Options are those of `tb_gpuinsight.analyze`."""
    from .build import build_report
    from .sides import run_workers, side_from_path

    options["devices_file"] = devices_file
    side = side_from_path(path, worker, **options)
    base = side_from_path(baseline, worker if worker in run_workers(baseline) else None, **options) \
        if baseline is not None else None
    ranks, note = _ranks(path, devices_file)
    report = build_report(side, base, ranks)
    if note:
        report["notes"].append(note)
    return report


def _ranks(path, devices_file: Optional[str]):
    """The Distributed view of a run of several workers (None for a trace or a one-worker run), or None and why."""
    from .sides import run_workers

    if len(run_workers(path)) < 2:
        return None, ""
    from ..analysis.ranks.report import from_run_dir
    from ..estimate.devices import load_datasheet

    try:
        return from_run_dir(os.fspath(path), -1, load_datasheet(devices_file)), ""
    except GpuInsightError as exc:  # several workers but no distributed data: the report goes on without it
        return None, f"no Distributed section: {exc}"


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = ["make_report", "render", "build_report", "Side", "SCHEMA_VERSION", "FORMATS"]
