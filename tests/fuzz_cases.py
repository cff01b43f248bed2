"""The fuzz's targeted cases, beside its random mutations (tests/test_fuzz.py): the reproducers of the reliability
probe as mutations of any seed trace, whole-file replacements, and filesystem oddities written in place of a trace.

- header: a 401-digit numSms / totalGlobalMem / computeMajor, a 401-digit baseTimeNanoseconds, distributedInfo.rank
  of 2**70, durations of 1e308 or 1e400 (beyond a float), a 10 MB kernel or op name;
- whole file: `{"traceEvents":[1,2,3]}` and other valid JSON that is no trace;
- filesystem: a symlink loop, a FIFO, a directory, a 2 GiB sparse file (a trace's start, then zeros), a symlink to a
  copy outside the folder (not followed by default), the content bz2-compressed under a .gz-style name, gzip with a
  100 KB file name in its header, each named like a trace, written instead of the case's file or beside it;
- names holding terminal escapes (kernels, ops, devices), `ProfilerStep#` numbers past int64, memory events on 300
  devices (second round of the probe).
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import random
from typing import Callable, Dict, List

HUGE = "1" + "0" * 400  # 401 digits: past a float and past Python's int-parsing limit of the JSON reader
_HUGE_TOKEN = "@@HUGE@@"  # written as the raw number (json.dumps cannot)
_TEN_MB = 10 * 1024 * 1024
SPARSE_BYTES = 2 << 30


class Special:
    """A filesystem entry that is no regular file, written by `write_entry` under a trace's name."""

    KINDS = ("symlink-loop", "fifo", "directory", "sparse", "outside-symlink", "bz2", "gzip-long-name")

    CONTENT = ("outside-symlink", "bz2", "gzip-long-name")  # kinds written with the whole file

    def __init__(self, kind: str, head: bytes = b"") -> None:
        self.kind, self.head = kind, head

    def __repr__(self) -> str:
        return f"Special({self.kind})"


def write_entry(path: str, data) -> None:
    """Write a case's file: bytes as they are, a Special as its kind of entry."""
    if not isinstance(data, Special):
        with open(path, "wb") as f:
            f.write(data)
        return
    if data.kind == "symlink-loop":
        os.symlink(os.path.basename(path), path)  # points at itself: ELOOP on open
    elif data.kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block forever without a writer
    elif data.kind == "outside-symlink":  # a link out of the case's folder, to a copy of the file
        outside = os.path.join(os.path.dirname(os.path.dirname(path)), "outside")
        os.makedirs(outside, exist_ok=True)
        target = os.path.join(outside, os.path.basename(path))
        with open(target, "wb") as f:
            f.write(data.head)
        os.symlink(target, path)
    elif data.kind in ("bz2", "gzip-long-name"):
        with open(path, "wb") as f:
            f.write(bz2.compress(data.head) if data.kind == "bz2" else _long_name_gzip(data.head))
    elif data.kind == "directory":
        os.mkdir(path)
        with open(os.path.join(path, "inner.pt.trace.json"), "wb") as f:
            f.write(b'{"traceEvents": []}')
    else:
        with open(path, "wb") as f:
            f.write(data.head)
        os.truncate(path, SPARSE_BYTES)  # holes: no disk used, zeros when read


# ------------------------------------------------------------------------------------------------- header cases

