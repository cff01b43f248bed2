"""Reading a trace file's bytes: plain or gzipped, into one buffer, with typed errors.

The content lands in an anonymous memory map sized up front (from the file size, or the gzip trailer), so peak
memory is the uncompressed size once, not the twice that `gzip.open(...).read()` needs while it joins chunks; and
a reader that is done with part of the buffer can hand those pages back to the OS (`release_before`). A caller
may pass a sink instead, which consumes the content as it is read (the Kineto reader's `stream.EventStream`).

Reading is bounded: only regular files are opened (a FIFO or a device is refused before any read, so nothing
blocks or grows forever), and the uncompressed content may not pass a cap (`max_trace_bytes`), checked while
inflating, so a small gzip bomb fails fast with a one-line reason instead of exhausting memory. Content is judged
before it is kept: the first block (inflated) must open a JSON document, and every block read after it must hold
no NUL byte and not be all blanks, so a 4 GiB sparse file or a trace padded with gigabytes of spaces is refused
after one block, not after being read whole.

A path may also be an fsspec URL (`s3://bucket/run/w.pt.trace.json.gz`, `gs://...`, any registered protocol but
`file://`): it is read through fsspec in `_CHUNK` blocks into the same buffer, so a remote trace costs the same
memory as a local one and is fetched only when a worker reads it. `read_head` fetches only the first block.
"""
from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import zlib
from typing import Any, BinaryIO, Callable, Optional, Tuple

from ..errors import TraceError
from .foreign import foreign_head

try:  # ISA-L's inflate (the `fast` extra) is about 1.5x zlib's on trace JSON, with zlib's API
    from isal import isal_zlib as _inflate_lib
except ImportError:
    _inflate_lib = zlib
_INFLATE_ERRORS = (zlib.error, _inflate_lib.error)

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 22  # bytes of a plain file read per step (a remote file's block size)
# Gzip is read in small pieces and inflated in 1 MiB steps: what is inflated at once is handed on before the next
# step (a streamed decode holds about a block of text, not a 4 MiB piece on top of it), and the input left over
# after a step (zlib's `unconsumed_tail`, a copy) stays small.
_GZ_READ = 1 << 17  # compressed bytes read per step; the progress granularity of a gzipped file
_GZ_STEP = 1 << 20  # most uncompressed bytes inflated per step (a bomb is stopped within one step past the cap)
MAX_TRACE_ENV = "TB_GPUINSIGHT_MAX_TRACE_GB"
# Where the cap is set, named wherever it stops a read: the CLI flag, the variable, or TensorBoard's flag.
CAP_SETTINGS = f"--max-trace-gb, ${MAX_TRACE_ENV} or TensorBoard's --gpuinsight_max_trace_gb"
# Peak memory of reading and analysing a trace, in multiples of its uncompressed size: the default cap leaves room
# for that within the memory available when the process starts reading.
MEMORY_FACTOR = 3
_MIN_DEFAULT_BYTES = 1 << 30
HEAD_BYTES = 1 << 16  # the first block: a file's kind and plausibility are judged from it before reading on
_PAD_BLOCK = 1 << 20  # a block of at least this many blank bytes is padding, not a trace
_BLANK = b" \t\r\n"
_override_gb: Optional[float] = None


class SpecialFileError(OSError):
    """A path that is not a regular file (FIFO, device, socket): never read."""


class CorruptGzip(OSError):
    """A file with the gzip magic whose data does not inflate."""


def set_max_trace_gb(gb: Optional[float]) -> None:
    """Set this process's cap on a trace's uncompressed size (None: back to the default)."""
    global _override_gb
    if gb is not None and not gb > 0:
        raise ValueError("the trace size cap must be a positive number of GB")
    _override_gb = gb


