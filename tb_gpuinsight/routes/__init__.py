"""JSON routes of the plugin's tabs, one module per tab.

Each module listed in ROUTE_MODULES defines `routes(plugin) -> Dict[str, Callable[[Request], Any]]`: route path
("/diff") to a handler that returns a JSON-ready object or raises `params.BadRequest`, `service.NotFound`,
`service.NotReady`, `service.SpanFailed` or another `GpuInsightError` (answered as 400 / 404 / 503 with Retry-After /
422 / 400 with `{"error": "..."}`; any other exception is logged and answered 500 with `{"error": "..."}`).
A module may also define `apps(plugin) -> Dict[str, wsgi app]` for a route that answers more than JSON
(`/report`: Markdown and HTML downloads). Handlers reach the logdir through `plugin.service` only. Answers are
reused until the logdir's state changes.
"""
ROUTE_MODULES = ("tb_gpuinsight.routes.kernels", "tb_gpuinsight.routes.diff", "tb_gpuinsight.routes.shapes", "tb_gpuinsight.routes.graph",
                 "tb_gpuinsight.routes.overview",
                 "tb_gpuinsight.routes.memory", "tb_gpuinsight.routes.timeline", "tb_gpuinsight.routes.ranks",
                 "tb_gpuinsight.routes.critical_path", "tb_gpuinsight.routes.report")
