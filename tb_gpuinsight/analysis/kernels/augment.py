"""Augmented traces: the input trace, unchanged, plus FLOP, byte and efficiency args on kernels and their ops.

Arg names follow Inductor's: `kernel_flop` (FLOPs) and `kernel_num_gb` (GB moved); plus `achieved TFLOP/s`,
`achieved GB/s`, `% of peak`, `% of DRAM peak`, `roofline efficiency %`, `rated as` (dtype and device) and, where
an estimate is unknown, `flop estimate` with the reason. Events we do not touch are copied byte for byte, so the
result opens wherever the input did (Perfetto, chrome://tracing). The input is never overwritten: the output is
written to a temporary file beside the destination and renamed into place. The destination must be a new path or
a regular file (through a symlink, the file it points to): devices, directories, FIFOs and empty paths are refused,
so nothing but the named file is ever replaced; the file's mode follows the umask.
"""
from __future__ import annotations

import gzip
import os
import stat
import tempfile
from typing import Any, BinaryIO, Dict, Iterator, List

import msgspec
import numpy as np

from ...errors import GpuInsightError, TraceError
from ...trace.source import read_all
from .efficiency import Efficiency


def augmented_args(eff: Efficiency) -> Dict[int, Dict[str, Any]]:
    """Args to add, keyed by event index in traceEvents: kernels, memops and their launching ops."""
    acts = eff.activities
    out: Dict[int, Dict[str, Any]] = {}
    reasons = acts.strings["flops_reason"]
    dtypes = acts.strings["rate_dtype"]
    for i, event in enumerate(acts["event"].tolist()):
        out[event] = _activity_args(acts, i, reasons, dtypes, eff)
    ops = eff.trace.ops
    for row, est in eff.op_estimates.items():
        args: Dict[str, Any] = {}
        if est.flops is not None:
            args["kernel_flop"] = int(est.flops)
        if est.bytes is not None:
            args["kernel_num_gb"] = est.bytes / 1e9
        if est.flops is None and est.flops_reason:
            args["flop estimate"] = est.flops_reason
        if args:
            out.setdefault(int(ops["event"][row]), {}).update(args)
    return out


def _activity_args(acts, i: int, reasons: List[str], dtypes: List[str], eff: Efficiency) -> Dict[str, Any]:
    args: Dict[str, Any] = {}
    _put(args, "kernel_flop", acts["flops"][i], lambda v: int(round(v)))
    _put(args, "kernel_num_gb", acts["bytes"][i], lambda v: v / 1e9)
    _put(args, "achieved TFLOP/s", acts["tflops"][i])
    _put(args, "achieved GB/s", acts["gbps"][i])
    _put(args, "% of peak", acts["pct_peak"][i], lambda v: 100 * v)
    _put(args, "% of DRAM peak", acts["pct_dram"][i], lambda v: 100 * v)
    _put(args, "roofline efficiency %", acts["efficiency"][i], lambda v: 100 * v)
    if np.isnan(acts["flops"][i]):
        args["flop estimate"] = reasons[acts["flops_reason"][i]] or "unknown"
    report = eff.devices.get(int(acts["device"][i]))
    dtype = dtypes[acts["rate_dtype"][i]]
    if report is not None and report.match.spec is not None:
        args["rated as"] = f"{dtype or 'unknown dtype'} on {report.match.spec.name}"
    return args


def _put(args: Dict[str, Any], key: str, value: float, convert=float) -> None:
    if value is not None and np.isfinite(value):
        args[key] = convert(float(value))


class _Top(msgspec.Struct):
    traceEvents: List[msgspec.Raw] = []


def write_augmented(src: "os.PathLike[str] | str", dst: "os.PathLike[str] | str", eff: Efficiency) -> int:
    """Write `src` with the analysis args added to `dst` (gzip when it ends in .gz); returns events patched."""
    src, dst = os.fspath(src), os.fspath(dst)
    target = _output_path(src, dst)
    patches = augmented_args(eff)
    fd, tmp = tempfile.mkstemp(prefix=".tb-gpuinsight-", suffix=".tmp", dir=os.path.dirname(target))
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw:
            sink: BinaryIO = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if dst.endswith(".gz") \
                else raw
            with sink:
                for piece in augmented_chunks(src, patches):
                    sink.write(piece)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(patches)


def augmented_chunks(src: str, patches: Dict[int, Dict[str, Any]]) -> Iterator[bytes]:
    """The augmented JSON of `src`, piece by piece (for files and for streamed downloads)."""
    content = read_all(src)
    view = content.view()
    try:
        top = msgspec.json.decode(view, type=Dict[str, msgspec.Raw]) if _is_object(view) else None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceError(src, f"invalid JSON: {' '.join(str(exc).split())[:200]}") from None
    if top is None:
        yield b'{"traceEvents":'
        yield from _events(view, patches)
        yield b"}"
        return
    yield b"{"
    for i, (key, value) in enumerate(top.items()):
        yield (b"," if i else b"") + msgspec.json.encode(key) + b":"
        if key == "traceEvents":
            yield from _events(value, patches)
        else:
            yield bytes(value)
    yield b"}"


def _events(array_json, patches: Dict[int, Dict[str, Any]]) -> Iterator[bytes]:
    try:
        events = msgspec.json.decode(array_json, type=List[msgspec.Raw])
    except (msgspec.DecodeError, UnicodeDecodeError):  # traceEvents is not a list: copied as it is
        yield bytes(array_json)
        return
    yield b"["
    batch: List[bytes] = []
    for i, raw in enumerate(events):
        extra = patches.get(i)
        batch.append(_patched(raw, extra) if extra else bytes(raw))
        if len(batch) >= 4096:
            yield (b"," if i >= len(batch) else b"") + b",\n".join(batch)
            batch = []
    if batch:
        yield (b"," if len(events) > len(batch) else b"") + b",\n".join(batch)
    yield b"]"


def _patched(raw: msgspec.Raw, extra: Dict[str, Any]) -> bytes:
    try:
        event = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):  # an event we cannot re-encode faithfully: left unchanged
        return bytes(raw)
    if not isinstance(event, dict):
        return bytes(raw)
    args = event.get("args")
    event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
    return msgspec.json.encode(event)


def _is_object(view) -> bool:
    for b in view[:4096]:
        if b not in b" \t\r\n\xef\xbb\xbf":
            return b == ord("{")
    return False


def _output_path(src: str, dst: str) -> str:
    """The file to write: `dst`, or the regular file a symlink `dst` points to. Raises GpuInsightError for the
    input itself, an empty path, a directory, a device or FIFO, or a missing output directory."""
    if not dst.strip():
        raise GpuInsightError("the output path is empty; name a .json or .json.gz file")
    target = os.path.realpath(dst)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise GpuInsightError(f"{dst}: cannot use as output: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise GpuInsightError(f"{dst}: is a directory; name the output file")
    if mode is not None and not stat.S_ISREG(mode):
        raise GpuInsightError(f"{dst}: not a regular file (a device, FIFO or socket); refusing to write there")
    if target == os.path.realpath(src) or (mode is not None and os.path.samefile(src, target)):
        raise GpuInsightError(f"{dst}: refusing to overwrite the input trace; choose another output path")
    if not os.path.isdir(os.path.dirname(target)):
        raise GpuInsightError(f"{dst}: the output directory does not exist")
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


__all__ = ["augmented_args", "augmented_chunks", "write_augmented"]
