"""What to summarise: one job per span, named by its trace's identity, carrying paths only.

The plugin's scanner and the `summarize` command compute the same key for a span (`span_job`), so a store filled by
a batch run is what the plugin serves, and the other way round.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..logdir import Run, Span, relative_name
from .summaries import summary_key, trace_identity


@dataclass(frozen=True)
class Job:
    """One span to summarise. Only names and paths (or URLs): a worker reads the files itself, so submitting a
    job ships a few hundred bytes whatever the trace's size."""
    key: str
    run: str
    worker: str
    span: str
    path: str
    size: int
    execution_traces: Tuple[str, ...] = ()
    tensor_traces: Tuple[str, ...] = ()
    extra_args: Tuple[str, ...] = ()
    max_trace_gb: Optional[float] = None
    identity: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    model_config: Optional[str] = None  # the run's model_config.json


def span_job(root: str, run: Run, span: Span, extra_args: Sequence[str] = (),
             max_trace_gb: Optional[float] = None) -> Job:
    """The job of one discovered span: its companions (the span's own, then the run's) and its identity. ET
    shapes change the analysis, so an Execution Trace that appears or changes later makes a new key; so does the
    run's model config (it sizes ops the trace cannot)."""
    ets = span.execution_traces + run.execution_traces
    tts = span.tensor_traces + run.tensor_traces
    et_ids = "|".join(f"{relative_name(root, c.path)}:{c.size}:{c.version}" for c in ets)
    options = "|".join(extra_args) + "|et:" + et_ids
    config = run.model_config
    if config is not None:
        options += f"|mc:{relative_name(root, config.path)}:{config.size}:{config.version}"
    ident = trace_identity(relative_name(root, span.trace.path), span.trace.size, span.trace.version, options)
    return Job(summary_key(ident), run.name, span.worker, span.name, span.trace.path, span.trace.size,
               tuple(e.path for e in ets), tuple(e.path for e in tts), tuple(extra_args), max_trace_gb, ident,
               config.path if config is not None else None)


def logdir_jobs(root: str, runs: Sequence[Run], extra_args: Sequence[str] = (),
                max_trace_gb: Optional[float] = None) -> List[Job]:
    """Every span of every run, as jobs."""
    return [span_job(root, run, span, extra_args, max_trace_gb) for run in runs for span in run.spans()]
