"""Route of the header's Report download: the one-page report of a selection, from the stored sections (no trace
is read here), as `tb-gpuinsight report` writes it.

    /report  ?run&worker&span[&b_run&b_worker&b_span][&format=json|md|html][&cycle]
             -> the report: JSON (schema in docs/reference.md), or a Markdown / HTML file download

`b_*` name a baseline selection to compare with. Worker "*" (All ranks) reports the run's first worker, with the
Distributed section over every rank. Errors answer JSON `{"error": "..."}` with a 4xx status (503 while loading).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict

from werkzeug import wrappers

from ..errors import GpuInsightError
from ..reporting import FORMATS, build_report, render
from ..reporting.sides import Side, SpanPart, make_side
from ..service import ALL_WORKERS
from . import params
from .ranks import rank_report

_TYPES = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8",
          "json": "application/json; charset=utf-8"}
_SUFFIX = {"md": ".md", "html": ".html", "json": ".json"}


def routes(plugin) -> Dict[str, Callable]:
    """No JSON-only routes: the report is served by `apps` (it answers Markdown and HTML too)."""
    return {}


def apps(plugin) -> Dict[str, Callable]:
    """WSGI apps of this module: `/report`."""
    from ..plugin import _error, _internal_error, _relative

    @wrappers.Request.application
    def report_app(request):
        try:
            fmt = params.choice(request, "format", FORMATS, "json")
            text = _relative(render(report(plugin, request), fmt), plugin.service.logdir)
        except GpuInsightError as exc:
            return _error(request, exc, plugin.service.logdir)
        except Exception as exc:  # a bug: logged with its traceback, answered as one line of JSON
            return _internal_error(request, exc)
        response = wrappers.Response(text, content_type=_TYPES[fmt])
        response.headers["X-Content-Type-Options"] = "nosniff"
        if fmt != "json":  # a download: the name says what it is; the page's CSP forbids any script
            response.headers["Content-Disposition"] = f'attachment; filename="{_filename(request, fmt)}"'
            response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
        return response

    return {"/report": report_app}


def report(plugin, request) -> Dict[str, Any]:
    """The report of the selection (and of its baseline when `b_run` is given) as data."""
    run, worker, span = params.selection(request)
    service = plugin.service
    workers = [w["worker"] for w in service.run_json(run)["workers"]]
    if worker == ALL_WORKERS:
        if not workers:
            raise params.BadRequest(f"run {run!r} has no worker")
        worker = workers[0]
    side = _side(plugin, run, worker, span)
    baseline = None
    if params.text(request, "b_run"):
        baseline = _side(plugin, *params.selection(request, "b_"))
    ranks, note = _ranks(plugin, request) if len(workers) > 1 else (None, "")
    data = build_report(side, baseline, ranks)
    if note:
        data["notes"].append(note)
    return data


def _side(plugin, run: str, worker: str, span: str) -> Side:
    """A report side from the service's stored sections and cached analyses."""
    service = plugin.service
    memory = {state.span: section for state, section in service.sections(run, worker, span, "memory")}
    parts = [SpanPart(state.span, section, memory.get(state.span), service.analysis(run, worker, state.span))
             for state, section in service.sections(run, worker, span, "overview")]
    label = f"{run} / {worker}" + ("" if span == params.ALL_SPANS else f" / {span}")
    return make_side(label, worker, parts, service.analysis(run, worker, span))


def _ranks(plugin, request):
    """The Distributed view of the run, or None and why (a run of several workers without distributed data)."""
    try:
        report, pending, _failed = rank_report(plugin, request)
    except GpuInsightError as exc:
        return None, f"no Distributed section: {exc}"
    return report, (f"Distributed section without {pending} rank(s) still being analysed" if pending else "")


def _filename(request, fmt: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", params.text(request, "run"))[:80].strip("._") or "run"
    return f"gpuinsight-report-{name}{_SUFFIX[fmt]}"
