"""`tb-gpuinsight mcp LOGDIR`: a Model Context Protocol server over stdio (the official `mcp` SDK, the `mcp` extra)
that serves one logdir read-only to a coding assistant: tools for the plugin's views, each run's report as a
resource, and a "diagnose this run" prompt. Tools answer compact JSON (see docs/reference.md, "MCP server"); a
call that cannot be answered is a tool error with a one-line reason, and the server answers the next call.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Annotated, Any, Callable, Literal, Optional
from urllib.parse import quote

from pydantic import Field, ValidationError

from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import Resource, ToolAnnotations

from ..errors import GpuInsightError
from ..version import __version__
from . import tools, views
from .desk import Desk

log = logging.getLogger(__name__)
REPORT_URI = "gpuinsight://report/{run}"

Run = Annotated[str, Field(description="run name exactly as list_runs (and TensorBoard) lists it", max_length=500)]
Worker = Annotated[Optional[str], Field(description="worker (rank) of the run; default: its first worker",
                                        max_length=500)]
Span = Annotated[Optional[str], Field(description="one span (trace file) of the worker, as list_runs lists it; "
                                                  "default: every analysed span of the worker", max_length=500)]
Limit = Annotated[int, Field(description="rows to return (top-N)", ge=1, le=200)]
Offset = Annotated[int, Field(description="rows to skip: the previous answer's next_offset", ge=0)]

INSTRUCTIONS = (
    "GPU Insight serves PyTorch profiler traces of one logdir: per-kernel FLOPs, bytes and efficiency with "
    "provenance, the step time split, ranked recommendations, diffs with a noise-aware regression gate, ranks "
    "and stragglers, critical paths, memory peaks. Start with list_runs, then overview (where the step time goes "
    "and what to do), then top_kernels (by time or waste) and kernel_detail. Times are in the unit each key names "
    "(_ms, _us); percentages end in _pct. A tool error that says 'call again' means the trace is still being "
    "analysed.")


class GpuInsightMCP(MCPServer):
    """MCPServer whose resource list names every run's report (runs come and go with the logdir)."""

    def __init__(self, desk: Desk, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.desk = desk

    async def call_tool(self, name: str, arguments: dict, context: Any = None) -> Any:
        """As MCPServer's, with arguments that do not fit the input schema told in one line."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                 for e in cause.errors()[:3])
            raise ToolError(f"bad argument for {name}: {problems}") from cause

    async def list_resources(self) -> list:
        static = await super().list_resources()
        runs = [r["run"] for r in self.desk.runs()]
        return static + [Resource(uri=REPORT_URI.replace("{run}", quote(run, safe="")), name=f"report: {run}",
                                  description=f"GPU Insight report of run {run!r} (Markdown)",
                                  mime_type="text/markdown") for run in runs]


def build_server(desk: Desk) -> GpuInsightMCP:
    """The server with its tools, the report resources and the diagnose prompt."""
    server = GpuInsightMCP(desk, name="tb-gpuinsight", version=__version__, instructions=INSTRUCTIONS,
                           lifespan=_lifespan(desk))
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    def tool(fn: Callable) -> Callable:
        return server.tool(annotations=read_only, structured_output=False)(fn)

    @tool
    def list_runs(offset: Offset = 0, limit: Limit = 20) -> str:
        """List the runs of the logdir with their workers (ranks), spans (trace files) and analysis status, and
        for ready runs their GPUs (datasheet row each is rated as) and step count. Call this first: every other
        tool names a run exactly as listed here."""
        return _answer(desk, tools.list_runs, offset=offset, limit=limit)

    @tool
    def overview(run: Run, worker: Worker = None, span: Span = None,
                 top: Annotated[int, Field(description="recommendations to return", ge=1, le=20)] = 5,
                 steps_limit: Annotated[int, Field(description="step rows to return", ge=0, le=200)] = 20) -> str:
        """Why is this run's step slow? Step time (mean, median, p90, spread), where it goes (GEMM, attention,
        communication, idle: host-bound, launch-bound, sync, data loading), GPU busy %, MFU, Tensor Core share,
        devices, and the recommendations ranked by recoverable time per step, each with advice and evidence.
        Every figure has its unit and source."""
        return _answer(desk, tools.overview, run=run, worker=worker, span=span, top=top, steps_limit=steps_limit)

    @tool
    def top_kernels(run: Run, worker: Worker = None, span: Span = None,
                    by: Annotated[Literal["time", "waste"], Field(
                        description="'time': most GPU time first; 'waste': most time x (1 - efficiency) first "
                                    "(rated compute kernels only, as the report)")] = "time",
                    offset: Offset = 0, limit: Limit = 10,
                    filter: Annotated[str, Field(description="only kernels whose name contains this text",
                                                 max_length=500)] = "") -> str:
        """The GPU kernels (and memcpy / memset) of a run ranked by time or by wasted time: calls, total and mean
        time, achieved TFLOP/s and GB/s, efficiency against the roof of the kernel's bound (compute or memory),
        dtype, class, and the provenance of each estimate (known, or unknown with the reason). Rows carry a
        name_key to pass to kernel_detail. Paginate with offset / next_offset."""
        return _answer(desk, tools.top_kernels, run=run, worker=worker, span=span, by=by, offset=offset,
                       limit=limit, filter=filter)

    @tool
    def kernel_detail(run: Run,
                      kernel: Annotated[str, Field(description="a name_key from top_kernels (16 hex characters), or "
                                                               "a part of a kernel name", max_length=500)],
                      worker: Worker = None, span: Span = None,
                      occurrences: Annotated[int, Field(description="timeline occurrences to list", ge=0,
                                                        le=200)] = 10) -> str:
        """One kernel in detail: its figures and provenance, launch configuration, roofline position (intensity
        against the ridge point of its dtype, peak and DRAM bandwidth of the datasheet row), the ops that launched
        it with their input shapes and FLOPs, and where it runs on the timeline (first and longest occurrences)."""
        return _answer(desk, tools.kernel_detail, run=run, kernel=kernel, worker=worker, span=span,
                       occurrences=occurrences)

    @tool
    def diff_runs(run_a: Annotated[str, Field(description="baseline run (A)", max_length=500)],
                  run_b: Annotated[str, Field(description="run to judge (B)", max_length=500)],
                  worker_a: Worker = None, span_a: Span = None, worker_b: Worker = None, span_b: Span = None,
                  by: Annotated[Literal["kernel", "op"], Field(
                      description="match kernels by normalized name, or by launching op and shapes")] = "kernel",
                  metric: Annotated[Literal["step", "kernel", "mfu"], Field(
                      description="the gate's metric: step time, GPU kernel time per step, or MFU")] = "step",
                  threshold_pct: Annotated[float, Field(description="the gate fails when B is slower by more than "
                                                                    "this % and beyond the noise band",
                                                        ge=0, le=1000)] = 5.0,
                  limit: Limit = 10) -> str:
        """What changed from run A to run B: the regression gate's verdict (B slower beyond the noise band and
        the threshold?) with each metric's means and noise band, the kernel time change split by class, and the
        kernels that changed most (added, removed, slower, faster)."""
        return _answer(desk, views.diff_runs, run_a=run_a, run_b=run_b, worker_a=worker_a, span_a=span_a,
                       worker_b=worker_b, span_b=span_b, by=by, metric=metric, threshold_pct=threshold_pct,
                       limit=limit)

    @tool
    def ranks(run: Run, limit: Limit = 8) -> str:
        """A distributed run's ranks side by side: stragglers with evidence (who arrived last at collectives and
        how long the others waited), ranks by step time with compute / exposed communication / idle split, the
        collectives by time with achieved bus bandwidth against the interconnect, and problems (missing ranks)."""
        return _answer(desk, views.ranks, run=run, limit=limit)

    @tool
    def critical_path(run: Run, worker: Worker = None, span: Span = None,
                      step: Annotated[Optional[str], Field(description="one step: its label ('ProfilerStep#12') "
                                                                       "or number; default every step",
                                                           max_length=100)] = None,
                      limit: Limit = 10) -> str:
        """The critical path of each step over the CPU + GPU dependency graph: path time by cause (CPU op,
        kernel, launch, sync wait, communication, idle) and the longest segments on it. Tells whether the host,
        the GPU or the waits set the step time."""
        return _answer(desk, views.critical_path, run=run, worker=worker, span=span, step=step, limit=limit)

    @tool
    def memory_peak(run: Run, worker: Worker = None, span: Span = None) -> str:
        """Per device: the allocated and reserved memory peak, when it happened, what was live at the peak,
        fragmentation, memory never freed, against the device's capacity (needs profile_memory=True)."""
        return _answer(desk, views.memory_peak, run=run, worker=worker, span=span)

    @tool
    def report(run: Run, worker: Worker = None, span: Span = None,
               format: Annotated[Literal["md", "json"], Field(description="Markdown, or the JSON schema of "
                                                                         "docs/reference.md")] = "md",
               baseline_run: Annotated[Optional[str], Field(description="a run to compare with", max_length=500)]
               = None, baseline_worker: Worker = None, baseline_span: Span = None) -> str:
        """The one-page report of a run (as `tb-gpuinsight report`): devices, step split, MFU, recommendations,
        top kernels by waste, memory peak, stragglers; with baseline_run, what changed beyond the noise."""
        return _answer(desk, views.report, run=run, worker=worker, span=span, format=format,
                       baseline_run=baseline_run, baseline_worker=baseline_worker, baseline_span=baseline_span)

    @tool
    def timeline_window(run: Run,
                        t0_us: Annotated[float, Field(description="window start, us from the span's first event")],
                        t1_us: Annotated[float, Field(description="window end, us from the span's first event")],
                        worker: Worker = None, span: Span = None,
                        lanes: Annotated[Literal["all", "gpu", "cpu"], Field(
                            description="GPU streams, CPU threads, or both")] = "all",
                        limit: Annotated[int, Field(description="events to return", ge=1, le=1000)] = 100) -> str:
        """The events of one span in a time window (kernels on GPU streams, ops on CPU threads), in time order,
        with class and % of roof, plus busy time per lane and class. Use the step times of overview or the
        occurrences of kernel_detail to pick the window. Capped: see events.total."""
        return _answer(desk, views.timeline_window, run=run, t0_us=t0_us, t1_us=t1_us, worker=worker, span=span,
                       lanes=lanes, limit=limit)

    @server.resource(REPORT_URI, name="run report", mime_type="text/markdown",
                     description="The GPU Insight report of a run (Markdown); run names are URL-encoded",
                     security=ResourceSecurity(exempt_params={"run"}))  # names are looked up, never used as paths
    def run_report(run: str) -> str:
        try:
            return views.report(desk, run=run, format="md")
        except GpuInsightError as exc:
            raise ResourceError(_relative(desk, str(exc))) from None

    @server.prompt(name="diagnose_run", title="Diagnose this run",
                   description="Why is this run slow and what to do: overview, then top kernels, then the "
                               "recommendations ranked by recoverable time")
    def diagnose_run(run: str) -> str:
        return DIAGNOSE.format(run=json.dumps(run))

    return server


