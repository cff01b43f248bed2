"""Decoding a trace while it is inflated: the whole JSON text is never held at once, nor more than one block of
events as Python objects.

`EventStream` is the sink `source.read_all` writes the uncompressed text into. It keeps the text around the event
array (the header: a few KiB) and cuts the array's text into blocks of about `BLOCK` bytes at event boundaries,
each decoded by the reader straight into its tables, first block first.

Where an event ends is found without scanning the JSON in Python: a candidate is a `}` followed by `,` or `]`, and
the text up to it, put in brackets, is decoded as a JSON array. That succeeds only at a real boundary: a `}` inside
a string leaves the string open, one closing a nested object leaves its event open, so the decoder fails and the
previous candidate is tried. Decoding the block is the check, so a block costs one decode as before.

Anything unexpected (no event array found, a block that never cuts, a header that does not decode) raises
`NotStreamable`: the caller then reads the file whole (kineto.py), which also gives the one-line reasons for
broken files. Errors of the bytes themselves (corrupt gzip, the size cap, binary data) come from source.py as usual.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

import msgspec

from .stages import stage

BLOCK = 1 << 20  # bytes of event text decoded at a time (~4,000 events of a modern trace)
PIECE = 1 << 20  # bytes read from a plain file at a time (straight into the buffer)
_SMALL = 1 << 16  # the least room made at a time when the size is known
_TRIES = 32  # candidate boundaries tried in one block before waiting for more text (or giving up)
_EVENTS_KEY = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')
_SEPARATOR = re.compile(rb"\s*([,\]])\s*")
_LEADING = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")  # blanks (and a byte order mark) before a value


_TRIM_EVERY = 16  # blocks between two hand-backs of freed heap memory to the OS


def trim_heap() -> None:
    """Hand the C heap's free pages back to the OS (glibc's malloc_trim; a no-op elsewhere). A decoded block's
    objects are freed between long-lived table values, which glibc would otherwise keep as the process's
    memory; trimming costs a few milliseconds."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


class NotStreamable(Exception):
    """The text is not laid out as a streamed read expects: read the file whole instead."""


