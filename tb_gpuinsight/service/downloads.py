"""Downloads of a `LogdirService`: the augmented trace of a span, written once per version of its file by an
analysis worker and served from the cache while intact."""
from __future__ import annotations

import concurrent.futures
import os
import tempfile
from typing import Optional, Tuple

from ..logdir import inside
from ..span_state import NotReady, SpanFailed, SpanState
from ..store import verified
from ..store.worker import augment_file, supervised_job
from ..trace.source import is_url


class Downloads:
    """Writing and serving augmented traces (a mixin of `LogdirService`)."""

    def augmented_trace(self, span: SpanState, timeout: float = 900.0) -> str:
        """Path of the augmented trace (gzip) of an analysed span: written once per version of the file, by an
        analysis worker (never in this process, whatever the trace's size), with its size and checksum recorded
        beside it; served from the cache while it matches them, written again when it does not (truncated,
        damaged, or written by a process that died). Raises NotReady while it is still being written after
        `timeout` seconds, SpanFailed when it cannot be."""
        dst = self._download_path(span)
        if not (self.follow_symlinks or is_url(self.logdir) or inside(self.logdir, span.entry.path)):
            raise SpanFailed(f"{span.span}: the trace now lies outside the logdir (a symbolic link): not served")
        with self._download_lock:  # concurrent downloads of one span share one check and one job
            future = self._downloads.get(span.key)
            if future is None:
                if verified.intact(dst):
                    return dst
                verified.discard(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                future = self._write_download(span, dst)
        kind, payload = self._await_download(span, future, timeout)
        if kind != "ok":
            raise SpanFailed(f"{span.span}: cannot write the augmented trace: {payload}")
        return dst

    def _download_path(self, span: SpanState, directory: Optional[str] = None) -> str:
        directory = directory or self.store.directory or self._scratch_dir()
        return os.path.join(directory, span.key[: -len(".npz")] + ".augmented.json.gz")

    def _write_download(self, span: SpanState, dst: str) -> concurrent.futures.Future:
        """Start writing a span's augmented trace (called with the download lock held)."""
        job = (span.entry.path, dst, self.extra_args, self.devices_file, self.max_trace_gb)
        if self.workers <= 0:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_result(augment_file(*job))
            return future
        with self._lock:
            pool = self._pool_now()
        future = pool.submit(supervised_job, self._marker_dir, span.key + "#augmented", augment_file, *job)
        self._downloads[span.key] = future
        future.add_done_callback(lambda f, k=span.key: self._drop_download(k))
        return future

    def _drop_download(self, key: str) -> None:
        with self._download_lock:
            self._downloads.pop(key, None)

    def _await_download(self, span: SpanState, future: concurrent.futures.Future,
                        timeout: float) -> Tuple[str, str]:
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise NotReady(f"{span.span}: the augmented trace is still being written") from None
        except (concurrent.futures.process.BrokenProcessPool, concurrent.futures.CancelledError):
            with self._lock:
                if self._pool is not None and getattr(self._pool, "_broken", False):
                    self._pool = None
            return "error", f"the process writing it died, likely out of memory; size {span.entry.size / 1e6:.0f} MB"

    def _scratch_dir(self) -> str:
        if not self._scratch:
            self._scratch = tempfile.mkdtemp(prefix="tb-gpuinsight-downloads-")
        return self._scratch