DIAGNOSE = """Diagnose the GPU performance of run {run} with the tb-gpuinsight tools:
1. Call overview with run={run}. Read the step time, where it goes (the split), GPU busy %, MFU and the
   recommendations.
2. Call top_kernels with run={run} and by="time", then by="waste". For the first kernel that dominates, call
   kernel_detail with its name_key: is it compute- or memory-bound, how far from its roof, which op and shapes
   launched it, are its FLOPs and bytes known (provenance)?
3. If the run has several workers, call ranks with run={run} for stragglers.
4. Answer: the step time and its split in one line; then the recommendations ranked by recoverable ms per
   step, each with its evidence (figures with units as the tools gave them) and the concrete change to make;
   say which figures are unknown or estimated and why. Do not invent figures the tools did not return."""


def _answer(desk: Desk, fn: Callable, **kwargs: Any) -> str:
    """A tool's answer as compact JSON (a Markdown report as is); any failure as a tool error of one line."""
    try:
        result = fn(desk, **kwargs)
    except GpuInsightError as exc:
        raise ToolError(_relative(desk, " ".join(str(exc).split()))) from None
    except Exception as exc:  # a bug: logged on stderr with its traceback; the server keeps answering
        log.exception("tb-gpuinsight mcp: %s failed", getattr(fn, "__name__", "tool"))
        raise ToolError(f"internal error in {getattr(fn, '__name__', 'tool')} ({type(exc).__name__}); "
                        f"the server keeps answering") from None
    if isinstance(result, str):
        return result
    return json.dumps(tools.compact(result), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _relative(desk: Desk, text: str) -> str:
    """Text without the logdir's absolute path (answers name files relative to the logdir)."""
    return text.replace(os.path.join(desk.logdir, ""), "") if desk.logdir else text


def _lifespan(desk: Desk):
    """Analyses start once the server runs (stdio claimed: worker processes write nothing on the wire) and stop
    with it."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_server):
        desk.open()
        try:
            yield {}
        finally:
            desk.close()

    return lifespan


def serve(logdir: str, store: Optional[str] = None, devices_file: Optional[str] = None,
          workers: Optional[int] = None, max_trace_gb: Optional[float] = None, wait_s: float = 30.0) -> None:
    """Serve `logdir` over stdio until the client closes the connection."""
    desk = Desk(logdir, store=store, devices_file=devices_file, workers=workers, max_trace_gb=max_trace_gb,
                wait_s=wait_s)
    build_server(desk).run("stdio")
