"""The Python API's functions (`tb_gpuinsight.diff`, `shapes`, `overview`, ...): each loads and analyses what it
is given and imports its analysis on first use. `tb_gpuinsight` exposes them (and `load`, `analyze`) lazily; code
inside the package imports `analyze` from pipeline.py and `load` from loading.py, never from here."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional

from .errors import ConfigError, TraceError
from .loading import companion_execution_traces, load
from .pipeline import analyze, no_worker_choice, one_run, worker_traces
from .trace.kineto import KinetoTrace


def augment(src: "os.PathLike[str] | str", dst: "os.PathLike[str] | str", **options) -> int:
    """Write `src` with kernel_flop / kernel_num_gb / achieved-% args added to `dst` (never over `src`).
    Options are those of `analyze`. Returns the number of events that got args."""
    from .analysis.kernels.augment import write_augmented

    return write_augmented(src, dst, analyze(src, **options))


def devices(name: Optional[str] = None, devices_file: Optional[str] = None) -> List[Dict[str, Any]]:
    """The device datasheet's rows, as `tb-gpuinsight devices --format json` lists them: name, vendor, dense peaks
    per dtype (`peak_tflops`, TFLOP/s; int8 TOPS), `dram_gbps`, `interconnect`, `source` and `note`. `name` (a
    row's name or a common one: "B200", "h100 sxm") keeps the rows it fits; one fitting none raises ConfigError
    naming rows to try. `devices_file`: a JSON file adding or overriding rows."""
    from .estimate.device_names import datasheet_rows

    return datasheet_rows(name, devices_file)


def diff(a: "KinetoTrace | os.PathLike[str] | str", b: "KinetoTrace | os.PathLike[str] | str",
         names: Optional[tuple] = None, match: str = "normalized", by: str = "kernel", **options) -> "DiffResult":
    """Compare two traces, or two run directories (all their spans, per-span averages), kernel by kernel.

    `match`: "normalized" (template arguments, parameters and launch-specific suffixes removed) or "exact";
    `by`: "kernel", or "op" (launching op and input shapes). Options are those of `analyze`.
    `result.to_pandas()` gives the rows; `result.summary` and `result.classes` the totals and the per-class split.
    """
    from .analysis.diff.compare import diff as diff_analyses

    labels = names or (_label(a), _label(b))
    try:
        return diff_analyses(_analysis_of(a, options), _analysis_of(b, options), tuple(labels), match, by)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _label(x) -> str:
    return os.path.basename(os.fspath(x).rstrip("/")) if not isinstance(x, KinetoTrace) else x.meta.path


def _analysis_of(x, options) -> "Efficiency":
    """A trace's analysis, or every span of a run directory combined."""
    if isinstance(x, KinetoTrace) or not os.path.isdir(x):
        return analyze(x, **options)
    from .analysis.kernels.efficiency import combine

    run = one_run(x)
    spans = run.spans()
    if not spans:  # every trace of the run is unreadable: say why
        bad = run.unreadable
        raise ConfigError(f"{x}: no readable trace" + (f" ({bad[0].reason})" if bad else ""))
    parts = [analyze(s.trace.path, **options) for s in spans]
    return parts[0] if len(parts) == 1 else combine(parts).rerate(parts[0].dtype)


def shapes(path: "KinetoTrace | os.PathLike[str] | str",
           tensor_traces: "Optional[Iterable[os.PathLike[str] | str]]" = None) -> "ShapesReport":
    """The Tensor shapes view of one trace: `report.ops` (DataFrame: op, input dims and types, calls, CPU and device
    time, FLOPs, TFLOP/s, % of peak), `report.tensors.to_pandas()` (tensor.trace records joined to ops; None
    without a tensor.trace, and `report.tensors_note` says why), `report.distribution("aten::mm")`. `tensor_traces`: files to join; by default the
    companions logdir discovery pairs with this trace (`{worker}.{stamp}.tensor.trace`, then the run's)."""
    from .analysis.shapes.report import companion_tensor_traces, shapes_report
    from .trace.tensortrace import read_tensor_trace as read_tt

    trace = path if isinstance(path, KinetoTrace) else load(path)
    given = tensor_traces is not None
    read, damaged = [], []
    for p in list(tensor_traces) if given else companion_tensor_traces(trace.meta.path):
        try:
            read.append(read_tt(p))
        except TraceError as exc:
            if given:  # a file the caller named must read
                raise
            damaged.append(f"{os.path.basename(exc.path)}: {exc.reason}")  # a companion found beside the trace
    eff = analyze(trace)
    report = shapes_report(trace, eff.activities, read, eff.shapes)
    report.damaged_tensor_traces = damaged
    return report


def memory(path: "KinetoTrace | os.PathLike[str] | str") -> "MemoryReport":
    """The Memory view of one trace recorded with `profile_memory=True`, per device: `report.events` (every
    allocation and free with the allocated / reserved / fragmentation curves), `report.by_op`, `report.live_at_peak`,
    `report.never_freed` (DataFrames), `report.summary` (peaks, counts, where each figure comes from) and
    `report.steps`. A trace without memory events gives empty frames and `summary["message"]` says why."""
    from .analysis.memory.events import memory_events, report

    return report(memory_events(path if isinstance(path, KinetoTrace) else load(path)))


def memory_snapshot(path: "os.PathLike[str] | str", device: Optional[int] = None) -> Dict:
    """The view of a CUDA memory snapshot (`torch.cuda.memory._dump_snapshot`'s pickle, plain or gzip'd, read by
    an unpickler that admits only plain data): allocated / reserved over the history, `peak_allocated_bytes`,
    `at_peak` (alive at the peak by source line: frame, function, bytes, count, stack), `at_peak_by_size`,
    `fragmentation` (at the peak and at the dump), `ooms`, `leak_suspects`, `curve`. `device`: default the device
    with the highest peak. A file that is no snapshot (or a pickle naming code) raises SnapshotError."""
    from .analysis.memory.snapshot import report
    from .analysis.memory.snapshot_model import load_snapshot

    snap = load_snapshot(path)
    if device is not None and device not in snap.devices:
        raise ConfigError(f"{os.fspath(path)}: no device {device} in this snapshot (devices: {snap.devices})")
    return report(snap, device)


def compare_memory_snapshots(a: "os.PathLike[str] | str", b: "os.PathLike[str] | str",
                             device: Optional[int] = None) -> Dict:
    """Two snapshots compared: peaks and, per source line, bytes alive at each peak and the change."""
    from .analysis.memory.snapshot import compare

    return compare(memory_snapshot(a, device), memory_snapshot(b, device))


def overview(path: "KinetoTrace | os.PathLike[str] | str", worker: Optional[str] = None,
             **options) -> "Overview":
    """The Overview of one trace, or of one worker's spans in a run directory (`worker`: which one, default the
    first): `result.steps_frame()` (one row per step: wall time, the time split, kernel figures),
    `result.breakdown_frame()` (steps x categories summing to each step's wall time), `result.spans_frame()`,
    `result.headline` (step time stats, GPU busy %, TFLOP/s, MFU, Tensor Core share) and
    `result.recommendations` (sorted by recoverable time per step). Options are those of `analyze`."""
    from .analysis.overview import build_overview
    from .sections import SectionContext, build_section

    parts = []
    for label, trace in worker_traces(path, worker):
        eff = analyze(trace, **options)
        parts.append((label, build_section("overview", SectionContext(trace, eff)), eff))
    return build_overview(parts)


def timeline_index(trace: "KinetoTrace | os.PathLike[str] | str") -> "TimelineIndex":
    """The Timeline tab's index of one trace (lanes per GPU stream and CPU thread/depth, events, busy segments):
    query it with `tb_gpuinsight.analysis.timeline.index.viewport / breakdown / find`."""
    from .analysis.timeline.index import build_index

    trace = trace if isinstance(trace, KinetoTrace) else load(trace)
    return build_index(trace, analyze(trace))


def timeline_ranks(run: "os.PathLike[str] | str", cycle: int = -1) -> "TimelineStack":
    """The Timeline of a distributed run directory (one trace per rank) with every rank stacked on one time base
    (each trace placed by its absolute start): `.meta()`, `.viewport(t0, t1, width)`, `.find(name)`,
    `.breakdown(t0, t1)`, times in us from the earliest rank's first event. `cycle`: the n-th span of every rank."""
    from .analysis.timeline.stack import from_run_dir
    from .estimate.devices import load_datasheet

    return from_run_dir(os.fspath(run), cycle, load_datasheet())


def timeline(trace: "KinetoTrace | os.PathLike[str] | str", t0: Optional[float] = None,
             t1: Optional[float] = None, width: int = 1000) -> "pandas.DataFrame":
    """What the Timeline tab draws for [t0, t1] (us from the trace's first event; default the whole trace) at
    `width` pixels, one row per item: `item` "event" (an event at least one pixel wide, with name, class and % of
    roof) or "bins" (a run of pixels aggregated: exact busy time, dominant class). Bounded whatever the trace size."""
    import pandas as pd

    from .analysis.timeline import index as tl

    trace = trace if isinstance(trace, KinetoTrace) else load(trace)
    eff = analyze(trace)
    index = tl.build_index(trace, eff)
    lo = 0.0 if t0 is None else t0
    hi = index.duration_us if t1 is None else t1
    view = tl.viewport(index, lo, hi, width, efficiency=eff.activities["efficiency"])
    return pd.DataFrame(tl.rows(index, view), columns=list(tl.ROW_FIELDS))


def ranks(run: "os.PathLike[str] | str", cycle: int = -1,
          devices_file: "Optional[os.PathLike[str] | str]" = None) -> "RanksReport":
    """The multi-rank view of a distributed run directory (one trace per rank): `report.to_pandas("ranks")` (step,
    compute, exposed / overlapped communication, memcpy, idle, idle by the Overview's causes (`idle_host_bound_us`,
    `idle_launch_bound_us`, `idle_sync_us`, `idle_data_loading_us`, `idle_other_us`) and wait per rank, microseconds
    per step), "steps" (rank x
    step), "collectives" (per collective and size: count, time per rank, wait, transfer, algbw, busbw, % of the
    interconnect), "instances" (each collective matched across ranks), "stragglers" (with their evidence);
    `report.problems` lists missing or mismatched ranks. `cycle`: the n-th profiling cycle of every rank."""
    from .analysis.ranks.report import from_run_dir
    from .estimate.devices import load_datasheet

    return from_run_dir(os.fspath(run), cycle, load_datasheet(devices_file))


def kernel_table(trace: "Efficiency | KinetoTrace | os.PathLike[str] | str", group: str = "name",
                 device: Optional[int] = None, **options):
    """The kernel table as the plugin and `tb-gpuinsight analyze` show it, as a pandas DataFrame: one row per kernel
    name (`group="op"`: per launching op and kernel name), most GPU time first, with the name columns
    (`display_name`, `demangled`, `kernel_class`) and honest labels (`bound` only where FLOPs and bytes are known,
    no dtype on memcpy / memset rows). `trace`: an `analyze` result, a loaded trace or a path (`options` go to
    `analyze`, e.g. `device="NVIDIA H100 SXM5 80GB"` to rate against a datasheet row); `device`: one GPU's rows."""
    import pandas as pd

    from .analysis.kernels.efficiency import Efficiency
    from .analysis.kernels.rows import group_rows, sort_order

    if group not in ("name", "op"):
        raise ValueError(f"unknown group {group!r}: use 'name' or 'op'")
    eff = trace if isinstance(trace, Efficiency) else analyze(trace, **options)
    table = eff.by_name(device) if group == "name" else eff.by_op(device)
    return pd.DataFrame(group_rows(table, sort_order(table, "total_us")))


def kernels_across_ranks(run: "os.PathLike[str] | str", cycle: int = -1, group: str = "name",
                         devices_file: "Optional[os.PathLike[str] | str]" = None):
    """The kernel table of every rank of a distributed run directory together, as a pandas DataFrame: one row per
    kernel (`group="op"`: per launching op and kernel) over every rank's GPU, its figures from the sums over all
    ranks, with its spread over the ranks: `ranks` (how many it ran on) and `rank_min_us` / `rank_median_us` /
    `rank_max_us` (its time per rank, 0 on a rank where it did not run). `cycle`: the n-th profiling cycle."""
    import pandas as pd

    from .analysis.ranks.report import KERNEL_KEYS, kernel_rows, kernels_from_run_dir
    from .estimate.devices import load_datasheet

    if group not in KERNEL_KEYS:
        raise ValueError(f"unknown group {group!r}: use one of {', '.join(KERNEL_KEYS)}")
    table = kernels_from_run_dir(os.fspath(run), cycle, load_datasheet(devices_file), group)
    return pd.DataFrame(kernel_rows(table)).sort_values("total_us", ascending=False, ignore_index=True)


def critical_path(path: "KinetoTrace | os.PathLike[str] | str", step: Optional[str] = None,
                  worker: Optional[str] = None, **options) -> "CriticalPathReport":
    """The critical path of every step of a trace (or of every span of a run directory; `worker`: only that one),
    over the joint CPU + GPU dependency graph (launches, stream order, cross-stream waits, host syncs,
    collectives, and the companion Execution Trace's cross-thread data dependencies when one links).
    `report.steps` (DataFrame: one row per step, wall and path time and microseconds per cause: cpu_op, kernel,
    launch, sync_wait, communication, idle), `report.segments` (DataFrame: the path in order, each segment's cause,
    kind, name, start, duration, share of its step, thread / stream / correlation / ET node id),
    `report.paths` [(worker, span, CriticalPath)]. `step`: one step's label ("ProfilerStep#12") or number.
    Options are those of `analyze`."""
    from .analysis.graph.critical_path.path import CriticalPathReport

    return CriticalPathReport.of(_critical_paths(path, worker, options), step)


def critical_path_ranks(run: "os.PathLike[str] | str", **options) -> "pandas.DataFrame":
    """The critical path of every rank of a distributed run directory side by side: one row per worker (rank,
    wall_us, path_us, steps, microseconds per cause, the longest segment); `frame.attrs["longest"]` names the
    worker with the longest path and `frame.attrs["why"]` says why. Options are those of `analyze`."""
    from .analysis.graph.critical_path.ranks import compare, ranks_frame

    by_worker: dict = {}
    for worker, _span, cp in _critical_paths(run, None, options):
        by_worker.setdefault(worker, []).append(cp)
    return ranks_frame(compare(sorted(by_worker.items())))


def _critical_paths(path, worker: Optional[str], options: dict) -> list:
    """(worker, span, CriticalPath) of a trace, or of each span of a run directory's workers (on every core when
    they are many small traces: forkmap.py)."""
    from functools import partial

    from .forkmap import fork_map, run_workers

    if isinstance(path, KinetoTrace) or not os.path.isdir(path):
        no_worker_choice(path, worker)
        label = os.path.basename(path.meta.path if isinstance(path, KinetoTrace) else os.fspath(path))
        return [("", label, _critical_path_of(options, path))]
    workers = one_run(path).workers
    if worker is not None and worker not in workers:
        raise ConfigError(f"{path}: no worker {worker!r} (workers: {', '.join(sorted(workers))})")
    spans = [(w, span) for w in sorted(workers) if worker in (None, w) for span in workers[w]]
    # Execution Traces given as loaded objects would be copied to every worker: those runs stay in this process.
    processes = 1 if options.get("execution_traces") is not None else \
        run_workers([(span.trace.path, span.trace.size) for _, span in spans])
    paths = fork_map(partial(_critical_path_of, options), [span.trace.path for _, span in spans], processes)
    return [(w, span.name, cp) for (w, span), cp in zip(spans, paths)]


def _critical_path_of(options: dict, source) -> "CriticalPath":
    """The critical path of one trace (a path or a loaded trace), with its companion Execution Traces."""
    from .analysis.graph.critical_path.path import compute

    trace = source if isinstance(source, KinetoTrace) else load(source, max_trace_gb=options.get("max_trace_gb"))
    ets = options.get("execution_traces")
    ets = companion_execution_traces(trace.meta.path) if ets is None else list(ets)
    eff = analyze(trace, **{**options, "execution_traces": ets})
    return compute(trace, eff.activities, ets)


def report(path: "os.PathLike[str] | str", baseline: "Optional[os.PathLike[str] | str]" = None,
           format: Optional[str] = None, worker: Optional[str] = None, **options) -> "Dict | str":
    """One page of the headline figures: device and estimate coverage, step time and its split, MFU, the
    recommendations by recoverable time with their evidence, the top kernels by waste, the memory peak, the
    straggler and collective bandwidth of a multi-rank run, and with `baseline` (a trace or run directory) the
    changes outside the noise band first. `path`: a trace or a run directory (`worker`: which one, default the
    first). Returns the report as a dict (schema in docs/reference.md, `schema_version`), or with `format` ("md",
    "html", "json") as text. Options are those of `analyze` (e.g. `device=`, `devices_file=`)."""
    from .reporting import make_report, render

    data = make_report(path, baseline, worker=worker, **options)
    return data if format is None else render(data, format)


def trend(logdir: "os.PathLike[str] | str", metric: str = "step", threshold: float = 5.0,
          order_by: Optional[str] = None, store: Optional[str] = None, **options) -> Dict:
    """Every run of a logdir in recording order (or by the value of hparam `order_by`), each with its median step
    time, noise band, MFU and time per class, marked `regression` / `improvement` / `none` against the runs before
    it by the comparison rule (`analysis.diff.stats`, `analysis.diff.trend`), with the kernels behind each marked
    change. `metric`: "step", "kernel", "mfu" or "class:NAME" (an Overview class, e.g. "class:gemm");
    `threshold`: the smallest change in % that counts; `store`: a summary store (`summarize(logdir, store)`, or
    the plugin's cache directory) to read the runs from instead of their traces (a run it lacks is read from its
    files). Returns `{"metric", "threshold", "rule", "order", "runs": [{"run", "steps", "step_ms", "band_ms",
    "mfu", "classes", "change", "why", "top", ...}], "problems", "from_store"}`. Options are those of `analyze`."""
    from .reporting.trend import logdir_trend

    return logdir_trend(logdir, metric, threshold, order_by, store, **options)


def read_tensor_trace(path: "os.PathLike[str] | str") -> "TensorTraceFile":
    """Read a tensor.trace file: `.table` (one row per record), `.errors` [(line number, reason)] of skipped
    malformed lines, `.to_pandas()`."""
    from .trace.tensortrace import read_tensor_trace as read_tt

    return read_tt(path)


def summarize(logdir: "os.PathLike[str] | str", store: Optional[str] = None, engine: str = "local",
              scheduler: Optional[str] = None, workers: Optional[int] = None, extra_args: Iterable[str] = (),
              retry_failed: bool = False, max_trace_gb: Optional[float] = None) -> "BatchReport":
    """Summarise every trace of a logdir (a path, or a URL such as s3://bucket/logs) not yet in a summary store
    (a path or URL; default the plugin's cache directory), as `tb-gpuinsight summarize` does.

    `engine`: "local" (a pool of `workers` processes) or "dask" (a dask.distributed cluster at `scheduler`, or a
    local one of `workers` processes; needs the `cluster` extra). Workers read the traces themselves and write the
    summaries to the store. A failed trace is retried once, then recorded in the store with its reason and skipped
    by later runs unless `retry_failed`. Returns a report: `.done`, `.already`, `.failed` [(trace, reason)],
    `.seconds`, `.stats` (per file: seconds, peak_rss, pid), `.skipped` [(trace, reason)]: failed in an earlier run.
    Failed and skipped traces are also reported as one warning. The local workers are fresh interpreters that do
    not import the calling script: a plain script needs no `if __name__ == "__main__":` guard."""
    import warnings

    from .store.batch import summarize as run_batch

    report = run_batch(os.fspath(logdir), store=store, engine=engine, scheduler=scheduler,
                       workers=workers if workers is not None else min(os.cpu_count() or 1, 4),
                       extra_args=tuple(extra_args), max_trace_gb=max_trace_gb, retry_failed=retry_failed)
    problems = [f"{name}: {reason}" for name, reason in report.failed] + \
        [f"{name}: failed before: {reason} (retry_failed=True to try again)" for name, reason in report.skipped]
    if problems:
        warnings.warn(f"{len(report.failed)} trace(s) failed, {len(report.skipped)} skipped: " + "; ".join(problems),
                      stacklevel=2)
    return report


def export_parquet(store: str, out: "os.PathLike[str] | str", logdir: Optional[str] = None,
                   devices_file: "Optional[os.PathLike[str] | str]" = None) -> "ExportReport":
    """Write `out/{kernels,ops,steps,collectives}.parquet` from every summary in a store, one row per GPU
    activity / op / step / collective instance of every rank, each naming its run, worker, rank and span (needs
    the `parquet` extra). `logdir`: only the traces it holds now. Returns a report with `.rows` per table."""
    from .store.export import export_parquet as write

    return write(os.fspath(store), os.fspath(out), logdir=logdir, devices_file=devices_file)


if False:  # pragma: no cover - for type checkers only
    from .analysis.shapes.report import ShapesReport
    from .trace.tensortrace import TensorTraceFile
    from .analysis.diff.compare import DiffResult
    from .analysis.memory.events import MemoryReport
    from .analysis.overview import Overview
    from .analysis.ranks.report import Report as RanksReport
    from .analysis.kernels.efficiency import Efficiency
    from .analysis.timeline.index import TimelineIndex
    from .analysis.timeline.stack import Stack as TimelineStack
    from .analysis.graph.critical_path.path import CriticalPathReport
    from .store.batch import BatchReport
    from .store.export import ExportReport
    import pandas
