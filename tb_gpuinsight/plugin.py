"""The TensorBoard plugin: flags, the route table and thin handlers over `LogdirService`.

Every route answers JSON (`{"error": "one line"}` with a 4xx/5xx status on failure). Route parameters are
validated against what discovery found: a run, worker or span is looked up by name among discovered ones and no
request value is ever used as a path, so no route can read outside the logdir.

The logdir may be an object-store URL (`--logdir s3://bucket/logs`, `gs://...`, through fsspec) and summaries may
come from a summary store anywhere (`--gpuinsight_store URL`): runs are listed without downloading traces, and
every tab is served from the store's summaries; only a trace download reads the trace itself, on demand.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Union

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers, wsgi

from .analysis.kernels.efficiency import AUTO, Efficiency
from .errors import GpuInsightError, TraceError
from .estimate.devices import DTYPES
from .jsonutil import finite
from .routes import ROUTE_MODULES, Document, params
from .service import LogdirService, NotFound, NotReady, SpanFailed
from .trace.source import is_url

PLUGIN_NAME = "gpuinsight"
RETRY_AFTER_S = 2  # what a 503 ("still loading") tells the client to wait
log = logging.getLogger(__name__)
_STATIC = os.path.join(os.path.dirname(__file__), "static")


class GpuInsightPlugin(base_plugin.TBPlugin):
    """Kernel efficiency, diffs, tensor shapes and execution graphs of PyTorch profiler traces."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, service: Optional[LogdirService] = None) -> None:
        """Builds the plugin's service from TensorBoard's flags, or serves `service` (already set up by its
        caller). A service of its own discovers runs at once but analyses nothing until TensorBoard serves: the
        first request (the plugin listing's `is_active`, or any route) starts the analysis workers, so a
        TensorBoard that cannot bind its port leaves no analysis running; they stop when the process exits."""
        flags = context.flags
        logdir = context.logdir or ""
        if logdir and not is_url(logdir):
            logdir = os.path.abspath(os.path.expanduser(logdir))
        self.service = service or LogdirService(
            logdir,
            cache_dir=_flag(flags, "gpuinsight_cache_dir"),
            store=_flag(flags, "gpuinsight_store"),
            devices_file=_flag(flags, "gpuinsight_devices") or os.environ.get("TB_GPUINSIGHT_DEVICES"),
            extra_args=[a for a in (_flag(flags, "gpuinsight_extra_args") or "").split(",") if a.strip()],
            workers=_flag(flags, "gpuinsight_workers"),
            scan_interval=_flag(flags, "gpuinsight_scan_interval") or 10.0,
            max_trace_gb=_flag(flags, "gpuinsight_max_trace_gb"),
            deferred=True,
            follow_symlinks=True if _flag(flags, "gpuinsight_follow_symlinks") else None,
        )
        self.service.start()
        self._lock = threading.Lock()
        self._answers: "OrderedDict[tuple, str]" = OrderedDict()

    def is_active(self) -> bool:
        # Never does I/O: the scanner thread sets the flag, and it stays true once a trace was seen. TensorBoard
        # asks while answering a request, so its server is up: analysis may start.
        self.service.serve()
        return self.service.active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="GPU Insight")

    def get_plugin_apps(self) -> Dict[str, Callable]:
        apps: Dict[str, Callable] = {
            "/index.js": self._serve_js,
            "/runs": self._route(lambda req: self.service.runs_json(), cached=False),
            "/trace": self._trace,
        }
        for module_name in ROUTE_MODULES:
            module = importlib.import_module(module_name)
            for path, handler in module.routes(self).items():
                apps[path] = self._route(handler)
        return {path: _get_only(self._serving(app)) for path, app in apps.items()}

    def _serving(self, app: Callable) -> Callable:
        """A route that, once asked, lets the service start analysing (the server is up)."""
        def serving(environ, start_response):
            self.service.serve()
            return app(environ, start_response)
        return serving

    # ------------------------------------------------------------------------------------------ plumbing

    @wrappers.Request.application
    def _serve_js(self, request):
        with open(os.path.join(_STATIC, "index.js"), "rb") as f:
            return http_util.Respond(request, f.read(), "text/javascript")

    def _route(self, handler: Callable[[wrappers.Request], Any], cached: bool = True) -> Callable:
        """The WSGI app of a handler: its JSON answer, or the `Document` it returns; errors always as JSON."""
        @wrappers.Request.application
        def app(request):
            try:
                answer = self._answer(request, handler, cached)
            except GpuInsightError as exc:
                return _error(request, exc, self.service.logdir)
            except Exception as exc:  # a bug: log the traceback here, answer one line of JSON
                return _internal_error(request, exc)
            if isinstance(answer, Document):
                return _document(answer)
            return http_util.Respond(request, answer, "application/json")
        return app

    def _answer(self, request, handler: Callable, cached: bool) -> Union[str, Document]:
        """JSON text of a route (or its document); JSON answers for analysed data are reused until the logdir's
        state changes, documents (downloads) are built on each request."""
        if not cached:
            return _finished(handler(request), self.service.logdir)
        key = (request.path, request.query_string, self.service.generation)
        with self._lock:
            hit = self._answers.get(key)
            if hit is not None:
                self._answers.move_to_end(key)
                return hit
        answer = _finished(handler(request), self.service.logdir)
        if isinstance(answer, Document):
            return answer
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > 512:
                self._answers.popitem(last=False)
        return answer

    def analysis(self, request) -> Efficiency:
        """The analysis a request selects (run, worker, span or "all", dtype, optional `device_name` override)."""
        run, worker, span = params.selection(request)
        dtype = params.choice(request, "dtype", (AUTO,) + tuple(DTYPES), AUTO)
        device_name = params.device_name(request, self.service.datasheet())
        return self.service.analysis(run, worker, span, dtype, device_name)

    @wrappers.Request.application
    def _trace(self, request):
        """The augmented trace of one analysed span, as a file download with a Content-Length: written once per
        version of the file by an analysis worker, then streamed from the cache in small blocks."""
        try:
            run, worker, span = params.selection(request)
            self.service.span_entry(run, worker, span)  # one span, not "all"
            state = self.service.ready_states(run, worker, span)[0]  # a failed span answers 422, a loading one 503
            path = self.service.augmented_trace(state)
            f = open(path, "rb")
        except GpuInsightError as exc:
            return _error(request, exc, self.service.logdir)
        except Exception as exc:
            return _internal_error(request, exc)
        name = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$", "", os.path.basename(state.entry.path)) + ".augmented.json.gz"
        response = wrappers.Response(wsgi.wrap_file(request.environ, f, buffer_size=1 << 16),
                                     mimetype="application/gzip", direct_passthrough=True)
        response.headers["Content-Length"] = str(os.fstat(f.fileno()).st_size)
        response.headers["Content-Disposition"] = f'attachment; filename="{_safe_filename(name)}"'
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


