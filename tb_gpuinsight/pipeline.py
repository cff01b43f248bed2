"""The analysis of one trace as the Python API, the CLI and the capture scalars all run it: the trace loaded (or
given), filled from its Execution Traces, every kernel rated, graph replays merged with their captures.
`tb_gpuinsight.analyze` is this module's `analyze`; code inside the package imports it from here, never from the
package's API module, which imports everything."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Optional

from .errors import ConfigError, TraceError
from .loading import companion_execution_traces, load
from .logdir import discover
from .trace.kineto import KinetoTrace

if TYPE_CHECKING:
    from .estimate.model_config import ModelConfig


def analyze(trace: "KinetoTrace | os.PathLike[str] | str", dtype: str = "auto",
            devices_file: "Optional[os.PathLike[str] | str]" = None, device: Optional[str] = None,
            extra_args: Iterable[str] = (),
            execution_traces: "Optional[Iterable[os.PathLike[str] | str]]" = None,
            max_trace_gb: Optional[float] = None,
            capture: "Optional[Iterable[KinetoTrace | os.PathLike[str] | str]]" = None,
            model_config: "Optional[ModelConfig | dict | os.PathLike[str] | str]" = None) -> "Efficiency":
    """FLOPs, bytes and efficiency of every kernel, memcpy and memset of a trace (a path or a loaded trace).

    `dtype`: "auto" rates each kernel against its own dtype's peak, or force one of fp64, fp32, tf32, bf16,
    fp16, fp8, int8. `devices_file` adds or overrides datasheet rows (also read from $TB_GPUINSIGHT_DEVICES);
    `device` rates every device as the named datasheet row; without it, a trace whose devices match no row is rated
    as the row its kernel names point to (the device picker's suggestion), its device report saying so. Tables:
    `result.by_name().to_pandas()`, `result.by_op().to_pandas()`, `result.activities.to_pandas()`; device reports:
    `result.summary()`.
    `execution_traces`: Execution Traces whose linked nodes supply shapes the trace lacks; by default the
    companions logdir discovery pairs with this trace (`{worker}.{stamp}.et.json[.gz]`, then the run's); [] for
    none. Convolution parameters missing from 2021-23 traces are inferred either way. A loaded trace is filled in
    place; `trace.ops["shape_source"]` and `shape_sources(trace, result.activities)` say where shapes came from.
    `max_trace_gb`: as for `load`.
    `capture`: traces recorded while the CUDA/HIP graphs this trace replays were captured (paths or loaded traces):
    replayed kernels take the ops, shapes and estimates of the captured launches, paired in order ("from graph
    capture"). By default the trace itself, then the captures discovery pairs with it (a `capture_traces/` folder
    beside it, the run's other spans of the same worker); [] for none.
    `model_config`: the served model's Hugging Face `config.json` (a path, its dict, or a loaded `ModelConfig`):
    ops that find their weights or KV cache by layer name (vLLM `moe_forward`, `unified_attention*`) are sized
    from it, with provenance "model config" and the keys used. By default the `model_config.json` of the trace's
    directory, when there is one; "" for none.
    """
    from .analysis.kernels.efficiency import analyze_trace, rate_as_suggested
    from .analysis.enrich import enrich
    from .analysis.kernels.graph_capture import with_captures
    from .estimate.devices import load_datasheet

    loaded = trace if isinstance(trace, KinetoTrace) else load(trace, extra_args=extra_args, max_trace_gb=max_trace_gb)
    if execution_traces is None:
        execution_traces = companion_execution_traces(loaded.meta.path)
    enrich(loaded, list(execution_traces))
    config = resolve_model_config(model_config, loaded.meta.path)
    try:
        datasheet = load_datasheet(devices_file)
        eff = analyze_trace(loaded, dtype=dtype, datasheet=datasheet, device_name=device, model_config=config)
        eff = with_captures(eff, None if capture is None else list(capture), dtype, datasheet, device)
        return eff if device else rate_as_suggested(eff, dtype, datasheet)  # a trace naming no known device
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def resolve_model_config(model_config: "Optional[ModelConfig | dict | os.PathLike[str] | str]",
                         trace_path: str) -> "Optional[ModelConfig]":
    """The model config an analysis uses: the one given ("" for none), else the trace directory's
    `model_config.json` when there is one. ConfigError (one line) for a bad file."""
    from .estimate.model_config import load_model_config
    from .logdir import model_config_companion

    if isinstance(model_config, str) and not model_config:
        return None
    if model_config is None:
        model_config = model_config_companion(trace_path) if trace_path else None
    return load_model_config(model_config)


def worker_traces(path: "KinetoTrace | os.PathLike[str] | str", worker: Optional[str]) -> list:
    """(span label, loaded trace) pairs of a trace file or of one worker of a run directory."""
    if isinstance(path, KinetoTrace) or not os.path.isdir(path):
        no_worker_choice(path, worker)
        return [(os.path.basename(path.meta.path), path)] if isinstance(path, KinetoTrace) else \
            [(os.path.basename(os.fspath(path)), load(path))]
    workers = one_run(path).workers
    if not workers:
        raise ConfigError(f"{path}: no trace files")
    name = worker if worker is not None else sorted(workers)[0]
    if name not in workers:
        raise ConfigError(f"{path}: no worker {name!r} (workers: {', '.join(sorted(workers))})")
    return [(span.name, load(span.trace.path)) for span in workers[name]]


def no_worker_choice(path: "KinetoTrace | os.PathLike[str] | str", worker: Optional[str]) -> None:
    """A trace file has no workers: naming one (`--worker`) is refused in one line rather than ignored."""
    if worker is not None:
        label = path.meta.path if isinstance(path, KinetoTrace) else os.fspath(path)
        raise ConfigError(f"{label}: a trace file has no workers to choose from (--worker is for a run directory)")


def one_run(path: "os.PathLike[str] | str"):
    """The one run (`logdir.Run`) a run directory holds."""
    runs = discover(path)
    if len(runs) != 1:
        raise ConfigError(f"{path}: holds {len(runs)} runs; give one run directory or a trace file")
    if not runs[0].workers:  # only unreadable traces: a failure, not an empty answer
        bad = runs[0].unreadable
        more = f" (and {len(bad) - 1} more unreadable)" if len(bad) > 1 else ""
        raise TraceError(bad[0].path, f"{bad[0].reason or 'unreadable'}{more}; the run has no readable trace")
    return runs[0]
