"""One-line capture for training loops: per profiler span, the Kineto trace, the Execution Trace of the same active
window and a tensor.trace, named so that logdir discovery pairs them with their span.

    with tb_gpuinsight.profile("runs/exp1") as prof:       # schedule, shapes, activities: sensible defaults
        for batch in loader:
            train_step(batch)
            prof.step()

or, with a profiler of your own, `on_trace_ready=tb_gpuinsight.trace_handler("runs/exp1")`.

Per span `{worker}.{time_ns}` the handler writes `.pt.trace.json[.gz]` (as `tensorboard_trace_handler` names it),
`.et.json[.gz]` and `.tensor.trace`. How the windows are followed: torch's profiler starts and stops its
Execution Trace observer with each active window but writes the file only when the observer is unregistered, so
after each span the handler unregisters it (the file is complete), moves the file next to the span and registers
it again for the next window. The tensor.trace recorder is started and stopped with the profiler's own
start/stop of each window. `tb_gpuinsight.profile` wires all of this before the first window; a handler given to
a profiler you built yourself takes over at its first span, so that span has its Kineto trace (and its Execution
Trace if you passed `execution_trace_observer=ExecutionTraceObserver()`), and every later span has all three.
Distributed jobs get `_rank{N}` in the worker name.
"""
from __future__ import annotations

import gzip
import os
import shutil
import socket
import tempfile
import time
import weakref
from typing import Any, Callable, Iterable, Optional

import torch
from torch.profiler import ExecutionTraceObserver, ProfilerActivity

from .tensortrace import TensorTrace


def worker_name(name: Optional[str] = None) -> str:
    """`tensorboard_trace_handler`'s default `{hostname}_{pid}`, plus `_rank{N}` in a distributed job."""
    name = name or f"{socket.gethostname()}_{os.getpid()}"
    rank = _rank()
    return f"{name}_rank{rank}" if rank is not None and f"rank{rank}" not in name else name