# ---------------------------------------------------------------------------------------------- helpers

def _flag(flags, name: str):
    return getattr(flags, name, None) if flags is not None else None


def _dumps(obj: Any) -> str:
    """Strict JSON. A NaN or infinity that slipped into an answer (from a malformed trace) is sent as null
    (unknown), never as the invalid JSON tokens NaN / Infinity."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, separators=(",", ":"))


_STATUS = ((params.BadRequest, 400), (NotFound, 404), (NotReady, 503), (SpanFailed, 422), (TraceError, 422))


def _error(request, exc: GpuInsightError, logdir: str = ""):
    """`{"error": "one line"}` with the status that fits the error (400 for any other input problem); a 503
    ("still loading") says when to ask again."""
    status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 400)
    headers = [("Retry-After", str(RETRY_AFTER_S))] if status == 503 else None
    body = _relative(_dumps({"error": _one_line(str(exc))}), logdir)
    return http_util.Respond(request, body, "application/json", code=status, headers=headers)


def _finished(answer: Any, logdir: str) -> Union[str, Document]:
    """A handler's answer as sent: JSON text, or its document, without the logdir's path."""
    if isinstance(answer, Document):
        return dataclasses.replace(answer, text=_relative(answer.text, logdir))
    return _relative(_dumps(answer), logdir)


def _document(doc: Document) -> wrappers.Response:
    response = wrappers.Response(doc.text, content_type=doc.content_type)
    response.headers["X-Content-Type-Options"] = "nosniff"
    for name, value in doc.headers:
        response.headers[name] = value
    return response


def _relative(body: str, logdir: str) -> str:
    """JSON text with the logdir's absolute path taken out of file names: answers name files relative to the
    logdir and never show where it lies on the server."""
    if not logdir:
        return body
    prefix = json.dumps(os.path.join(logdir, ""))[1:-1]
    return body.replace(prefix, "")


def _internal_error(request, exc: BaseException):
    log.error("gpuinsight: %s failed", request.path, exc_info=exc)
    text = "internal error while answering this request (see the TensorBoard log)" if not isinstance(
        exc, MemoryError) else "out of memory while answering this request"
    return http_util.Respond(request, _dumps({"error": text}), "application/json", code=500)


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _get_only(app: Callable) -> Callable:
    """Answer 405 (JSON, with Allow) to anything but GET and HEAD."""
    def guarded(environ, start_response):
        if environ.get("REQUEST_METHOD", "GET") in ("GET", "HEAD"):
            return app(environ, start_response)
        body = _dumps({"error": "method not allowed: this route answers GET only"}).encode("utf-8")
        start_response("405 Method Not Allowed", [("Content-Type", "application/json"), ("Allow", "GET, HEAD"),
                                                  ("Content-Length", str(len(body)))])
        return [body]
    return guarded


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]


class GpuInsightLoader(base_plugin.TBLoader):
    """Adds the plugin's flags to `tensorboard` and builds the plugin."""

    def define_flags(self, parser) -> None:
        group = parser.add_argument_group("gpuinsight plugin")
        group.add_argument("--gpuinsight_cache_dir", default=None,
                           help="where analysed trace summaries are kept (default: ~/.cache/tb_gpuinsight)")
        group.add_argument("--gpuinsight_store", default=None, metavar="URL",
                           help="summary store to serve and fill (a path, s3://bucket/prefix, gs://...; "
                                "default: --gpuinsight_cache_dir); `tb-gpuinsight summarize` fills one in batch")
        group.add_argument("--gpuinsight_devices", default=None,
                           help="JSON file adding or overriding device datasheet rows")
        group.add_argument("--gpuinsight_extra_args", default="",
                           help="comma-separated extra trace event args to keep")
        group.add_argument("--gpuinsight_workers", type=int, default=None,
                           help="worker processes that analyse traces (default: min(cores, 4))")
        group.add_argument("--gpuinsight_scan_interval", type=float, default=10.0,
                           help="seconds between scans of the logdir for new runs and spans")
        group.add_argument("--gpuinsight_max_trace_gb", type=float, default=None,
                           help="refuse traces whose uncompressed size passes this many GB "
                                "(default: the memory available to an analysis process / 3)")
        group.add_argument("--gpuinsight_follow_symlinks", action="store_true",
                           help="list runs behind symbolic links that lead out of the logdir (default: skipped, "
                                "unless $TB_GPUINSIGHT_FOLLOW_SYMLINKS is 1)")

    def load(self, context: base_plugin.TBContext) -> GpuInsightPlugin:
        return GpuInsightPlugin(context)
