"""Route of the header's Report download: the one-page report of a selection, from the stored sections (no trace
is read here), as `tb-gpuinsight report` writes it.

    /report  ?run&worker&span[&b_run&b_worker&b_span][&format=json|md|html][&device_name][&cycle]
             -> the report: JSON (schema in docs/reference.md), or a Markdown / HTML file download

`b_*` name a baseline selection to compare with; `device_name` (a datasheet row) rates both sides as that device,
as the other tabs do for a trace that does not name its GPU. Worker "*" (All ranks) reports the run's first worker, with the
Distributed section over every rank. Errors answer JSON `{"error": "..."}` with a 4xx status (503 while loading).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional

from ..errors import GpuInsightError
from ..reporting import FORMATS, build_report, render
from ..reporting.sides import Side, SpanPart, make_side
from ..service import ALL_WORKERS
from . import Document, params
from .ranks import rank_report

_TYPES = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8",
          "json": "application/json; charset=utf-8"}
_SUFFIX = {"md": ".md", "html": ".html", "json": ".json"}


def routes(plugin) -> Dict[str, Callable]:
    """`/report`: the report as a document of the asked format (JSON, or a Markdown / HTML download)."""
    def report_route(request) -> Document:
        fmt = params.choice(request, "format", FORMATS, "json")
        return document(report(plugin, request), fmt, params.text(request, "run"))

    return {"/report": report_route}


def document(data: Dict[str, Any], fmt: str, run: str) -> Document:
    """The report rendered as `fmt`; Markdown and HTML as a file download named after the run, whose page's CSP
    forbids any script."""
    if fmt == "json":
        return Document(render(data, fmt), _TYPES[fmt])
    return Document(render(data, fmt), _TYPES[fmt], (
        ("Content-Disposition", f'attachment; filename="{_filename(run, fmt)}"'),
        ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")))


def report(plugin, request) -> Dict[str, Any]:
    """The report of the selection (and of its baseline when `b_run` is given) as data."""
    run, worker, span = params.selection(request)
    service = plugin.service
    workers = [w["worker"] for w in service.run_json(run)["workers"]]
    if worker == ALL_WORKERS:
        if not workers:
            raise params.BadRequest(f"run {run!r} has no worker")
        worker = workers[0]
    device_name = params.device_name(request, service.datasheet())
    subject = side(plugin, run, worker, span, device_name)
    baseline = None
    if params.text(request, "b_run"):
        baseline = side(plugin, *params.selection(request, "b_"), device_name)
    ranks, note = _ranks(plugin, request) if len(workers) > 1 else (None, "")
    data = build_report(subject, baseline, ranks)
    if note:
        data["notes"].append(note)
    return data


def side(plugin, run: str, worker: str, span: str, device_name: Optional[str] = None) -> Side:
    """A report side from the service's stored sections and cached analyses (rated as `device_name` if given)."""
    service = plugin.service
    memory = {state.span: section for state, section in service.sections(run, worker, span, "memory")}
    parts = [SpanPart(state.span, section, memory.get(state.span),
                      service.analysis(run, worker, state.span, device_name=device_name))
             for state, section in service.sections(run, worker, span, "overview")]
    label = f"{run} / {worker}" + ("" if span == params.ALL_SPANS else f" / {span}")
    return make_side(label, worker, parts, service.analysis(run, worker, span, device_name=device_name))


def _ranks(plugin, request):
    """The Distributed view of the run, or None and why (a run of several workers without distributed data)."""
    try:
        report, pending, _failed = rank_report(plugin, request)
    except GpuInsightError as exc:
        return None, f"no Distributed section: {exc}"
    return report, (f"Distributed section without {pending} rank(s) still being analysed" if pending else "")


def _filename(run: str, fmt: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", run)[:80].strip("._") or "run"
    return f"gpuinsight-report-{name}{_SUFFIX[fmt]}"
