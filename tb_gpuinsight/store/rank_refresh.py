"""The plugin's write path of rank indexes (`rank_table.py`, `rank_kernels.py`): the scan thread notices a run of
several workers whose ranks are all analysed and hands its index build to one background thread, so that
discovery and analysis scheduling never wait for it (a build reads every rank's summary: minutes at thousands of
ranks on an object store).

One build at a time per run (one thread builds them all, in turn): a newer state of a run replaces its queued build,
never the one running. `stop()` drops the queue and ends the running build at its next summary read (the index
objects are written whole, so a build ended early leaves the previous ones as they were). A failing build is logged
with a one-line reason; the next change of the run tries again. Requests only read the index (they write nothing):
meanwhile they answer from the previous index, or from the ranks' summaries.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import rank_table
from .rank_table import Stopped

log = logging.getLogger(__name__)

Signature = Tuple[Tuple[str, str], ...]  # (summary key, status) of each span of a run
Build = Callable[[threading.Event], None]  # one run's build; ends early (raising Stopped) once the event is set


class NotWritten(Exception):
    """A build that found a run it could not index (the reason is the message)."""


class IndexWriter:
    """The background builds of a service's rank indexes: per run, the one running and the newest queued."""

    def __init__(self, name: str = "gpuinsight-rank-index") -> None:
        self.name = name
        self._cond = threading.Condition()
        self._queued: "OrderedDict[str, Build]" = OrderedDict()  # by run, oldest first
        self._running: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def submit(self, run: str, build: Build) -> None:
        """Queue `build` for `run`, replacing a build of it queued before (not the one running)."""
        with self._cond:
            if self._stop.is_set():
                return
            self._queued.pop(run, None)
            self._queued[run] = build
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Wait until nothing is queued or running; False when `timeout` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queued and self._running is None, timeout)

    def busy(self) -> List[str]:
        """The runs being built now or queued (the running one first)."""
        with self._cond:
            return ([self._running] if self._running is not None else []) + list(self._queued)

    def stop(self, timeout: float = 10.0) -> None:
        """Drop the queued builds and end the running one at its next summary read; wait up to `timeout` s."""
        with self._cond:
            self._stop.set()
            self._queued.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queued or self._stop.is_set())
                if self._stop.is_set():
                    self._thread = None
                    self._cond.notify_all()
                    return
                run, build = self._queued.popitem(last=False)
                self._running = run
            try:
                build(self._stop)
            except Stopped:
                pass
            except Exception as exc:  # noqa: BLE001 - the index only saves time: never end the writer for it
                why = str(exc) if isinstance(exc, NotWritten) else f"{type(exc).__name__}: {exc}"
                log.warning("gpuinsight: rank index of run %r not written: %s", run,
                            (why.splitlines() or [""])[0][:300])
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()


class IndexRefresher:
    """What the scan thread calls (`refresh`): decides from a snapshot of the service's span states which runs'
    indexes to build, and queues their builds on an `IndexWriter`."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.writer = IndexWriter()
        self._done: Dict[str, Optional[Signature]] = {}  # by run: the state last indexed (None: not yet)

    def refresh(self, runs: Sequence[Any], keys: set) -> None:
        """Queue the index build of each run of several workers (`runs`: the runs the scan discovered) whose spans
        are all analysed and changed since it was last built; `keys`: the summaries the scan's store listing found
        (a span analysed since waits for the next scan)."""
        service = self.service
        if not service.store:
            return
        several = {run.name: run for run in runs if len(run.workers) >= 2}
        for gone in set(self._done) - set(several):  # deleted (or down to one worker): its state goes with it
            del self._done[gone]
        with service._lock:  # the spans' states as one snapshot: analyses finish on other threads
            states = {name: [(s.key, s.status) for s in service.runs[name].spans.values()]
                      for name in several if name in service.runs}
        for name, spans in states.items():
            first = name not in self._done
            if any(status not in ("ready", "error") or (status == "ready" and key not in keys)
                   for key, status in spans):
                self._done.setdefault(name, None)  # still being analysed: indexed once every rank is
                continue
            signature = tuple(sorted(spans))
            # all analysed before this server found it (`first`): built too; an index `summarize` wrote is
            # current, and its build reads that index only, no summary
            if first or self._done[name] != signature:
                self._done[name] = signature
                self.writer.submit(name, self._job(several[name], keys))

    def _job(self, run: Any, keys: set) -> Build:
        service = self.service
        store, logdir, extra_args = service.store, service.logdir, service.extra_args

        def build(stop: threading.Event) -> None:
            failed = rank_table.index_logdir(store, logdir, [run], extra_args, service.datasheet(), keys, stop)
            if stop.is_set():
                raise Stopped()
            if failed:
                raise NotWritten(failed.get(run.name, "not written"))
        return build

    def stop(self) -> None:
        self.writer.stop()


__all__ = ["IndexRefresher", "IndexWriter", "Stopped"]