def _devices(doc: dict, key: str) -> None:
    props = doc.get("deviceProperties") or [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    doc["deviceProperties"] = props
    for p in props:
        if isinstance(p, dict):
            p[key] = _HUGE_TOKEN


def _events(doc: dict, cat: str = "") -> List[dict]:
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return []
    return [e for e in events if isinstance(e, dict) and (not cat or e.get("cat") == cat)]


def _durations(value: str) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        for e in _events(doc):
            if "dur" in e:
                e["dur"] = value
    return edit


def _long_name(cat: str) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        events = _events(doc, cat) or _events(doc)
        if events:
            events[0]["name"] = "k" * _TEN_MB
    return edit


def _rank(doc: dict) -> None:
    info = doc.get("distributedInfo")
    doc["distributedInfo"] = {**(info if isinstance(info, dict) else {}), "rank": 2 ** 70, "world_size": 2,
                              "backend": "nccl"}


ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"  # retitles a terminal, then clears it


def _escapes(doc: dict) -> None:
    for e in _events(doc)[:200]:
        if isinstance(e.get("name"), str):
            e["name"] += ESCAPES
    props = doc.get("deviceProperties")
    for p in props if isinstance(props, list) else []:
        if isinstance(p, dict):
            p["name"] = f"{p.get('name')}{ESCAPES}"


def _huge_steps(doc: dict) -> None:
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return
    first = next((e for e in _events(doc, "cpu_op") or _events(doc) if isinstance(e.get("ts"), (int, float))), {})
    ts = first.get("ts", 0)
    for i, number in enumerate(("9999999999999999999", "1" + "0" * 40)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "ts": ts + i,
                       "dur": 1000, "pid": first.get("pid", 1), "tid": first.get("tid", 1)})


def _many_devices(doc: dict) -> None:
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return
    for d in range(300):
        events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": 1 + d, "args": {"Device Type": 1, "Device Id": d, "Addr": 4096 * (d + 1),
                                             "Bytes": 4096, "Total Allocated": 4096, "Total Reserved": 8192}})


HEADER_CASES: Dict[str, Callable[[dict], None]] = {
    "numSms 401 digits": lambda d: _devices(d, "numSms"),
    "totalGlobalMem 401 digits": lambda d: _devices(d, "totalGlobalMem"),
    "computeMajor 401 digits": lambda d: _devices(d, "computeMajor"),
    "baseTimeNanoseconds 401 digits": lambda d: d.__setitem__("baseTimeNanoseconds", _HUGE_TOKEN),
    "rank 2**70": _rank,
    "durations 1e308": _durations("@@RAW:1e308@@"),
    "durations 1e400": _durations("@@RAW:1e400@@"),
    "10 MB kernel name": _long_name("kernel"),
    "10 MB op name": _long_name("cpu_op"),
    "terminal escapes in names": _escapes,
    "ProfilerStep past int64": _huge_steps,
    "memory events on 300 devices": _many_devices,
}
WHOLE_FILES = [b'{"traceEvents":[1,2,3]}', b'{"traceEvents":[]}', b'{"traceEvents":{}}', b"[]", b"{}", b"null",
               b"", b'{"traceEvents":[{"ph":"X"}]}', b'{"nodes":[1,2]}']


def header_case(data: bytes, rng: random.Random, dump: Callable[[object], bytes]) -> bytes:
    """A Kineto trace's text with one of HEADER_CASES applied (the text as it is when it is no JSON object)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if not isinstance(doc, dict):
        return data
    name = rng.choice(sorted(HEADER_CASES))
    if "10 MB" in name and rng.random() < 0.8:  # a 10 MB name is slow to write and read: one case in five of these
        name = "durations 1e308"
    HEADER_CASES[name](doc)
    return dump(doc).replace(f'"{_HUGE_TOKEN}"'.encode(), HUGE.encode())


def special_entry(data: bytes, rng: random.Random) -> Special:
    """A filesystem oddity to write under a trace's name (a sparse file starts with the trace's first 64 KiB; the
    link out, the bz2 and the long-named gzip hold the whole file)."""
    kind = rng.choice(Special.KINDS)
    return Special(kind, data[:65536] if kind == "sparse" else data if kind in Special.CONTENT else b"")


def _long_name_gzip(data: bytes) -> bytes:
    """`data` gzipped with a 100 KB FNAME field (legal: the field has no size limit)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="n" * 100_000, mode="wb", fileobj=buf, mtime=0, compresslevel=1) as g:
        g.write(data)
    return buf.getvalue()