def _rank() -> Optional[int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return None


class TraceHandler:
    """`on_trace_ready` callable writing the Kineto trace, Execution Trace and tensor.trace of each span."""

    def __init__(self, logdir: "os.PathLike[str] | str", worker_name: Optional[str] = None, use_gzip: bool = False,
                 execution_trace: bool = True, tensor_trace: bool = True) -> None:
        self.logdir = os.fspath(logdir)
        self.worker = worker_name
        self.use_gzip = use_gzip
        self.execution_trace = execution_trace
        self.tensor_trace = tensor_trace
        self.spans: list = []  # base names `{worker}.{time_ns}` written so far
        self._tmp = tempfile.mkdtemp(prefix="tb-gpuinsight-capture-")
        weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self._observer: Optional[ExecutionTraceObserver] = None
        self._et_covers_window = False
        self._et_is_ours = True
        self._recorder: Optional[TensorTrace] = None
        self._adopted: "weakref.WeakSet[Any]" = weakref.WeakSet()

    # ---------------------------------------------------------------------------------------- profiler hooks

    def adopt(self, prof: "torch.profiler.profile", before_first_window: bool = True) -> None:
        """Follow `prof`'s active windows: its Execution Trace observer and our tensor.trace recorder start and
        stop with each window. `profile()` calls this before the first window; a handler given to a profiler
        built elsewhere calls it at the first span (`before_first_window=False`)."""
        if prof in self._adopted:
            return
        self._adopted.add(prof)
        self.worker = worker_name(self.worker)
        if self.execution_trace:
            self._adopt_observer(prof, before_first_window)
        if self.tensor_trace:
            _wrap(prof, prof.start_trace, after=self._start_recorder)
            _wrap(prof, prof.stop_trace, before=self._stop_recorder)

    def __call__(self, prof: "torch.profiler.profile") -> None:
        self.adopt(prof, before_first_window=False)
        os.makedirs(self.logdir, exist_ok=True)
        base = f"{self.worker}.{time.time_ns()}"
        prof.export_chrome_trace(os.path.join(self.logdir, base + ".pt.trace.json" + (".gz" if self.use_gzip
                                                                                      else "")))
        self._save_execution_trace(base)
        self._save_tensor_trace(base)
        self.spans.append(base)

    # ---------------------------------------------------------------------------------------- Execution Trace

    def _adopt_observer(self, prof: Any, before_first_window: bool) -> None:
        obs = prof.execution_trace_observer
        if obs is None:
            obs = prof.execution_trace_observer = ExecutionTraceObserver()
            self._et_covers_window = before_first_window  # one made now saw nothing of a window in progress
        else:
            self._et_covers_window = True
        self._et_is_ours = not obs.is_registered  # else it writes to a path of the user's: copy, never move
        self._observer = obs
        if self._et_is_ours:
            self._register_observer()

    def _register_observer(self) -> None:
        self._observer.register_callback(os.path.join(self._tmp, f"et.{time.time_ns()}.json"))

    def _save_execution_trace(self, base: str) -> None:
        obs = self._observer
        if obs is None or not obs.is_registered:
            return
        path = obs.get_output_file_path()
        obs.unregister_callback()  # writes the end of the file: it is complete now
        if self._et_covers_window and path and os.path.exists(path):
            self._place(path, base + ".et.json", move=self._et_is_ours)
        self._et_covers_window, self._et_is_ours = True, True
        self._register_observer()

    # ---------------------------------------------------------------------------------------- tensor.trace

    def _start_recorder(self) -> None:
        if self._recorder is None:
            self._recorder = TensorTrace(os.path.join(self._tmp, f"tensor.{time.time_ns()}.trace")).start()

    def _stop_recorder(self) -> None:
        if self._recorder is not None:
            self._recorder.stop()

    def _save_tensor_trace(self, base: str) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        recorder.stop()
        if recorder.path and os.path.exists(recorder.path):
            self._place(recorder.path, base + ".tensor.trace", compress=False)

    def _place(self, src: str, name: str, move: bool = True, compress: bool = True) -> None:
        """Put a finished file into the logdir under its span's name (gzipped when asked)."""
        dst = os.path.join(self.logdir, name)
        if compress and self.use_gzip:
            with open(src, "rb") as fin, gzip.open(dst + ".gz", "wb") as fout:
                shutil.copyfileobj(fin, fout)
            if move:
                os.unlink(src)
        elif move:
            shutil.move(src, dst)
        else:
            shutil.copyfile(src, dst)


def _wrap(prof: Any, method: Callable, before: Optional[Callable] = None, after: Optional[Callable] = None) -> None:
    """Make every scheduled call of `method` (the profiler keeps bound methods in its action map) also call
    `before` / `after`."""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            before()
        out = method(*args, **kwargs)
        if after:
            after()
        return out

    for actions in prof.action_map.values():
        actions[:] = [wrapped if fn == method else fn for fn in actions]


def trace_handler(logdir: "os.PathLike[str] | str", worker_name: Optional[str] = None, use_gzip: bool = False,
                  execution_trace: bool = True, tensor_trace: bool = True) -> TraceHandler:
    """An `on_trace_ready` handler writing, per span, the Kineto trace, an Execution Trace and a tensor.trace."""
    return TraceHandler(logdir, worker_name, use_gzip, execution_trace, tensor_trace)


def profile(logdir: "os.PathLike[str] | str", *, wait: int = 1, warmup: int = 1, active: int = 3, repeat: int = 1,
            skip_first: int = 0, activities: Optional[Iterable[ProfilerActivity]] = None, record_shapes: bool = True,
            profile_memory: bool = False, with_stack: bool = False, worker_name: Optional[str] = None,
            use_gzip: bool = False, execution_trace: bool = True, tensor_trace: bool = True,
            **profiler_kwargs: Any) -> "torch.profiler.profile":
    """`torch.profiler.profile` with sensible defaults (the activities this machine has, `record_shapes=True`, a
    `schedule(wait, warmup, active, repeat)`) and a `trace_handler` writing every span's files to `logdir`.
    Call `prof.step()` once per training step."""
    handler = trace_handler(logdir, worker_name, use_gzip, execution_trace, tensor_trace)
    prof = torch.profiler.profile(
        activities=list(activities) if activities is not None else available_activities(),
        schedule=torch.profiler.schedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active,
                                         repeat=repeat),
        on_trace_ready=handler, record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
        **profiler_kwargs)
    handler.adopt(prof)
    return prof


def available_activities() -> list:
    """CPU, plus the accelerator this machine has (CUDA / ROCm, XPU)."""
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    if hasattr(torch, "xpu") and torch.xpu.is_available() and hasattr(ProfilerActivity, "XPU"):
        acts.append(ProfilerActivity.XPU)
    return acts


__all__ = ["TraceHandler", "trace_handler", "profile", "worker_name", "available_activities"]
