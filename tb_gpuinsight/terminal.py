"""What the CLI writes, made safe: text for a terminal, write errors, and files that are never left partial.

Names from a trace or a file system (kernels, devices, files) may hold control characters: `ESC]0;...BEL`
retitles a terminal, `ESC[2J` clears it, others can do worse. The command line writes through `SafeStream`, which
shows every control character as a visible escape (`\\x1b`); CSV output is written `raw()` (its values are kept,
the CSV encoder quotes them) and JSON needs nothing (its encoder escapes control characters itself).

A write that fails (a closed pipe, a full disk, a closed or bad descriptor) raises `OSError` in the command; the
command line turns it into one line and exit status 1 (`write_failure`). Files are written to a temporary name
beside the target and renamed over it once complete (`atomic_file`), so a failed write leaves no partial file.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from typing import IO, Iterator, Optional

# C0 controls but newline and tab, DEL, the C1 controls (0x9b is a one-byte CSI), and the Unicode line separators
# and bidirectional overrides (they reorder what a terminal shows).
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x0A, 0x09)}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def visible(text: str) -> str:
    """`text` with every control character shown as a visible escape (newline and tab kept)."""
    return text.translate(_ESCAPES)


def unwrapped(stream: IO[str]) -> IO[str]:
    """The stream a `SafeStream` writes to (`stream` itself otherwise): for a wire protocol whose own encoder
    escapes control characters and which needs the byte stream under the text (the MCP server's stdio)."""
    return stream.stream if isinstance(stream, SafeStream) and stream.stream is not None else stream


class SafeStream(io.TextIOBase):
    """A text stream that writes terminal-safe text to `stream`. A missing stream (Python sets sys.stdout to None
    when descriptor 1 is closed) fails on the first write, as a closed descriptor does."""

    def __init__(self, stream: Optional[IO[str]]) -> None:
        super().__init__()
        self.stream = stream
        self._raw = False
        self.error: Optional[OSError] = None  # the last failed write (argparse swallows its own)

    def write(self, text: str) -> int:
        try:
            if self.stream is None:
                raise OSError(errno.EBADF, "the output is closed")
            self.stream.write(text if self._raw else visible(text))
        except OSError as exc:
            self.error = exc
            raise
        return len(text)

    @contextlib.contextmanager
    def raw(self) -> Iterator[None]:
        """Write text as it is inside the block (CSV, whose encoder keeps the values)."""
        self._raw = True
        try:
            yield
        finally:
            self._raw = False

    def flush(self) -> None:
        if self.stream is not None:
            self.stream.flush()

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def fileno(self) -> int:
        if self.stream is None:
            raise OSError(errno.EBADF, "the output is closed")
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"


def raw_output(stream: IO[str]) -> contextlib.AbstractContextManager:
    """A block in which `stream` (sys.stdout) takes text as it is: CSV and other encoded output."""
    return stream.raw() if isinstance(stream, SafeStream) else contextlib.nullcontext()


def unescaped(stream: IO[str]) -> IO[str]:
    """The stream under a SafeStream (for the progress line's own carriage returns), else `stream`."""
    return stream.stream if isinstance(stream, SafeStream) and stream.stream is not None else stream


def write_failure(exc: OSError) -> str:
    """The one line that says why writing the output failed."""
    reason = {errno.EPIPE: "the reader closed the pipe", errno.ENOSPC: "no space left on the device",
              errno.EBADF: "the output is closed", errno.EDQUOT: "disk quota exceeded"}.get(exc.errno)
    where = f"{visible(os.fspath(exc.filename))}: " if getattr(exc, "filename", None) else ""
    return f"cannot write the output: {where}{reason or visible(exc.strerror or str(exc))}"


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", **kwargs) -> Iterator[IO]:
    """A file object writing to a temporary name beside `path`, renamed to `path` when the block ends without an
    exception (flushed and synced first); removed otherwise, so `path` is either the complete file or untouched.
    A symbolic link is followed to its file; a device or FIFO (`/dev/stdout`) is written in place, never replaced."""
    target = os.path.realpath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        with open(target, mode, **kwargs) as f:
            yield f
        return
    folder = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target)[:100] + ".", suffix=".tmp", dir=folder)
    try:
        with open(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _keep_mode(target, tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _keep_mode(path: str, tmp: str) -> None:
    """The mode a new file would get (mkstemp makes it 0600): the existing file's, else 0666 less the umask."""
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with contextlib.suppress(OSError):
        os.chmod(tmp, mode)
