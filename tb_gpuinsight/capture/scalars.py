"""Headline figures as TensorBoard scalars, written at capture time next to the traces: a standard event file in the
run's directory, so that TensorBoard's Scalars and HParams dashboards chart them beside the loss and compare runs.

After each profiler span's trace is written, the span is analysed as the Overview analyses it, and one point per
recorded step is written (x = the profiler step, `ProfilerStep#N`), under these tags:

    gpuinsight/step_time_ms        wall time of the step
    gpuinsight/gpu_busy_pct        share of the step some GPU activity ran (GPU runs only)
    gpuinsight/mfu_pct             estimated FLOPs / step time / datasheet peak of the dominant dtype (when known)
    gpuinsight/comm_exposed_ms     communication no compute overlapped (GPU runs only)

`hparams={"batch_size": 32, ...}` also writes the run's hyperparameters (a session of TensorBoard's HParams
plugin whose metrics are the tags above), so the HParams dashboard lists runs by them beside their step time and MFU.

The writer is torch's `SummaryWriter` (tensorboard's own event format). The plugin never writes the logdir: only
this capture-side code does. The analysis runs in the training process after each span (a CPU cost of about a
trace read, between spans, not inside a recorded step); `scalars=False` on `profile()` / `trace_handler()` turns it
off.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import ConfigError

PREFIX = "gpuinsight/"
TAGS = ("step_time_ms", "gpu_busy_pct", "mfu_pct", "comm_exposed_ms")


def span_scalars(trace_path: "os.PathLike[str] | str") -> List[Tuple[int, Dict[str, float]]]:
    """(profiler step, {tag: value}) for every step of one span's trace, from its Overview."""
    from ..loading import load
    from ..pipeline import analyze
    from ..analysis.overview import build_overview
    from ..reporting.gate import per_step
    from ..sections import SectionContext, build_section

    trace = load(trace_path)
    eff = analyze(trace, execution_traces=[])
    name = os.path.basename(os.fspath(trace_path))
    ov = build_overview([(name, build_section("overview", SectionContext(trace, eff)), eff)])
    has_gpu = bool(eff.devices)
    mfu = per_step(ov, "mfu") if ov.headline and ov.headline.get("compute_flop_share") else []
    out = []
    for i, row in enumerate(ov.steps):
        values = {"step_time_ms": row["wall_us"] / 1000}
        if has_gpu and row["gpu_busy_pct"] is not None:
            values["gpu_busy_pct"] = 100 * row["gpu_busy_pct"]
            values["comm_exposed_ms"] = row["comm_exposed_us"] / 1000
        if len(mfu) == len(ov.steps):
            values["mfu_pct"] = mfu[i]
        out.append((row["step_number"], values))
    return out


class ScalarWriter:
    """Appends the scalars of each span to one event file in `logdir` (created at the first point)."""

    def __init__(self, logdir: "os.PathLike[str] | str", hparams: Optional[Mapping[str, Any]] = None) -> None:
        self.logdir = os.fspath(logdir)
        self.hparams = check_hparams(hparams)
        self._writer = None

    def write_span(self, trace_path: "os.PathLike[str] | str") -> int:
        """Analyse one span's trace and write its points; returns how many were written. A failure warns (one
        line) and writes nothing: figures are never worth stopping a training loop for."""
        try:
            points = span_scalars(trace_path)
        except Exception as exc:  # a trace the analysis cannot read: say so, go on training
            warnings.warn(f"tb_gpuinsight: no scalars for {os.path.basename(os.fspath(trace_path))}: {exc}",
                          stacklevel=2)
            return 0
        if not points:
            return 0
        writer = self._open()
        for step, values in points:
            for tag in TAGS:
                if tag in values:
                    writer.add_scalar(PREFIX + tag, values[tag], global_step=step)
        writer.flush()
        return len(points)

    def _open(self):
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.logdir)
            if self.hparams:
                experiment, session_start, _ = _hparams_summaries(self.hparams)
                self._writer.file_writer.add_summary(experiment)
                self._writer.file_writer.add_summary(session_start)
        return self._writer

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            if self.hparams:  # the session ended normally: the HParams dashboard shows it as finished
                writer.file_writer.add_summary(_hparams_summaries(self.hparams)[2])
            writer.close()


def check_hparams(hparams: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The hyperparameters as TensorBoard's HParams plugin takes them (str, bool, int or float values), or a
    one-line ConfigError naming the first that is not."""
    out = dict(hparams or {})
    for name, value in out.items():
        if not isinstance(name, str) or not isinstance(value, (str, bool, int, float)):
            raise ConfigError(f"hparams: {name!r} = {value!r}: names are text and values text, bool, int or float")
    return out


def _hparams_summaries(hparams: Dict[str, Any]):
    """The HParams plugin's experiment, session-start and session-end summaries, its metrics being our tags."""
    from torch.utils.tensorboard.summary import hparams as summaries

    return summaries(hparams, {PREFIX + tag: 0.0 for tag in TAGS})


def event_files(logdir: "os.PathLike[str] | str") -> List[str]:
    """The TensorBoard event files directly in `logdir`."""
    folder = os.fspath(logdir)
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.startswith("events.out.tfevents.")) \
        if os.path.isdir(folder) else []


def read_hparams(logdir: "os.PathLike[str] | str") -> Dict[str, Any]:
    """The hyperparameters of the HParams session written in `logdir`'s event files ({} when none), read back
    with tensorboard's own event reader and the HParams plugin's protobufs."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import metadata

    out: Dict[str, Any] = {}
    for path in event_files(logdir):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.tag == metadata.SESSION_START_INFO_TAG:
                    info = metadata.parse_session_start_info_plugin_data(value.metadata.plugin_data.content)
                    out.update({k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                                for k, v in info.hparams.items()})
    return out


def read_scalars(logdir: "os.PathLike[str] | str") -> Dict[str, List[Tuple[int, float]]]:
    """Every `gpuinsight/` scalar of the event files in `logdir`, read back with tensorboard's own reader:
    tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: Dict[str, List[Tuple[int, float]]] = {}
    for path in event_files(logdir):
        acc = EventAccumulator(path)
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            if tag.startswith(PREFIX):
                out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out
