"""Reading a trace file's bytes: plain or gzipped, into one buffer, with typed errors.

The content lands in an anonymous memory map sized up front (from the file size, or the gzip trailer), so peak
memory is the uncompressed size once, not the twice that `gzip.open(...).read()` needs while it joins chunks; and
a reader that is done with the tail of the buffer can hand those pages back to the OS (`release_from`).
"""
from __future__ import annotations

import mmap
import os
import struct
import zlib
from typing import Callable, Optional

from ..errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 22  # compressed bytes inflated per step; also the progress granularity

Progress = Callable[[int, int], None]


class TraceBytes:
    """A trace's uncompressed content in an anonymous memory map. `view()` is what decoders read."""

    def __init__(self, capacity: int) -> None:
        self._map = mmap.mmap(-1, max(capacity, 1))
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def view(self) -> memoryview:
        """The content (not the spare capacity) as a read-only view; no copy."""
        return memoryview(self._map)[: self.size].toreadonly()

    def write(self, data) -> None:
        """Append bytes, growing the map when the size hint was short."""
        end = self.size + len(data)
        if end > len(self._map):
            self._grow(max(end, len(self._map) * 3 // 2))
        self._map[self.size:end] = data
        self.size = end

    def readinto_from(self, f, limit: int) -> int:
        """Read up to `limit` bytes from a raw file straight into the map (growing only if the file grew)."""
        room = len(self._map) - self.size
        if room <= 0:
            extra = f.read(limit)  # the file grew after we sized the map
            if extra:
                self.write(extra)
            return len(extra or b"")
        limit = min(limit, room)
        with memoryview(self._map) as whole:
            n = f.readinto(whole[self.size: self.size + limit]) or 0
        self.size += n
        return n

    def offset_of(self, part) -> int:
        """Where a buffer that slices this content (a msgspec.Raw, say) starts, in bytes."""
        import numpy as np  # only for the address of a buffer; numpy is loaded by the reader anyway

        return np.frombuffer(part, np.uint8).ctypes.data - np.frombuffer(self._map, np.uint8).ctypes.data

    def release_from(self, offset: int) -> None:
        """Hand the pages after `offset` back to the OS: the caller promises never to read them again."""
        start = -(-max(offset, 0) // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(self._map) and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, start, len(self._map) - start)

    def _grow(self, capacity: int) -> None:
        bigger = mmap.mmap(-1, capacity)
        bigger[: self.size] = self._map[: self.size]
        self._map.close()
        self._map = bigger


def is_gzip(path: "os.PathLike[str] | str") -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name says)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_head(path: "os.PathLike[str] | str", limit: int = 1 << 16) -> bytes:
    """The first `limit` uncompressed bytes of a file, inflating gzip; b'' on an unreadable gzip head."""
    with open(path, "rb") as f:
        head = f.read(limit)
    if not head.startswith(GZIP_MAGIC):
        return head
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return inflater.decompress(head, limit)
    except zlib.error:
        return b""


def read_all(path: "os.PathLike[str] | str", progress: Optional[Progress] = None) -> TraceBytes:
    """The whole uncompressed content of `path`; raises TraceError with a one-line reason."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb", buffering=0) as f:
            magic = f.read(2)
            f.seek(0)
            if magic != GZIP_MAGIC:
                return _read_plain(f, size, progress)
            return _inflate(f, size, path, progress)
    except OSError as exc:
        raise TraceError(path, os_error_reason(exc)) from None


def os_error_reason(exc: OSError) -> str:
    """A short lower-case reason for an OS error on a trace file."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a trace file"
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    return f"cannot read: {exc.strerror or exc}"


def _read_plain(f, size: int, progress: Optional[Progress]) -> TraceBytes:
    """Read into one buffer of the file's size (it may still grow or shrink while we read)."""
    out = TraceBytes(size)
    while out.readinto_from(f, _CHUNK):
        if progress:
            progress(out.size, max(size, out.size))
    return out


def _gzip_size_hint(f, size: int) -> int:
    """The uncompressed size mod 2**32 from the gzip trailer; a hint only (multi-member or >4 GiB files)."""
    if size < 18:
        return 0
    f.seek(size - 4)
    hint = struct.unpack("<I", f.read(4))[0]
    f.seek(0)
    return hint


def _inflate(f, size: int, path, progress: Optional[Progress]) -> TraceBytes:
    out = TraceBytes(_gzip_size_hint(f, size))
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    read = 0
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        read += len(chunk)
        try:
            piece = inflater.decompress(chunk)
        except zlib.error as exc:
            raise TraceError(path, f"corrupt gzip data: {exc}", offset=read - len(chunk)) from None
        out.write(piece)
        while inflater.eof and inflater.unused_data:  # a further gzip member follows
            rest = inflater.unused_data
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out.write(inflater.decompress(rest))
            except zlib.error as exc:
                raise TraceError(path, f"corrupt gzip data: {exc}", offset=read) from None
        if progress:
            progress(read, size)
    if not inflater.eof:
        raise TraceError(path, "gzip stream ends early (file truncated or still being written)",
                         offset=size, incomplete=True)
    out.write(inflater.flush())
    return out