def max_trace_bytes(gb: Optional[float] = None) -> int:
    """The cap on one trace's uncompressed size: `gb` when given, else `set_max_trace_gb`'s, else
    $TB_GPUINSIGHT_MAX_TRACE_GB, else available memory / MEMORY_FACTOR (at least 1 GiB)."""
    for value in (gb, _override_gb, os.environ.get(MAX_TRACE_ENV)):
        try:
            if value is not None and float(value) > 0:
                return int(float(value) * 1e9)
        except ValueError:
            continue
    return max(_MIN_DEFAULT_BYTES, available_memory() // MEMORY_FACTOR)


def available_memory() -> int:
    """Bytes this process can still use: MemAvailable, bounded by a cgroup (container) limit when there is one."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 8 << 30
    return min(avail, _cgroup_room())


def _cgroup_room() -> int:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            used = int(f.read().strip())
        return max(int(limit) - used, 0) if limit.isdigit() else 1 << 62
    except (OSError, ValueError):
        return 1 << 62


def open_regular(path: "os.PathLike[str] | str") -> BinaryIO:
    """Open a regular file for reading (unbuffered); anything else raises SpecialFileError without blocking."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "a special file")
            raise SpecialFileError(0, f"not a regular file ({kind}); only trace files are read")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=0)

Progress = Callable[[int, int], None]
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}


def is_url(path: "os.PathLike[str] | str") -> bool:
    """True for an fsspec URL of a non-local file system (s3://, gs://, memory://, ...); False for a local path
    or a file:// URL."""
    match = _URL.match(os.fspath(path))
    return bool(match) and match.group(1).lower() not in ("file", "local")


def url_filesystem(url: str):
    """(fsspec file system, path within it) of a URL. Raises ConfigError with a one-line reason when the
    protocol's package is not installed (e.g. s3:// without the `s3` extra)."""
    from ..errors import ConfigError

    try:
        import fsspec.core

        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        proto = (_URL.match(url) or [None, "?"])[1]
        extra = _EXTRAS.get(proto.lower())
        hint = f"pip install 'tb_gpuinsight[{extra}]'" if extra else "install the fsspec package for it"
        raise ConfigError(f"{proto}:// paths need an extra package: {hint}") from None
    except ValueError as exc:  # unknown protocol, malformed URL
        raise ConfigError(f"{url}: {exc}") from None
    return fs, path


def _open_remote(url: str, block_size: int):
    """An fsspec file opened for reading, any library's failure turned into an OSError with a short reason."""
    fs, path = url_filesystem(url)
    try:
        return fs.open(path, "rb", block_size=block_size)
    except OSError:
        raise
    except Exception as exc:  # botocore / google-auth errors are not OSErrors
        raise OSError(0, f"{type(exc).__name__}: {exc}"[:200]) from None


def file_size(path: "os.PathLike[str] | str") -> int:
    """Size in bytes of a local file or a URL's object (an OSError when it cannot be told)."""
    if not is_url(path):
        return os.path.getsize(path)
    fs, inner = url_filesystem(os.fspath(path))
    try:
        return int(fs.size(inner))
    except OSError:
        raise
    except Exception as exc:  # botocore / google-auth errors are not OSErrors
        raise OSError(0, f"{type(exc).__name__}: {exc}"[:200]) from None


def _open_sized(path: "os.PathLike[str] | str", block_size: int = _CHUNK) -> Tuple[BinaryIO, int]:
    """(open file, its size) for a local regular file or a URL."""
    if is_url(path):
        f = _open_remote(os.fspath(path), block_size)
        return f, int(f.size)
    f = open_regular(path)
    return f, os.fstat(f.fileno()).st_size


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

    def find(self, sub: bytes, start: int, end: int) -> int:
        """Offset of `sub` within [start, end) of the content, -1 when absent."""
        return self._map.find(sub, start, end)

    def byte(self, offset: int) -> int:
        return self._map[offset]

    def slice(self, start: int, end: int) -> bytes:
        return self._map[start:end]

    def offset_of(self, part) -> int:
        """Where a buffer that slices this content (a msgspec.Raw, say) starts, in bytes."""
        import numpy as np  # only for the address of a buffer; numpy is loaded by the reader anyway

        return np.frombuffer(part, np.uint8).ctypes.data - np.frombuffer(self._map, np.uint8).ctypes.data

    def release_before(self, offset: int) -> None:
        """Hand the whole pages before `offset` back to the OS: the caller promises never to read them again."""
        end = (max(offset, 0) // mmap.PAGESIZE) * mmap.PAGESIZE
        if end > 0 and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, 0, min(end, len(self._map)))

    def _grow(self, capacity: int) -> None:
        bigger = mmap.mmap(-1, capacity)
        bigger[: self.size] = self._map[: self.size]
        self._map.close()
        self._map = bigger


