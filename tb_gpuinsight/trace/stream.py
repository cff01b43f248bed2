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
    piece, `finish()` returns the header's text (the document with an empty event array)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.size = 0  # bytes received
        self.events = 0  # traceEvents entries fed
        self._pending = bytearray()  # text received and not consumed; starts at stream offset `_base`
        self._base = 0
        self._state = "head"  # "head": before the event array, "events": inside it, "tail": after it
        self._head = b""
        self._searched = 0
        self._blocks = 0
        self._comma = False  # the last block ended with a comma: another event must follow

    def __call__(self, _size_hint: int) -> "EventStream":
        return self  # read_all's sink factory

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to release here; a stream decoding on several processes stops them (fanout.py)."""

    def tables(self) -> Dict[str, Any]:
        """The tables of the events fed so far (after `finish()`); `reader` then holds what the load counted."""
        return self.reader.finish()

    # -- what source.py's readers and checks use --------------------------------------------------------------

    def write(self, data) -> None:
        # Text received earlier is consumed first: the piece just written stays whole for source.py's checks.
        self._consume(final=False)
        self._pending += data
        self.size += len(data)

    def readinto_from(self, f, limit: int) -> int:
        data = f.read(limit)
        if data:
            self.write(data)
        return len(data or b"")

    def find(self, sub: bytes, start: int, end: int) -> int:
        at = self._pending.find(sub, start - self._base, end - self._base)
        return at + self._base if at >= 0 else -1

    def byte(self, offset: int) -> int:
        return self._pending[offset - self._base]

    def slice(self, start: int, end: int) -> bytes:
        return bytes(self._pending[start - self._base:end - self._base])

    # -- consuming ------------------------------------------------------------------------------------------------

    def finish(self) -> bytes:
        """Consume what is left; the header's text. NotStreamable when the text did not read as expected."""
        self._consume(final=True)
        if self._state != "tail" or not self.events:
            raise NotStreamable("no complete event array")
        return self._head + b"]" + bytes(self._pending)

    def _consume(self, final: bool) -> None:
        if self._state == "head":
            self._find_events()
        while self._state == "events" and (final or len(self._pending) >= 2 * BLOCK):
            if not self._next_block(final):
                break

    def _find_events(self) -> None:
        text = self._pending
        start = _LEADING.match(text).end()
        if start < len(text) and text[start] == ord("["):  # the document is the bare event array
            end = start + 1
        else:
            match = _EVENTS_KEY.search(text, max(self._searched - 32, 0))
            if match is None:
                self._searched = len(text)
                if len(text) > 64 * BLOCK:
                    raise NotStreamable("no event array near the start")
                return
            end = match.end()
        self._head = bytes(text[:end])
        self._drop(end)
        self._state = "events"

    def _next_block(self, final: bool) -> bool:
        """Decode and feed one block; False when more text is needed first."""
        text = self._pending
        lead = _LEADING.match(text).end()
        if lead < len(text) and text[lead] == ord("]"):  # the array ends (or was empty)
            if self._comma:
                raise NotStreamable("a comma before the end of the event array")  # invalid JSON: say so
            self._drop(lead + 1)
            self._state = "tail"
            return True
        cut = self._cut(min(len(text), BLOCK)) or self._cut(len(text))
        if cut is None:
            if final or len(text) > 64 * BLOCK:
                raise NotStreamable("no event boundary found")
            return False
        end, closes, events = cut
        with stage("columns"):
            self.reader.feed_events(events, self.events)
        self.events += len(events)
        del events
        self._drop(end)
        self._comma = not closes
        self._blocks += 1
        if self._blocks % _TRIM_EVERY == 0:
            trim_heap()
        if closes:
            self._state = "tail"
        return True

    def _cut(self, end: int) -> Optional[Tuple[int, bool, list]]:
        """(offset after the separator, whether it closes the array, the decoded events) of the last event
        boundary before `end` that decodes; None when none of the last _TRIES candidates does."""
        text = self._pending
        at = end
        for _ in range(_TRIES):
            at = text.rfind(b"}", 0, at)
            if at < 0:
                return None
            sep = _SEPARATOR.match(text, at + 1)
            if sep is None:
                continue  # not followed by a separator (or not yet)
            try:
                with memoryview(text) as view:
                    block = b"".join((b"[", view[:at + 1], b"]"))  # one copy of the text
                events = self.reader.decode_block(block)
            except msgspec.DecodeError:
                continue
            return sep.end(), sep.group(1) == b"]", events
        return None

    def _drop(self, n: int) -> None:
        del self._pending[:n]  # a bytearray drops its front without moving the rest
        self._base += n
