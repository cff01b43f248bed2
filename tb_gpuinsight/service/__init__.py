"""The plugin's model of a logdir: runs discovered in the background, spans analysed on a bounded pool of worker
processes, summaries kept in a summary store (`tb_gpuinsight.store`: the local cache directory by default, or any
fsspec URL) and an LRU in memory. Spans whose summary the store already holds are ready without reading the trace.

Span states (`span_state.py`): "pending" (queued), "loading", "waiting" (the file failed to parse but is still
changing, so it is probably being written: retried when it changes or settles), "ready", "error" (with a one-line
reason).
Each scan follows the logdir: a run or span whose trace is gone (deleted, or no longer a trace) is dropped and
what it held in memory released, and a changed file is a new version, analysed again. Nothing here ever writes
into the logdir.
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
import shutil
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..analysis.kernels.efficiency import Efficiency
from ..errors import GpuInsightError
from ..estimate.devices import DeviceSpec, load_datasheet
from ..logdir import following_symlinks
from ..sections import Section
from ..settings import default_cache_dir
from ..span_state import ALL_SPANS, ALL_WORKERS, NotFound, NotReady, RunState, SpanFailed, SpanState
from ..store import open_store
from ..store.rank_refresh import IndexRefresher
from ..store.worker import augment_file, summarize_file  # the jobs a worker process runs
from .cache import RequestCache
from .downloads import Downloads
from .follow import SETTLE_SECONDS, Following
from .pool import MAX_WORKER_DEATHS, AnalysisPool, _kill_pool
from .queries import Queries

log = logging.getLogger(__name__)


class LogdirService(Following, AnalysisPool, Queries, RequestCache, Downloads):
    """Runs of one logdir, their loading state and their analyses."""

    def __init__(self, logdir: str, cache_dir: Optional[str] = None, devices_file: Optional[str] = None,
                 extra_args: Sequence[str] = (), workers: Optional[int] = None, scan_interval: float = 10.0,
                 max_loaded: int = 32, max_trace_gb: Optional[float] = None,
                 summarize: Optional[Callable[..., Tuple[str, Any, bool]]] = None, store: Optional[str] = None,
                 deferred: bool = False, follow_symlinks: Optional[bool] = None) -> None:
        """`summarize`: the worker-process job that turns a trace into a summary (default `summarize_file`; a
        module-level function with its signature, so that spawned workers can import it). `store`: the summary
        store's URL or path (default `cache_dir`, else the user's cache directory; "" keeps summaries in memory).
        `deferred`: discover runs but analyse nothing until `serve()` is called (TensorBoard builds its plugins
        before it binds its port, and may never serve). `follow_symlinks`: list runs behind symbolic links that
        lead out of the logdir (default: as $TB_GPUINSIGHT_FOLLOW_SYMLINKS says, else skipped)."""
        self.logdir = logdir
        self.follow_symlinks = following_symlinks() if follow_symlinks is None else follow_symlinks
        self.summarize = summarize or summarize_file
        self.store_error = ""  # a store that cannot be opened (its protocol's package missing): said, not fatal
        try:
            self.store = open_store(store if store is not None else
                                    cache_dir if cache_dir is not None else default_cache_dir())
        except GpuInsightError as exc:
            self.store, self.store_error = open_store(""), f"summary store: {exc}; summaries are kept in memory"
        self.devices_file = devices_file
        self.extra_args = tuple(extra_args)
        self.max_trace_gb = max_trace_gb  # None: the default cap of each worker (its available memory / 3)
        self.workers = min(os.cpu_count() or 1, 4) if workers is None else workers
        self.scan_interval = scan_interval
        self.max_loaded = max_loaded
        self.runs: Dict[str, RunState] = {}
        self.scan_error = ""
        self.active = False
        self.generation = 0  # bumped whenever a span's state changes: answers computed before are stale
        self._lock = threading.RLock()
        self._loaded: "OrderedDict[str, Efficiency]" = OrderedDict()
        self._sections: Dict[str, Dict[str, Section]] = {}  # by summary key, evicted with `_loaded`
        self._loading: Dict[str, threading.Lock] = {}  # summaries being loaded, by key: one thread loads each
        self._pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
        self._thread_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None  # `background` without workers
        self._marker_dir = ""
        self._culprits: Dict[int, set] = {}  # by id(broken pool): keys of the spans whose process died
        self._downloads: Dict[str, concurrent.futures.Future] = {}  # augmented traces being written, by span key
        self._scratch = ""  # where augmented traces go when there is no cache directory
        self._download_lock = threading.Lock()  # checks and starts augmented-trace writes, one at a time
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._serving = threading.Event()  # analyses start only once set (at once unless `deferred`)
        if not deferred:
            self._serving.set()
        self._exit_hook = False
        self._thread: Optional[threading.Thread] = None
        self._datasheet: Optional[List[DeviceSpec]] = None
        self.indexes = IndexRefresher(self)  # rank indexes, written in the background once a run's ranks are analysed

    # ------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Scan now and then every `scan_interval` seconds, in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gpuinsight-scan", daemon=True)
            self._thread.start()

    def serve(self) -> None:
        """The server is answering requests: start analysing what discovery found (idempotent, no I/O)."""
        if not self._serving.is_set():
            self._serving.set()
            self._wake.set()

    def stop(self, join_timeout: float = 10.0) -> None:
        """Stop scanning and analysing now: queued analyses are dropped and running ones killed; the scanner
        thread is waited for (up to `join_timeout` s: a scan in progress ends first)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout)
        self.indexes.stop()
        with self._lock:
            pool, self._pool = self._pool, None
            threads, self._thread_pool = self._thread_pool, None
        if pool is not None:
            _kill_pool(pool)
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        for folder in (self._marker_dir, self._scratch):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # the scanner must outlive any bug: log it and scan again next time
                log.exception("gpuinsight: scanning the logdir failed")
            self._wake.wait(self.scan_interval)
            self._wake.clear()

    def datasheet(self) -> List[DeviceSpec]:
        if self._datasheet is None:
            self._datasheet = load_datasheet(self.devices_file)
        return self._datasheet



__all__ = ["ALL_SPANS", "ALL_WORKERS", "LogdirService", "MAX_WORKER_DEATHS", "NotFound", "NotReady",
           "SETTLE_SECONDS", "SpanFailed", "SpanState", "augment_file", "summarize_file"]
