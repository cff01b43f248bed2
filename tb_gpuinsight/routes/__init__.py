"""Routes of the plugin's tabs, one module per tab.

Each module listed in ROUTE_MODULES defines `routes(plugin) -> Dict[str, Callable[[Request], Any]]`: route path
("/diff") to a handler that returns a JSON-ready object, or a `Document` for an answer of another content type
(`/report`: Markdown and HTML downloads), or raises `params.BadRequest`, `service.NotFound`, `service.NotReady`,
`service.SpanFailed` or another `GpuInsightError` (answered as 400 / 404 / 503 with Retry-After / 422 / 400 with
`{"error": "..."}`; any other exception is logged and answered 500 with `{"error": "..."}`): errors are JSON
whatever the route answers otherwise. Handlers reach the logdir through `plugin.service` only. JSON answers are
reused until the logdir's state changes; documents are built on each request.
"""
from dataclasses import dataclass
from typing import Tuple

ROUTE_MODULES = ("tb_gpuinsight.routes.kernels", "tb_gpuinsight.routes.diff", "tb_gpuinsight.routes.shapes", "tb_gpuinsight.routes.graph",
                 "tb_gpuinsight.routes.overview",
                 "tb_gpuinsight.routes.memory", "tb_gpuinsight.routes.timeline", "tb_gpuinsight.routes.ranks",
                 "tb_gpuinsight.routes.critical_path", "tb_gpuinsight.routes.report",
                 "tb_gpuinsight.routes.memory_snapshot", "tb_gpuinsight.routes.trend")


@dataclass(frozen=True)
class Document:
    """A route's answer as text of its own content type (JSON by default), with extra headers such as a download's
    Content-Disposition. The logdir's path is taken out of the text as out of every answer."""
    text: str
    content_type: str = "application/json; charset=utf-8"
    headers: Tuple[Tuple[str, str], ...] = ()