def is_gzip(path: "os.PathLike[str] | str") -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name says)."""
    f, _ = _open_sized(path, 1 << 16)
    with f:
        return f.read(2) == GZIP_MAGIC


def read_head(path: "os.PathLike[str] | str", limit: int = HEAD_BYTES) -> bytes:
    """The first `limit` uncompressed bytes of a file, inflating gzip. Raises OSError: SpecialFileError for a FIFO
    or device, CorruptGzip when gzip data does not inflate."""
    f, _ = _open_sized(path, limit)
    with f:
        return _inflated_head(f, f.read(limit), limit)


_MAX_GZIP_HEADER = 16 << 20  # gzip's file name and comment fields have no size limit: read this far for data


def _inflated_head(f: BinaryIO, head: bytes, limit: int) -> bytes:
    """At most `limit` uncompressed bytes from the first bytes `head` of the file `f` (inflated when gzip; read on
    from `f` while a long gzip header yields no data yet)."""
    if not head.startswith(GZIP_MAGIC):
        return head
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out, chunk, taken = b"", head, len(head)
    try:
        while True:
            out += inflater.decompress(chunk, limit - len(out))
            if len(out) >= limit or inflater.eof:
                return out
            chunk = inflater.unconsumed_tail
            if not chunk and taken < _MAX_GZIP_HEADER:
                chunk = f.read(min(limit, _MAX_GZIP_HEADER - taken))
                taken += len(chunk)
            if not chunk:
                return out
    except zlib.error as exc:
        raise CorruptGzip(0, f"corrupt gzip data ({exc})") from None


def check_json_head(path, head: bytes, whole: bool) -> None:
    """Refuse, from its first block, content that cannot be a JSON document: NUL bytes (binary data, a sparse
    file), a first block that is all blank, or a first character that opens no JSON value. `whole`: the block is
    the whole file (then a blank one is left to the reader: an empty file may still be being written)."""
    if head[257:262] == b"ustar":  # a tar archive (of traces, most likely): say what to do with it
        raise TraceError(path, "is a tar archive: extract it and give the trace files inside")
    other_tool = foreign_head(head, os.fspath(path))
    if other_tool:
        raise TraceError(path, other_tool)
    if b"\0" in head:
        raise TraceError(path, "binary data (NUL bytes), not a JSON trace", offset=head.index(b"\0"))
    text = head.lstrip(_BLANK + b"\xef\xbb\xbf")
    if not text:
        if not whole:
            raise TraceError(path, f"its first {len(head) // 1024} KiB are blank: not a JSON trace")
        return
    if text[:1] not in (b"{", b"["):
        raise TraceError(path, f"not a JSON trace: the file starts with {chr(text[0])!r}")


class _Padding:
    """Refuses content as it is read, block by block, as soon as a block is binary (a NUL byte: no JSON holds one)
    or only padding (a whole block of blanks: no trace writer pads so), so that a junk file of any size costs one
    block of memory and time, not its size."""

    def __init__(self, path) -> None:
        self.path = path

    def check(self, out: "TraceBytes", start: int) -> None:
        """Check the bytes `out` received since offset `start`."""
        end = out.size
        if end <= start:
            return
        nul = out.find(b"\0", start, end)
        if nul >= 0:
            raise TraceError(self.path, "binary data (a NUL byte), not a JSON trace", offset=nul, incomplete=True)
        if end - start >= _PAD_BLOCK and out.byte(start) in _BLANK and out.byte(end - 1) in _BLANK \
                and not out.slice(start, end).strip(_BLANK):
            raise TraceError(self.path, f"holds {(end - start) >> 20} MiB of blank padding: not a trace", offset=start)


def read_all(path: "os.PathLike[str] | str", progress: Optional[Progress] = None,
             max_bytes: Optional[int] = None, sink: Optional[Callable[[int], Any]] = None) -> Any:
    """The whole uncompressed content of `path`, at most `max_bytes` (default `max_trace_bytes()`); raises
    TraceError with a one-line reason. `sink(size_hint)` makes what the content is written to instead of a
    TraceBytes (one that consumes it as it comes: see stream.py); it is returned."""
    limit = max_bytes if max_bytes is not None else max_trace_bytes()
    try:
        f, size = _open_sized(path)
        with f:
            first = f.read(HEAD_BYTES)  # judged before anything else is read or allocated
            head = _inflated_head(f, first, HEAD_BYTES)
            f.seek(0)
            check_json_head(path, head, whole=len(head) < HEAD_BYTES)
            if not first.startswith(GZIP_MAGIC):
                return _read_plain(f, size, path, progress, limit, sink or TraceBytes)
            return _inflate(f, size, path, progress, limit, sink or TraceBytes)
    except MemoryError:
        raise TraceError(path, f"out of memory while reading the trace; free memory or lower the cap ({CAP_SETTINGS})") from None
    except OSError as exc:
        raise TraceError(path, os_error_reason(exc)) from None
    except TraceError:
        raise
    except Exception as exc:  # a remote file system's own error while reading (network, credentials)
        if not is_url(path):
            raise
        raise TraceError(path, f"cannot read: {type(exc).__name__}: {exc}"[:200]) from None


def _check_size(path, size: int, limit: int, inflated: bool) -> None:
    if size > limit:
        what = "inflates past" if inflated else "is larger than"
        raise TraceError(path, f"{what} {limit / 1e9:.3g} GB; raise the cap to analyse it ({CAP_SETTINGS})")


def os_error_reason(exc: OSError) -> str:
    """A short lower-case reason for an OS error on a trace file."""
    if isinstance(exc, (SpecialFileError, CorruptGzip)):
        return exc.strerror
    if getattr(exc, "errno", None) == 12:  # ENOMEM from mmap
        return f"out of memory while reading the trace; free memory or lower the cap ({CAP_SETTINGS})"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a trace file"
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    return f"cannot read: {exc.strerror or exc}"


def _read_plain(f, size: int, path, progress: Optional[Progress], limit: int, sink: Callable[[int], Any]) -> Any:
    """Read into one buffer of the file's size (it may still grow or shrink while we read)."""
    _check_size(path, size, limit, inflated=False)
    out = sink(size)
    padding = _Padding(path)
    start = 0
    while out.readinto_from(f, _CHUNK):
        _check_size(path, out.size, limit, inflated=False)
        padding.check(out, start)
        start = out.size
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


def _inflate(f, size: int, path, progress: Optional[Progress], limit: int, sink: Callable[[int], Any]) -> Any:
    out = sink(min(_gzip_size_hint(f, size), limit))
    inflater = _inflate_lib.decompressobj(16 + zlib.MAX_WBITS)
    padding = _Padding(path)
    read = 0
    while True:
        chunk = f.read(_GZ_READ)
        if not chunk:
            break
        read += len(chunk)
        data = chunk
        while data:  # bounded output per step: a bomb is stopped at the cap, not after inflating a chunk
            start = out.size
            try:
                out.write(inflater.decompress(data, _GZ_STEP))
            except _INFLATE_ERRORS as exc:
                raise TraceError(path, f"corrupt gzip data: {exc}", offset=read - len(chunk)) from None
            _check_size(path, out.size, limit, inflated=True)
            padding.check(out, start)
            if inflater.eof:  # a further gzip member may follow
                data = inflater.unused_data
                if data:
                    inflater = _inflate_lib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                data = inflater.unconsumed_tail
        if progress:
            progress(read, size)
    if not inflater.eof:
        raise TraceError(path, "gzip stream ends early (file truncated or still being written)",
                         offset=size, incomplete=True)
    out.write(inflater.flush())
    return out
