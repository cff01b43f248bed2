"""One big trace decoded on several cores while it is inflated: this process inflates the file and cuts the event
array's text into batches at event boundaries; forked worker processes decode the batches into tables; the parts
are merged into the tables one process builds (parallel.merge_into: the same rows, string categories, codes and
counts; a test compares them). Neither the whole text nor the whole object tree is ever held, here or in a worker.

Costs kept off this process, which is the part that does not scale with workers:
- Cutting does not decode. Once BATCH bytes wait, a batch ends at the last `}` followed by `,` and `{` within
  2 * BATCH: such a `}` may be inside a string or close a nested object, but then the batch is no JSON array (the
  string or the event stays open), so the worker's decode fails and the file is read again whole (kineto.py),
  which also gives broken files their one-line reasons. No real trace of the corpus does that; a test shows it.
- Batches travel through shared memory (an anonymous mapping made before the fork): one copy in, none through a
  pipe. Only each part's tables come back (numpy columns and the distinct strings, pickled), a few percent of the
  text. A worker numbers its events from 0 and the merge shifts them, so nothing here counts events either.
- A trace whose events end within HOLD bytes is decoded here as stream.py does (no process is started), and so is
  the last stretch of the event array: it holds the array's end and the text after it, found with decoding checks.
"""
from __future__ import annotations

import mmap
import multiprocessing
import re
import signal
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, List, Optional, Tuple

import msgspec

from .parallel import Part, merge_into, part_of
from .stages import stage
from .stream import EventStream, NotStreamable, trim_heap

HOLD = 8 << 20  # event text held before starting workers: a smaller trace is decoded in this process
BATCH = 4 << 20  # event text one worker decodes at a time: at least this (the source writes 1 MiB pieces)
_IN_FLIGHT = 2  # batches per worker handed out at once: the next one is ready when a worker finishes
_NEXT_EVENT = re.compile(rb"\s*,\s*\{")  # after an event's `}`: the separator and the next event's start
_WORKER_TRIM_EVERY = 8  # batches between two hand-backs of a worker's freed heap memory


class FanOut(EventStream):
    """An EventStream (read_all's sink) that hands batches of whole events to `workers` forked processes;
    `tables()` merges their parts with the one this process decoded, in the order of the events."""

    def __init__(self, reader: Any, new_reader: Callable[[], Any], workers: int) -> None:
        super().__init__(reader)
        self.new_reader = new_reader
        self.workers = workers
        self.pool: Optional[_Pool] = None
        self.parts: List[Part] = []

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.close()

    def _consume(self, final: bool) -> None:
        if self._state == "head":
            self._find_events()
        if self._state == "events" and self.pool is None and self.workers > 1 and self.waiting > HOLD:
            self._start()
        if self._state == "events" and self.pool is not None:
            with stage("fan out"):
                self._hand_out()
            if final:
                self.parts, self.events = self.pool.drain()  # the events left are counted from there
        if final or self.workers == 1:  # the rest (all of a small trace) is decoded here, after the workers' events
            super()._consume(final)

    def _start(self) -> None:
        try:
            self.pool = _Pool(self.new_reader, self.workers, 2 * BATCH + 2)  # batches are at most 2 * BATCH
        except (OSError, AssertionError):  # no process can be started here (limits, a daemon's child): decode here
            self.workers = 1

    def _hand_out(self) -> None:
        """Hand out batches while a batch of text waits: all its whole events, up to 2 * BATCH bytes."""
        while self.waiting >= BATCH:
            at = self._last_boundary(min(self._end, self._front + 2 * BATCH))
            if at is None:
                if self.waiting > 64 * BATCH:
                    raise NotStreamable("no event boundary found")
                return
            with memoryview(self._pending) as view:
                self.pool.submit(view[self._front:at + 1])
            # the next batch starts at its `{`
            self._front = _NEXT_EVENT.match(self._pending, at + 1, self._end).end() - 1

    def _last_boundary(self, end: int) -> Optional[int]:
        """The offset of the last `}` before `end` that is followed by `,` and `{`; None when there is none."""
        text, at = self._pending, end
        while True:
            at = text.rfind(b"}", self._front, at)
            if at < 0:
                return None
            if _NEXT_EVENT.match(text, at + 1, self._end):
                return at

    def tables(self) -> Dict[str, Any]:
        """The merged tables; `reader` becomes a fresh one holding what the whole load counted."""
        if self.pool is None:
            return super().tables()
        last = self.reader
        parts = self.parts + [part_of(last, last.finish())]
        self.parts = []
        self.reader = self.new_reader()
        return merge_into(self.reader, parts)


