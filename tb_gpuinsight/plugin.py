"""The TensorBoard plugin: flags, the route table and thin handlers over `LogdirService`.

Every route answers JSON (`{"error": "one line"}` with a 4xx/5xx status on failure). Route parameters are
validated against what discovery found: a run, worker or span is looked up by name among discovered ones and no
request value is ever used as a path, so no route can read outside the logdir.
"""
from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional

import numpy as np
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from .analysis.efficiency import AUTO, Efficiency
from .analysis.rows import SORTABLE, group_rows, name_filter, sort_order
from .errors import GpuInsightError
from .estimate.devices import DTYPES
from .service import ALL_SPANS, LogdirService, NotFound, NotReady

PLUGIN_NAME = "gpuinsight"
_STATIC = os.path.join(os.path.dirname(__file__), "static")
_MAX_TEXT = 500
_MAX_LIMIT = 5000


class BadRequest(GpuInsightError):
    """A route parameter that is missing or malformed."""


class GpuInsightPlugin(base_plugin.TBPlugin):
    """Kernel efficiency, diffs, tensor shapes and execution graphs of PyTorch profiler traces."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, service: Optional[LogdirService] = None) -> None:
        flags = context.flags
        logdir = os.path.abspath(os.path.expanduser(context.logdir)) if context.logdir else ""
        self.service = service or LogdirService(
            logdir,
            cache_dir=_flag(flags, "gpuinsight_cache_dir"),
            devices_file=_flag(flags, "gpuinsight_devices") or os.environ.get("TB_GPUINSIGHT_DEVICES"),
            extra_args=[a for a in (_flag(flags, "gpuinsight_extra_args") or "").split(",") if a.strip()],
            workers=_flag(flags, "gpuinsight_workers"),
            scan_interval=_flag(flags, "gpuinsight_scan_interval") or 10.0,
        )
        self.service.start()
        self._lock = threading.Lock()
        self._answers: "OrderedDict[tuple, str]" = OrderedDict()

    def is_active(self) -> bool:
        # Never does I/O: the scanner thread sets the flag, and it stays true once a trace was seen.
        return self.service.active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="GPU Insight")

    def get_plugin_apps(self) -> Dict[str, Callable]:
        return {
            "/index.js": self._serve_js,
            "/runs": self._json_route(lambda req: self.service.runs_json(), cached=False),
            "/devices": self._json_route(self._devices),
            "/kernels": self._json_route(self._kernels),
            "/roofline": self._json_route(self._roofline),
            "/kernel_ops": self._json_route(self._kernel_ops),
            "/trace": self._trace,
        }

    # ------------------------------------------------------------------------------------------ plumbing

    @wrappers.Request.application
    def _serve_js(self, request):
        with open(os.path.join(_STATIC, "index.js"), "rb") as f:
            return http_util.Respond(request, f.read(), "text/javascript")

    def _json_route(self, handler: Callable[[wrappers.Request], Any], cached: bool = True) -> Callable:
        @wrappers.Request.application
        def app(request):
            try:
                return http_util.Respond(request, self._body(request, handler, cached), "application/json")
            except BadRequest as exc:
                return _error(request, str(exc), 400)
            except NotFound as exc:
                return _error(request, str(exc), 404)
            except NotReady as exc:
                return _error(request, str(exc), 503)
            except GpuInsightError as exc:
                return _error(request, str(exc), 400)
        return app

    def _body(self, request, handler: Callable, cached: bool) -> str:
        """JSON text of a route; answers for analysed data are reused until the logdir's state changes."""
        if not cached:
            return _dumps(handler(request))
        key = (request.path, request.query_string, self.service.generation)
        with self._lock:
            hit = self._answers.get(key)
            if hit is not None:
                self._answers.move_to_end(key)
                return hit
        body = _dumps(handler(request))
        with self._lock:
            self._answers[key] = body
            while len(self._answers) > 512:
                self._answers.popitem(last=False)
        return body

    def _selection(self, request) -> Efficiency:
        run = _text(request, "run", required=True)
        worker = _text(request, "worker", required=True)
        span = _text(request, "span", default=ALL_SPANS)
        dtype = _choice(request, "dtype", (AUTO,) + tuple(DTYPES), AUTO)
        return self.service.analysis(run, worker, span, dtype)

    # ------------------------------------------------------------------------------------------ routes

    def _devices(self, request) -> Dict[str, Any]:
        eff = self._selection(request)
        return {"devices": eff.summary(), "dtypes": list(DTYPES)}

    def _kernels(self, request) -> Dict[str, Any]:
        eff = self._selection(request)
        device = _device(request)
        group = _choice(request, "group", ("name", "op"), "name")
        table = eff.by_name(device) if group == "name" else eff.by_op(device)
        mask = name_filter(table, _text(request, "filter", default=""))
        op = _text(request, "op", default="")
        if op and "op_name" in table:
            mask &= name_filter(table, op, column="op_name")
        sort = _choice(request, "sort", tuple(sorted(SORTABLE)), "total_us")
        descending = _choice(request, "order", ("desc", "asc"), "desc") == "desc"
        order = sort_order(table, sort, descending)
        order = order[mask[order]]
        offset = _int(request, "offset", 0, 0, 10 ** 9)
        limit = _int(request, "limit", 200, 1, _MAX_LIMIT)
        return {"total": int(len(order)), "dtype": eff.dtype, "group": group,
                "rows": group_rows(table, order[offset: offset + limit].tolist())}

    def _roofline(self, request) -> Dict[str, Any]:
        eff = self._selection(request)
        device = _device(request)
        table = eff.by_name(device)
        rows = [r for r in group_rows(table) if r["intensity"] and r["tflops"]]
        report = eff.devices.get(device) if device is not None else next(iter(eff.devices.values()), None)
        dtype = eff.dtype if eff.dtype != AUTO else _main_dtype(rows)
        peak = report.match.peak_tflops(dtype) if report and dtype else None
        dram = report.match.dram_gbps if report else None
        return {"dtype": dtype, "peak_tflops": peak, "dram_gbps": dram,
                "ridge": report.match.ridge_point(dtype) if report and dtype else None,
                "points": [{k: r[k] for k in ("name", "intensity", "tflops", "total_us", "count", "pct_peak",
                                              "dtype", "gbps")} for r in rows]}

    def _kernel_ops(self, request) -> Dict[str, Any]:
        eff = self._selection(request)
        name = _text(request, "name", required=True)
        acts = eff.activities
        codes = [i for i, text in enumerate(acts.strings["name"]) if text == name]
        mask = np.isin(acts["name"], codes)
        device = _device(request)
        if device is not None:
            mask &= acts["device"] == device
        return {"name": name, "ops": launching_ops(eff, mask)}

    @wrappers.Request.application
    def _trace(self, request):
        try:
            run = _text(request, "run", required=True)
            worker = _text(request, "worker", required=True)
            span = _text(request, "span", required=True)
            entry = self.service.span_entry(run, worker, span)
            eff = self._analysis_for_download(entry.path)
        except BadRequest as exc:
            return _error(request, str(exc), 400)
        except NotFound as exc:
            return _error(request, str(exc), 404)
        except GpuInsightError as exc:
            return _error(request, str(exc), 422)
        from .analysis.augment import augmented_args, augmented_chunks

        chunks = _gzip_stream(augmented_chunks(entry.path, augmented_args(eff)))
        name = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$", "", os.path.basename(entry.path)) + ".augmented.json.gz"
        response = wrappers.Response(chunks, mimetype="application/gzip", direct_passthrough=True)
        response.headers["Content-Disposition"] = f'attachment; filename="{_safe_filename(name)}"'
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    def _analysis_for_download(self, path: str) -> Efficiency:
        from . import load
        from .analysis.efficiency import analyze_trace

        return analyze_trace(load(path, extra_args=self.service.extra_args), datasheet=self.service.datasheet())


