"""The request cache of a `LogdirService`: rated analyses and their sections loaded from the summary store and
kept in an LRU; a summary gone or damaged sends its span back to the queue."""
from __future__ import annotations

import threading
from typing import List, NoReturn, Optional, Tuple

from ..analysis.kernels.efficiency import AUTO, Efficiency, combine
from ..sections import Section
from ..span_state import NotReady, SpanFailed, SpanState
from ..store import envelope as cache_mod


class RequestCache:
    """Loading, remembering and repairing analyses (a mixin of `LogdirService`)."""

    def analysis(self, run: str, worker: str, span: str, dtype: str = AUTO,
                 device_name: Optional[str] = None) -> Efficiency:
        """The rated analysis of one span, or of all ready spans of a worker combined ("all"); `device_name` (a
        datasheet row the user picked) rates every device as that row."""
        ready = self.ready_states(run, worker, span)
        key = "+".join(s.key for s in ready) + "|" + dtype + "|" + (device_name or "")
        with self._lock:
            hit = self._loaded.get(key)
            if hit is not None:
                self._loaded.move_to_end(key)
                return hit
        parts = [self._load(s) for s in ready]
        eff = parts[0] if len(parts) == 1 else combine(parts, self.datasheet())  # "all spans"
        if dtype != AUTO or device_name:  # -- device override (picked in the UI): rated at request time
            eff = eff.rerate(dtype, self.datasheet(), device_name or None)
        self._remember(key, eff)
        return eff

    def sections(self, run: str, worker: str, span: str, name: str) -> List[Tuple[SpanState, Section]]:
        """One view's stored section for each analysed span of a selection (see `ready_states`)."""
        out = []
        for state in self.ready_states(run, worker, span):
            self._load(state)
            with self._lock:
                stored = self._sections.get(state.key, {})
            out.append((state, stored.get(name) or Section(name, error="not in this summary")))
        return out

    def _load(self, span: SpanState) -> Efficiency:
        """The span's rated analysis, from memory or its stored summary. The first requests after a big span is
        analysed come together (every open tab asks at once): one thread reads and rates the summary while the
        others wait for it, rather than each doing the same seconds of work against the others."""
        with self._lock:
            hit = self._hit(span)
            if hit is not None:
                return hit
            gate = self._loading.setdefault(span.key, threading.Lock())
        with gate:
            with self._lock:
                hit = self._hit(span)
            if hit is not None:
                return hit
            try:
                return self._load_stored(span)
            finally:
                with self._lock:
                    self._loading.pop(span.key, None)

    def _hit(self, span: SpanState) -> Optional[Efficiency]:
        """The span's analysis if it is in memory with its sections (called under the lock)."""
        hit = self._loaded.get(span.key)
        if hit is not None and span.key in self._sections:
            self._loaded.move_to_end(span.key)
            return hit
        return None

    def _load_stored(self, span: SpanState) -> Efficiency:
        try:
            data = self.store.get(span.key)
            eff = self._rated(data, span) if data is not None else None
        except cache_mod.CorruptSummary as exc:
            self.store.delete(span.key)
            self._repair(span, str(exc))
        if eff is None:  # evicted from disk meanwhile: analyse again
            self._requeue(span)
            raise NotReady(f"{span.span} is being analysed again (its cached summary went missing)")
        self._remember(span.key, eff)
        return eff

    def _repair(self, span: SpanState, why: str) -> NoReturn:
        """A damaged summary is analysed again, once per version of the file; a second one is an error."""
        with self._lock:
            if span.repaired:
                span.status = "error"
                span.reason = f"its cached summary is damaged again ({why}); check the cache directory"
                self.generation += 1
                raise SpanFailed(f"{span.span}: {span.reason}")
            span.repaired = True
        self._requeue(span)
        raise NotReady(f"{span.span} is being analysed again ({why})")

    def _requeue(self, span: SpanState) -> None:
        with self._lock:
            if span.status == "ready":
                span.status = "pending"
                self.generation += 1
        self._wake.set()

    def _rated(self, data: bytes, span: SpanState) -> Efficiency:
        summary = cache_mod.load_summary(data, span.identity or None)
        with self._lock:
            self._sections[span.key] = summary.sections
        return summary.eff.rerate(AUTO, self.datasheet())

    def _remember(self, key: str, eff: Efficiency) -> None:
        with self._lock:
            self._loaded[key] = eff
            self._loaded.move_to_end(key)
            while len(self._loaded) > self.max_loaded:
                old, _ = self._loaded.popitem(last=False)
                self._sections.pop(old, None)
