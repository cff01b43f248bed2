"""The MCP server's reach into a logdir: the plugin's own service (discovery, summaries kept in a summary store or
in memory, analyses on worker processes) and the plugin's JSON routes, called in process. Every figure a tool
answers with is what the TensorBoard tab shows for the same selection; nothing is analysed here.

Runs, workers and spans are names looked up among the ones discovery found (the routes validate every parameter
and never take a path from a request), so no tool reads outside the logdir.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from ..errors import GpuInsightError
from ..trace.source import is_url

RETRY_POLL_S = 0.5
MAX_NAMES_IN_ERROR = 20


class ToolProblem(GpuInsightError):
    """A tool call that cannot be answered: the one-line reason the assistant reads."""


class Desk:
    """One logdir served read-only: `get(route, **args)` answers as the plugin's route does."""

    def __init__(self, logdir: str, store: Optional[str] = None, devices_file: Optional[str] = None,
                 workers: Optional[int] = None, max_trace_gb: Optional[float] = None, wait_s: float = 30.0) -> None:
        """`store`: a summary store path or URL (as `--gpuinsight_store`); None keeps summaries in memory.
        `wait_s`: how long a call waits for a span still being analysed before answering "retry later"."""
        from tensorboard.plugins import base_plugin

        from ..plugin import GpuInsightPlugin
        from ..service import LogdirService

        if not is_url(logdir):
            logdir = os.path.abspath(os.path.expanduser(logdir))
        self.logdir = logdir
        self.wait_s = wait_s
        self.service = LogdirService(logdir, store="" if store is None else store, devices_file=devices_file,
                                     workers=workers, max_trace_gb=max_trace_gb, deferred=True)
        self.service.scan()  # runs listed before the first call; analysis starts once `open` is called
        self.plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=logdir, flags=None), service=self.service)
        self._apps = self.plugin.get_plugin_apps()

    def open(self) -> None:
        """Start analysing (worker processes are spawned from here on, e.g. once stdio is claimed)."""
        self.service.serve()

    def close(self) -> None:
        self.service.stop()

    # ------------------------------------------------------------------------------------------ routes

    def get(self, route: str, **args: Any) -> Any:
        """The route's answer (JSON as Python data, or a document's text). Raises ToolProblem with the route's
        one-line error; waits up to `wait_s` for spans still being analysed, then says when to call again."""
        from werkzeug.test import Client

        query = {k: str(v) for k, v in args.items() if v is not None}
        deadline = time.monotonic() + self.wait_s
        while True:
            response = Client(self._apps[route]).get(route, query_string=query)
            body = response.get_data(as_text=True)
            if response.status_code == 200:
                return json.loads(body) if response.mimetype == "application/json" else body
            reason = _error_text(body)
            if response.status_code != 503:
                raise ToolProblem(reason)
            if time.monotonic() >= deadline:
                raise ToolProblem(f"{reason}: still being analysed; call again in a few seconds")
            time.sleep(RETRY_POLL_S)

    def get_settled(self, route: str, **args: Any) -> Any:
        """`get` for a route that answers with what is ready and counts the rest in `pending` (the ranks of a
        run): asked again until nothing is pending or `wait_s` has passed."""
        deadline = time.monotonic() + self.wait_s
        answer = self.get(route, **args)
        while answer.get("pending") and time.monotonic() < deadline:
            time.sleep(RETRY_POLL_S)
            answer = self.get(route, **args)
        return answer

    def direct(self, fn, *args: Any) -> Any:
        """`fn(*args)` over the service (for what no route answers, e.g. a report side): waits for spans still
        being analysed as `get` does; the service's errors become ToolProblem."""
        from ..service import NotReady

        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return fn(*args)
            except NotReady as exc:
                if time.monotonic() >= deadline:
                    raise ToolProblem(f"{exc}: still being analysed; call again in a few seconds") from None
            except GpuInsightError as exc:
                raise ToolProblem(" ".join(str(exc).split())) from None
            time.sleep(RETRY_POLL_S)

    # ------------------------------------------------------------------------------------------ selections

    def runs(self) -> List[Dict[str, Any]]:
        return self.get("/runs")["runs"]

    def run(self, run: str) -> Dict[str, Any]:
        """One run as `/runs` lists it; an unknown name is a ToolProblem that lists the known ones."""
        check_text("run", run)
        for item in self.runs():
            if item["run"] == run:
                return item
        names = [r["run"] for r in self.runs()]
        listed = ", ".join(repr(n) for n in names[:MAX_NAMES_IN_ERROR]) + (" ..." if len(names) > MAX_NAMES_IN_ERROR
                                                                         else "")
        raise ToolProblem(f"unknown run {run!r}; runs: {listed or '(none found in the logdir yet)'}")

    def selection(self, run: str, worker: Optional[str] = None, span: Optional[str] = None) -> Tuple[str, str, str]:
        """(run, worker, span): the worker defaults to the run's first, the span to "all" (every analysed span
        of that worker, as the tab's "all spans" and the Python API's run directory)."""
        info = self.run(run)
        workers = [w["worker"] for w in info["workers"]]
        if worker in (None, ""):
            if not workers:
                raise ToolProblem(f"run {run!r} has no readable trace" + _first_error(info))
            worker = workers[0]
        elif worker not in workers and worker != "*":
            raise ToolProblem(f"run {run!r} has no worker {worker!r}; workers: {', '.join(workers)}")
        check_text("span", span or "")
        return run, worker, span or "all"

    def first_span(self, run: str, worker: str, span: str) -> str:
        """A single span: `span` itself, or for "all" the worker's first span (the timeline is per span)."""
        if span != "all":
            return span
        for w in self.run(run)["workers"]:
            if w["worker"] == worker and w["spans"]:
                return w["spans"][0]["span"]
        raise ToolProblem(f"worker {worker!r} of run {run!r} has no span")


def check_text(name: str, value: str, limit: int = 500) -> None:
    """A string argument: bounded and printable (the routes check again)."""
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise ToolProblem(f"argument {name!r} must be a string of at most {limit} characters")


def _error_text(body: str) -> str:
    try:
        return str(json.loads(body).get("error") or "error")
    except (ValueError, AttributeError):
        return " ".join(body.split())[:300] or "error"


def _first_error(info: Dict[str, Any]) -> str:
    errors = info.get("errors") or []
    return f" ({errors[0]['file']}: {errors[0]['reason']})" if errors else ""