def launching_ops(eff: Efficiency, mask: np.ndarray) -> list:
    """The ops that launched the selected activities, grouped by op name and input shapes."""
    acts = eff.activities
    rows = np.flatnonzero(mask)
    if not len(rows):
        return []
    keys = np.stack([acts["op_name"][rows], acts["op_shape"][rows]], axis=1).astype(np.int64)
    groups, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    flops = acts["flops"][rows]
    known = ~np.isnan(flops)
    total = np.bincount(inverse, weights=acts["dur"][rows])
    count = np.bincount(inverse)
    flop_sum = np.bincount(inverse, weights=np.where(known, flops, 0.0))
    has_flops = np.bincount(inverse, weights=known) > 0
    first = np.full(len(groups), -1)
    first[inverse[::-1]] = rows[::-1]
    op_names, reasons = acts.strings["op_name"], acts.strings["flops_reason"]
    out = []
    for g, (op, shape) in enumerate(groups.tolist()):
        dims, types, concrete = eff.shapes.get(shape, (None, None, None))
        out.append({"op": op_names[op] if op >= 0 else None, "count": int(count[g]), "total_us": float(total[g]),
                    "flops": float(flop_sum[g]) if has_flops[g] else None,
                    "flops_reason": reasons[acts["flops_reason"][first[g]]],
                    "input_dims": dims, "input_types": types, "concrete_inputs": concrete})
    return sorted(out, key=lambda g: -g["total_us"])