class EventStream:
    """Receives a trace's text in pieces (`write`) and feeds its events to `reader` in blocks; after the last
    piece, `finish()` returns the header's text (the document with an empty event array).

    The text waits in one buffer that is reused, not reallocated: `_pending[_front:_end]` is what was received
    and not consumed yet. Consuming moves `_front` only; the waiting text is moved to the front when a piece
    does not fit behind it (every few blocks), and the buffer grows only when the waiting text needs it."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.size = 0  # bytes received
        self.events = 0  # traceEvents entries fed
        self._pending = bytearray()
        self._front = 0  # the first byte of `_pending` not consumed
        self._end = 0  # the end of the text received in `_pending`
        self._base = 0  # the stream offset of `_pending[0]`
        self._state = "head"  # "head": before the event array, "events": inside it, "tail": after it
        self._head = b""
        self._searched = 0  # stream offset up to which the head was searched for the event array
        self._blocks = 0
        self._comma = False  # the last block ended with a comma: another event must follow
        self._hint = None  # the text's expected size (read_all's hint): a small trace gets a small buffer

    def __call__(self, size_hint: int) -> "EventStream":
        self._hint = size_hint
        return self  # read_all's sink factory

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to release here; a stream decoding on several processes stops them (fanout.py)."""

    @property
    def waiting(self) -> int:
        """Bytes received and not consumed yet."""
        return self._end - self._front

    def tables(self) -> Dict[str, Any]:
        """The tables of the events fed so far (after `finish()`); `reader` then holds what the load counted."""
        return self.reader.finish()

    # -- what source.py's readers and checks use --------------------------------------------------------------

    def write(self, data) -> None:
        # Text received earlier is consumed first: the piece just written stays whole for source.py's checks.
        self._consume(final=False)
        n = len(data)
        self._make_room(n)
        self._pending[self._end:self._end + n] = data  # same length: a copy into place, no resize
        self._end += n
        self.size += n

    def readinto_from(self, f, limit: int) -> int:
        self._consume(final=False)
        limit = min(limit, PIECE, self._room_wanted())
        self._make_room(limit)
        with memoryview(self._pending) as view:
            n = f.readinto(view[self._end:self._end + limit]) or 0
        self._end += n
        self.size += n
        return n

    def find(self, sub: bytes, start: int, end: int) -> int:
        at = self._pending.find(sub, start - self._base, min(end - self._base, self._end))
        return at + self._base if at >= 0 else -1

    def byte(self, offset: int) -> int:
        return self._pending[offset - self._base]

    def slice(self, start: int, end: int) -> bytes:
        return bytes(self._pending[start - self._base:min(end - self._base, self._end)])

    def _make_room(self, n: int) -> None:
        """Make `n` bytes free behind the waiting text: move it to the front, or grow the buffer when it must."""
        if self._end + n <= len(self._pending):
            return
        waiting, buffer = self.waiting, self._pending
        if waiting + n > len(buffer):  # a new buffer (doubling): the old one may still be viewed
            least = min(2 * BLOCK + 2 * PIECE, self._room_wanted())
            self._pending = bytearray(max(waiting + n, 2 * len(buffer), least))
        with memoryview(buffer) as old, memoryview(self._pending) as new:
            new[:waiting] = old[self._front:self._end]  # a memmove when both are the same buffer
        self._base += self._front
        self._front, self._end = 0, waiting

    def _room_wanted(self) -> int:
        """Bytes worth making room for: up to the expected end of the text and a small piece more (to see the end
        of the file, or a file that grew): zero-filling 4 MiB for a 600-byte trace cost more than reading it."""
        if not self._hint:
            return 2 * BLOCK + 2 * PIECE
        return max(self._hint - self.size, 0) + _SMALL

    # -- consuming ------------------------------------------------------------------------------------------------

    def finish(self) -> bytes:
        """Consume what is left; the header's text. NotStreamable when the text did not read as expected."""
        self._consume(final=True)
        if self._state != "tail" or not self.events:
            raise NotStreamable("no complete event array")
        return self._head + b"]" + bytes(self._pending[self._front:self._end])

    def _consume(self, final: bool) -> None:
        if self._state == "head":
            self._find_events()
        while self._state == "events" and (final or self.waiting >= 2 * BLOCK):
            if not self._next_block(final):
                break

    def _find_events(self) -> None:
        text, end = self._pending, self._end
        start = _LEADING.match(text, self._front, end).end()
        if start < end and text[start] == ord("["):  # the document is the bare event array
            found = start + 1
        else:
            match = _EVENTS_KEY.search(text, max(self._searched - self._base - 32, self._front), end)
            if match is None:
                self._searched = self._base + end
                if self.waiting > 64 * BLOCK:
                    raise NotStreamable("no event array near the start")
                return
            found = match.end()
        self._head = bytes(text[self._front:found])
        self._front = found
        self._state = "events"

    def _next_block(self, final: bool) -> bool:
        """Decode and feed one block; False when more text is needed first."""
        text, end = self._pending, self._end
        lead = _LEADING.match(text, self._front, end).end()
        if lead < end and text[lead] == ord("]"):  # the array ends (or was empty)
            if self._comma:
                raise NotStreamable("a comma before the end of the event array")  # invalid JSON: say so
            self._front = lead + 1
            self._state = "tail"
            return True
        cut = self._cut(min(end, self._front + BLOCK)) or self._cut(end)
        if cut is None:
            if final or self.waiting > 64 * BLOCK:
                raise NotStreamable("no event boundary found")
            return False
        after, closes, events = cut
        with stage("columns"):
            self.reader.feed_events(events, self.events)
        self.events += len(events)
        del events
        self._front = after
        self._comma = not closes
        self._blocks += 1
        if self._blocks % _TRIM_EVERY == 0:
            trim_heap()
        if closes:
            self._state = "tail"
        return True

    def _cut(self, limit: int) -> Optional[Tuple[int, bool, list]]:
        """(offset after the separator, whether it closes the array, the decoded events) of the last event
        boundary before `limit` that decodes; None when none of the last _TRIES candidates does."""
        text, start, at = self._pending, self._front, limit
        for _ in range(_TRIES):
            at = text.rfind(b"}", start, at)
            if at < 0:
                return None
            sep = _SEPARATOR.match(text, at + 1, self._end)
            if sep is None:
                continue  # not followed by a separator (or not yet)
            try:
                with memoryview(text) as view:  # one copy of the text: the events' Raw values keep it alive
                    block = b"".join((b"[", view[start:at + 1], b"]"))
                events = self.reader.decode_block(block)
            except msgspec.DecodeError:
                continue
            return sep.end(), sep.group(1) == b"]", events
        return None