class _Pool:
    """Forked workers fed batches through slots of one shared anonymous mapping; results come back by pipe."""

    def __init__(self, new_reader: Callable[[], Any], workers: int, slot_bytes: int) -> None:
        context = multiprocessing.get_context("fork")
        self.slot_bytes = slot_bytes
        self.memory = mmap.mmap(-1, slot_bytes * _IN_FLIGHT * workers)  # MAP_SHARED: the workers see the writes
        self.free = list(range(_IN_FLIGHT * workers))
        self.busy: Dict[Connection, Dict[int, int]] = {}  # connection -> {batch number: slot}
        self.done: Dict[int, Tuple[Part, int]] = {}  # batch number -> (its part, its event count)
        self.batches = 0
        self.processes = []
        try:
            for _ in range(workers):
                here, there = context.Pipe()
                process = context.Process(target=_work, args=(there, self.memory, new_reader), daemon=True)
                process.start()
                there.close()
                self.busy[here] = {}
                self.processes.append(process)
        except BaseException:
            self.close()
            raise

    def submit(self, text: memoryview) -> None:
        """Copy one batch of whole events into a free slot (waiting for one) and hand it to the least busy worker."""
        self._collect(block=not self.free)  # parts that are ready come in now: their workers wait to send them
        slot = self.free.pop()
        start, n = slot * self.slot_bytes, len(text)
        memory = self.memory
        memory[start] = 0x5B  # "[": the slot holds a JSON array
        memory[start + 1:start + 1 + n] = text
        memory[start + 1 + n] = 0x5D  # "]"
        conn = min(self.busy, key=lambda c: len(self.busy[c]))
        conn.send((self.batches, start, n + 2))
        self.busy[conn][self.batches] = slot
        self.batches += 1

    def _collect(self, block: bool = True) -> None:
        """Take the parts that are ready (waiting for one when `block`); NotStreamable when a worker could not
        decode its batch."""
        with stage("wait for workers"):
            ready = wait([c for c, pending in self.busy.items() if pending], timeout=None if block else 0)
        for conn in ready:
            try:
                with stage("receive parts"):
                    number, done = conn.recv()
            except (EOFError, OSError):
                raise NotStreamable("a decoding process ended") from None
            if done is None:
                raise NotStreamable("a batch did not decode")
            self.free.append(self.busy[conn].pop(number))
            self.done[number] = done

    def drain(self) -> Tuple[List[Part], int]:
        """Every part, first batch first, each with the index of its first event; and how many events they hold.
        The workers are stopped."""
        while any(self.busy.values()):
            self._collect()
        parts, first = [], 0
        for number in range(self.batches):
            part, count = self.done.pop(number)
            part.first, first = first, first + count
            parts.append(part)
        self.close()
        return parts, first

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for conn in list(self.busy):
            try:
                conn.send(None)
            except OSError:
                pass
            conn.close()
        self.busy.clear()
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        self.processes = []
        self.memory.close()


def _work(conn: Connection, memory: mmap.mmap, new_reader: Callable[[], Any]) -> None:
    """A worker's loop: decode the batch a message points at, send back its part (None when it failed: the
    parent then reads the file whole, which says why). It ends quietly when the parent stops it or goes away;
    Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    view = memoryview(memory)
    try:
        for handled, (number, start, n) in enumerate(iter(conn.recv, None), 1):
            try:
                done = _decode(new_reader, view[start:start + n])
            except Exception:  # noqa: BLE001 - any failure: the parent reads the file whole, which reports it
                done = None
            conn.send((number, done))
            if handled % _WORKER_TRIM_EVERY == 0:
                trim_heap()
    except (EOFError, OSError):
        pass


def _decode(new_reader: Callable[[], Any], text: memoryview) -> Tuple[Part, int]:
    """One batch's part (its events counted from 0: the parent shifts them) and its event count."""
    reader = new_reader()
    try:
        events = reader.decode_block(text)
    except msgspec.DecodeError:
        raise NotStreamable("not cut at event boundaries") from None
    count = len(events)
    reader.feed_events(events, 0)
    del events
    return part_of(reader, reader.finish()), count