def _main_dtype(rows) -> Optional[str]:
    """The dtype with the most kernel time among rated rows (what an "auto" roofline draws roofs for)."""
    time: Dict[str, float] = {}
    for r in rows:
        if r.get("dtype"):
            time[r["dtype"]] = time.get(r["dtype"], 0.0) + (r["total_us"] or 0.0)
    return max(time, key=time.get) if time else None


# ---------------------------------------------------------------------------------------------- params

def _text(request, name: str, default: Optional[str] = None, required: bool = False) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        if required:
            raise BadRequest(f"missing parameter {name!r}")
        return default if default is not None else ""
    if len(value) > _MAX_TEXT or "\x00" in value:
        raise BadRequest(f"parameter {name!r} is too long or malformed")
    return value


def _choice(request, name: str, allowed, default: str) -> str:
    value = _text(request, name, default=default)
    if value not in allowed:
        raise BadRequest(f"parameter {name!r} must be one of {', '.join(allowed)}")
    return value


def _int(request, name: str, default: int, lo: int, hi: int) -> int:
    value = _text(request, name, default=str(default))
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer") from None
    if not lo <= number <= hi:
        raise BadRequest(f"parameter {name!r} must be between {lo} and {hi}")
    return number


def _device(request) -> Optional[int]:
    if not request.args.get("device"):
        return None
    return _int(request, "device", 0, 0, 1 << 16)


def _flag(flags, name: str):
    return getattr(flags, name, None) if flags is not None else None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))


def _error(request, message: str, status: int):
    return http_util.Respond(request, _dumps({"error": message}), "application/json", code=status)


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]


def _gzip_stream(chunks):
    import zlib

    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for piece in chunks:
        data = compressor.compress(piece)
        if data:
            yield data
    yield compressor.flush()


class GpuInsightLoader(base_plugin.TBLoader):
    """Adds the plugin's flags to `tensorboard` and builds the plugin."""

    def define_flags(self, parser) -> None:
        group = parser.add_argument_group("gpuinsight plugin")
        group.add_argument("--gpuinsight_cache_dir", default=None,
                           help="where analysed trace summaries are kept (default: ~/.cache/tb_gpuinsight)")
        group.add_argument("--gpuinsight_devices", default=None,
                           help="JSON file adding or overriding device datasheet rows")
        group.add_argument("--gpuinsight_extra_args", default="",
                           help="comma-separated extra trace event args to keep")
        group.add_argument("--gpuinsight_workers", type=int, default=None,
                           help="worker processes that analyse traces (default: min(cores, 4))")
        group.add_argument("--gpuinsight_scan_interval", type=float, default=10.0,
                           help="seconds between scans of the logdir for new runs and spans")

    def load(self, context: base_plugin.TBContext) -> GpuInsightPlugin:
        return GpuInsightPlugin(context)
