"""tb-gpuinsight: the plugin's analyses of PyTorch profiler traces and logdirs, at the command line.

Every failure the user can cause ends with one line on stderr and a non-zero exit, never a traceback. This module
builds the parser and runs the command; the commands live in `commands/`, one module per feature.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import io
import importlib
import os
import sys
from typing import Optional, Sequence, Tuple

from . import terminal
from .errors import GpuInsightError
from .trace.source import set_max_trace_gb

EXIT_BAD_INPUT = 2
EXIT_WRITE_FAILED = 1

# Command modules, each with `register(subparsers)`. The core ones (`info`, `ls`, `analyze`, `augment`, `diff`) are
# always registered; the others (and the analyses they import) only when the command line asks for none of those.
CORE_MODULES: Tuple[str, ...] = ("tb_gpuinsight.commands.info", "tb_gpuinsight.commands.analyze",
                                 "tb_gpuinsight.commands.diff")
COMMAND_MODULES: Tuple[str, ...] = ("tb_gpuinsight.commands.shapes", "tb_gpuinsight.commands.graph",
                                     "tb_gpuinsight.commands.overview",
                                     "tb_gpuinsight.commands.memory", "tb_gpuinsight.commands.timeline",
                                     "tb_gpuinsight.commands.ranks", "tb_gpuinsight.commands.critical_path",
                                     "tb_gpuinsight.commands.summarize", "tb_gpuinsight.commands.export_parquet",
                                     "tb_gpuinsight.commands.report",
                                     "tb_gpuinsight.commands.mcp", "tb_gpuinsight.commands.trend",
                                     "tb_gpuinsight.commands.devices")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script; returns the exit status. Everything the command writes to stdout and
    stderr goes through the terminal-safe layer (`terminal.SafeStream`)."""
    _tolerant_output()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = terminal.SafeStream(out), terminal.SafeStream(err)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(argv: Optional[Sequence[str]]) -> int:
    parser = _parser(_command_name(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help or a usage error: what argparse wrote must reach its reader too
        try:
            sys.stdout.flush()
        except OSError as exc:
            return _write_failed(exc)
        if getattr(sys.stdout, "error", None) is not None:
            return _write_failed(sys.stdout.error)
        raise
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        from .logdir import set_follow_symlinks  # here: a command that reads one trace never discovers

        set_max_trace_gb(getattr(args, "max_trace_gb", None))
        set_follow_symlinks(True if getattr(args, "follow_symlinks", False) else None)
        code = args.func(args) or 0
        sys.stdout.flush()  # a full disk or a closed pipe shows here for buffered output
        return code
    except GpuInsightError as exc:
        print(f"tb-gpuinsight: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("tb-gpuinsight: error: out of memory; lower --max-trace-gb or free memory", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RecursionError:
        print("tb-gpuinsight: error: the input nests too deeply to process", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        return _write_failed(exc)
    except KeyboardInterrupt:
        return 130


_WRITE_ERRORS = (errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EDQUOT, errno.EFBIG)


def _write_failed(exc: OSError) -> int:
    """A failed write of the output as one line and exit 1 (another OSError is raised again)."""
    if not isinstance(exc, BrokenPipeError) and exc.errno not in _WRITE_ERRORS:
        raise exc
    _discard_stdout()
    with contextlib.suppress(OSError):
        print(f"tb-gpuinsight: error: {terminal.write_failure(exc)}", file=sys.stderr)
    return EXIT_WRITE_FAILED


def _discard_stdout() -> None:
    """After a failed write, stdout's unwritten buffer goes nowhere: the interpreter's last flush would fail again
    and print a traceback of its own."""
    stream = getattr(sys.stdout, "stream", None)
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, io.UnsupportedOperation):
        return
    if fd >= 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def _tolerant_output() -> None:
    """Text that UTF-8 cannot encode (a file name's invalid bytes, kept by Python as lone surrogates) is written as
    a backslash escape rather than failing the command; in JSON output that escape is valid JSON."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


def _command_name(argv: Sequence[str]) -> Optional[str]:
    """The command word of a command line (None when there is none)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser; for a core command, the other command modules (and their analyses) are not imported."""
    parser = argparse.ArgumentParser(prog="tb-gpuinsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")  # a core command parses with fewer registered
    for module_name in CORE_MODULES:
        importlib.import_module(module_name).register(sub)
    if command not in sub.choices:
        for module_name in COMMAND_MODULES:
            importlib.import_module(module_name).register(sub)
    for action in sub._choices_actions:  # `CMD --help` opens with the line `--help` lists the command by
        sub.choices[action.dest].description = action.help
    for command in sub.choices.values():  # every command reads traces: each takes the size cap
        command.add_argument("--max-trace-gb", type=_positive_gb, default=None, metavar="GB",
                             help="refuse traces whose uncompressed size passes this many GB "
                                  "(default: available memory / 3)")
        command.add_argument("--follow-symlinks", action="store_true",
                             help="follow symbolic links that lead out of the logdir or the traces' folder "
                                  "(default: skipped, unless $TB_GPUINSIGHT_FOLLOW_SYMLINKS is 1)")
    return parser


def _positive_gb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of GB") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError("must be a positive number of GB")
    return value


if __name__ == "__main__":
    sys.exit(main())
