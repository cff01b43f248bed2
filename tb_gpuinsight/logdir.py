"""Logdir discovery: runs, workers, spans and their companion files, with file kinds sniffed from content.

A run is a directory (named by its path relative to the logdir, "." for the logdir itself) that holds at least one
Kineto trace. `tensorboard_trace_handler` names each trace `{worker}.{time_ns}.pt.trace.json[.gz]` (older builds:
`{worker}.pt.trace.json`); each file is one span of its worker, spans ordered by their stamp. Execution Trace and
tensor.trace files in the same directory are companions; one whose name carries the same `{worker}.{stamp}` prefix
belongs to that span, the others to the run. Memory snapshots (`*.pickle[.gz]`, from
`torch.cuda.memory._dump_snapshot`) in the directory are companions of the run, taken at their name.

A logdir may be an fsspec URL (`s3://bucket/logs`, `gs://...`): it is listed in one recursive listing (sizes,
ETags and times come with it), files named like Kineto traces are taken at their name and others are sniffed from
their first block, so discovering runs downloads no trace.
"""
from __future__ import annotations

import os
import re
import stat
import tarfile
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from .errors import TraceError
from .trace.digest import content_digest
from .trace.foreign import LOOKS_LIKE, foreign_head
from .trace.source import is_url, read_head, url_filesystem

KINETO = "kineto"
ET = "execution_trace"
TENSOR_TRACE = "tensor_trace"
MODEL_CONFIG = "model_config"  # the served model's Hugging Face config.json, as `model_config.json` in the run
MODEL_CONFIG_NAME = "model_config.json"
OTHER = "other"
UNREADABLE = "unreadable"
MEMORY_SNAPSHOT = "memory_snapshot"  # torch.cuda.memory._dump_snapshot's pickle: a run companion, taken at its name

_SNIFF_BYTES = 1 << 16
# Other tools' trace files are candidates too: they are listed as skipped, with what they look like.
_CANDIDATE = re.compile(r"\.(json|json\.gz|gz|trace|pb|pftrace|perfetto-trace|nsys-rep|qdrep|sqlite)$|tensor\.trace"
                        r"|\.pickle(\.gz)?$", re.IGNORECASE)
_SNAPSHOT_NAME = re.compile(r"\.pickle(\.gz)?$", re.IGNORECASE)
_SPAN_NAME = re.compile(r"^(?P<worker>.+?)\.(?P<stamp>\d{10,})\.(?P<rest>.+)$")
_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".et.json.gz", ".et.json", ".tensor.trace", ".json.gz",
             ".json", ".trace", ".gz")
_TRACE_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$")
_KINETO_KEYS = re.compile(rb'"(traceEvents|schemaVersion|deviceProperties|displayTimeUnit)"\s*:')
_ET_KEY = re.compile(rb'"schema"\s*:\s*"')
_EVENT_KEYS = re.compile(rb'"ph"\s*:')


@dataclass(frozen=True)
class Sniffed:
    """What a file is, judged from its first bytes."""
    kind: str
    reason: str = ""


def sniff(path: "os.PathLike[str] | str") -> Sniffed:
    """Classify a file as Kineto trace, Execution Trace, tensor.trace, other, or unreadable (with a reason)."""
    try:
        head = read_head(path, _SNIFF_BYTES)
    except PermissionError:
        return Sniffed(UNREADABLE, "permission denied")
    except OSError as exc:
        return Sniffed(UNREADABLE, exc.strerror or str(exc))
    other_tool = foreign_head(head, os.fspath(path))
    if other_tool:
        return Sniffed(OTHER, other_tool)
    if b"\0" in head:  # no JSON or text trace holds one: a sparse or binary file, judged without reading on
        return Sniffed(OTHER, "binary data (NUL bytes)")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        if _ET_KEY.search(text) and b'"nodes"' in text:
            return Sniffed(ET)
        if _KINETO_KEYS.search(text):
            return Sniffed(KINETO)
        return Sniffed(OTHER, "a JSON object without traceEvents or nodes")
    if text.startswith((b"[call]", b"[ret]")):
        return Sniffed(TENSOR_TRACE)
    if text.startswith(b"["):
        return Sniffed(KINETO) if _EVENT_KEYS.search(text) else Sniffed(OTHER, "a JSON array without events")
    if not text:
        return Sniffed(OTHER, "empty file" if not head else "unreadable gzip data")
    return Sniffed(OTHER, "not JSON")


def is_foreign(sniffed: Sniffed) -> bool:
    """Whether a sniffed file is another tool's trace (listed as skipped, with what it looks like)."""
    return sniffed.kind == OTHER and sniffed.reason.startswith(LOOKS_LIKE)


def split_name(filename: str) -> Tuple[str, Optional[int]]:
    """(worker, stamp) from a trace file name; stamp None when the name carries none."""
    base = filename
    for suffix in _SUFFIXES:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    match = _SPAN_NAME.match(filename)
    if match:
        return match.group("worker"), int(match.group("stamp"))
    return base, None


def companions(trace_path: "os.PathLike[str] | str", kind: str) -> List[str]:
    """The files of `kind` (ET or TENSOR_TRACE) that discovery would give this trace's span: its own
    (`{worker}.{stamp}.*`) first, then the run-level ones of its directory (names without a stamp)."""
    folder, own_name = os.path.split(os.path.abspath(trace_path))
    worker, stamp = split_name(own_name)
    by_span, run_level = _candidates_in(folder)
    names = (by_span.get((worker, stamp), []) if stamp is not None else []) + run_level
    out = []
    for name in names:  # only the files that can pair with this trace are looked into (not the trace itself)
        path = os.path.join(folder, name)
        if name == own_name:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or not (following_symlinks() or _stays_in(folder, path)):
            continue
        if _sniffed(path, st).kind != kind and not (kind == TENSOR_TRACE and name.endswith(".tensor.trace")):
            continue  # (a damaged file named as a tensor.trace is kept: its reader says what is wrong with it)
        out.append(path)
    return out


_LISTINGS: Dict[Tuple[str, int], Tuple[Dict[Tuple[str, int], List[str]], List[str]]] = {}


def _candidates_in(folder: str) -> Tuple[Dict[Tuple[str, int], List[str]], List[str]]:
    """A folder's companion-like file names by their (worker, stamp), and those without a stamp (run-level), in
    name order. Names only, so kept per version of the folder (its mtime): each trace of a run of 10,000 looking up
    its companions lists the folder once between them, not once each. A folder changed in the last 2 s is listed
    afresh (files added within one tick of its clock leave its mtime as it was)."""
    mtime = os.stat(folder).st_mtime_ns
    key = (folder, mtime)
    found = _LISTINGS.get(key)
    if found is None:
        by_span: Dict[Tuple[str, int], List[str]] = {}
        run_level: List[str] = []
        for name in sorted(os.listdir(folder)):
            if _CANDIDATE.search(name):
                w, s = split_name(name)
                (run_level if s is None else by_span.setdefault((w, s), [])).append(name)
        found = (by_span, run_level)
        if time.time_ns() - mtime > 2_000_000_000:
            if len(_LISTINGS) >= 64:
                _LISTINGS.clear()
            _LISTINGS[key] = found
    return found


def memory_snapshots(folder: str) -> List[str]:
    """The memory snapshot files (`*.pickle[.gz]`) directly in a local folder, in name order."""
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))
            if _SNAPSHOT_NAME.search(n) and os.path.isfile(os.path.join(folder, n))]
def model_config_companion(trace_path: "os.PathLike[str] | str") -> Optional[str]:
    """The `model_config.json` of a trace's directory (its run's), or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(trace_path)), MODEL_CONFIG_NAME)
    return path if os.path.isfile(path) else None


CAPTURE_DIR = "capture_traces"
CAPTURE_DETAILS = "execution_details.json"
MAX_CAPTURE_SPANS = 4  # a run's other spans tried as a replay span's graph capture, nearest first


def capture_companions(trace_path: "os.PathLike[str] | str") -> List[str]:
    """Traces that may hold the graph capture of a replay trace, most specific first: the files a
    `capture_traces/` folder beside it names in its `execution_details.json` (vLLM's layout; every Kineto trace
    of the folder when that file is missing or unreadable), also as a `{prefix}__capture_traces/` sibling of
    `{prefix}__{name}`; then up to MAX_CAPTURE_SPANS other spans of the same worker in its run, earlier first."""
    folder = os.path.dirname(os.path.abspath(trace_path))
    name = os.path.basename(trace_path)
    dirs = [os.path.join(folder, CAPTURE_DIR)]
    if "__" in name:
        dirs.append(os.path.join(folder, name.split("__", 1)[0] + "__" + CAPTURE_DIR))
    found = [p for d in dirs if os.path.isdir(d) for p in _named_captures(d)]
    worker, stamp = split_name(name)
    spans = sorted((s, os.path.join(folder, n)) for n in os.listdir(folder) if _TRACE_NAME.search(n)
                   for w, s in [split_name(n)] if w == worker and s is not None and s != stamp)
    if stamp is not None:
        spans.sort(key=lambda p: (p[0] > stamp, abs(p[0] - stamp)))
    return found + [p for _, p in spans[:MAX_CAPTURE_SPANS]]


def _named_captures(folder: str) -> List[str]:
    """The capture files an execution_details.json lists ([{"file": ..., "batch_size": ..., "mode": ...}])."""
    import json

    try:
        with open(os.path.join(folder, CAPTURE_DETAILS), encoding="utf-8") as f:
            details = json.load(f)
        names = [d["file"] for d in details if isinstance(d, dict) and isinstance(d.get("file"), str)]
    except (OSError, ValueError, TypeError):
        names = []
    if not names:
        names = [n for n in sorted(os.listdir(folder)) if _TRACE_NAME.search(n)]
    paths = [os.path.join(folder, os.path.basename(n)) for n in names]
    return [p for p in paths if os.path.isfile(p)]


@dataclass
class FileEntry:
    """One file of a run with its kind, size and mtime (used for cache keys and for 'still being written')."""
    path: str
    kind: str
    size: int
    mtime_ns: int
    reason: str = ""
    etag: str = ""  # an object store's version of the file (then preferred to mtime_ns in summary keys)
    digest: str = ""  # a local file's content digest (trace/digest.py): a same-name, size and mtime copy differs

    @property
    def version(self) -> str:
        """What changes when the file changes: its ETag on an object store, else its content digest (its mtime in
        ns when it could not be read)."""
        return self.etag or self.digest or str(self.mtime_ns)


@dataclass
class Span:
    """One profiler cycle of one worker: a Kineto trace plus companions matched to it by name."""
    worker: str
    stamp: Optional[int]
    trace: FileEntry
    execution_traces: List[FileEntry] = field(default_factory=list)
    tensor_traces: List[FileEntry] = field(default_factory=list)

    @property
    def name(self) -> str:
        return _basename(self.trace.path)


@dataclass
class Run:
    """A directory of traces: workers, each with its spans ordered by time, and run-level companions."""
    name: str
    path: str
    workers: Dict[str, List[Span]] = field(default_factory=dict)
    execution_traces: List[FileEntry] = field(default_factory=list)
    tensor_traces: List[FileEntry] = field(default_factory=list)
    unreadable: List[FileEntry] = field(default_factory=list)
    memory_snapshots: List[FileEntry] = field(default_factory=list)
    captures: List[FileEntry] = field(default_factory=list)  # graph-capture traces of a capture folder in it
    model_config: Optional[FileEntry] = None  # `model_config.json`: sizes the trace hides (estimate/model_config.py)

    def spans(self) -> List[Span]:
        """Every span of every worker, workers in name order, spans in time order."""
        return [s for w in sorted(self.workers) for s in self.workers[w]]


def discover(logdir: "os.PathLike[str] | str", follow_symlinks: Optional[bool] = None) -> List[Run]:
    """Every run under `logdir`, sorted by name. Unreadable files are listed on their run, never raised. Symbolic
    links (folders or files) that lead out of the logdir are skipped unless `follow_symlinks` (default: the
    process's `following_symlinks()`)."""
    root = os.fspath(logdir)
    if is_url(root):
        folders = _remote_folders(root)
    else:
        if not os.path.isdir(root):
            raise TraceError(root, "not a directory")
        follow = following_symlinks() if follow_symlinks is None else follow_symlinks
        folders = ((dirpath, [_entry(os.path.join(dirpath, f)) for f in files if _CANDIDATE.search(f)])
                   for dirpath, files in _walk(root, follow))
    runs = [r for r in (_scan_dir(root, dirpath, entries) for dirpath, entries in folders) if r is not None]
    return sorted(_fold_capture_folders(runs), key=lambda r: r.name)


def is_capture_folder(path: str) -> bool:
    """Whether a folder is a graph-capture folder by its name: vLLM's `capture_traces/` (also written as
    `{prefix}__capture_traces/` beside `{prefix}__{name}`)."""
    name = _basename(path.rstrip("/"))
    return name == CAPTURE_DIR or name.endswith("__" + CAPTURE_DIR)


def capture_label(path: str) -> str:
    """A capture companion as its run shows it: `capture_traces/<file>`."""
    folder, name = (path.rsplit("/", 1) if is_url(path) else os.path.split(path))
    return f"{_basename(folder.rstrip('/'))}/{name}"


def _fold_capture_folders(runs: List[Run]) -> List[Run]:
    """A capture folder inside a run is part of that run, not a run of its own: its traces are the run's capture
    companions (the replay traces beside it take their graph capture from them). A capture folder alone (the
    logdir itself, or beside no trace) stays a run."""
    by_path = {r.path.rstrip("/"): r for r in runs}
    kept = []
    for run in runs:
        parent = by_path.get(run.path.rstrip("/").rsplit("/", 1)[0] if is_url(run.path)
                             else os.path.dirname(run.path.rstrip(os.sep)))
        if run.name != "." and is_capture_folder(run.path) and parent is not None and parent.workers:
            parent.captures += [s.trace for s in run.spans()]
            parent.unreadable += run.unreadable
        else:
            kept.append(run)
    return kept


def relative_name(root: str, path: str) -> str:
    """A file's path relative to its logdir, with "/" separators (for a local path or a URL)."""
    if is_url(root):
        return path[len(root.rstrip("/")) + 1:]
    return os.path.relpath(path, root).replace(os.sep, "/")


def _remote_folders(root: str) -> List[Tuple[str, List[Optional[FileEntry]]]]:
    """(folder URL, entries) of an object-store logdir, from one recursive listing."""
    fs, base = url_filesystem(root)
    protocol = root.split("://", 1)[0]
    try:
        listing = fs.find(base, detail=True)
    except FileNotFoundError:
        raise TraceError(root, "no such logdir") from None
    except Exception as exc:  # credentials, network: one line
        raise TraceError(root, f"cannot list: {type(exc).__name__}: {exc}"[:200]) from None
    folders: Dict[str, List[Optional[FileEntry]]] = {}
    for path, info in sorted(listing.items()):
        name = path.rsplit("/", 1)[-1]
        if info.get("type") == "file" and _CANDIDATE.search(name):
            url = f"{protocol}://{path}"
            folders.setdefault(url.rsplit("/", 1)[0], []).append(_remote_entry(url, name, info))
    return sorted(folders.items())


_REMOTE_SNIFFED: Dict[Tuple[str, str], Sniffed] = {}


def _remote_entry(url: str, name: str, info: Dict) -> Optional[FileEntry]:
    stamp = info.get("LastModified") or info.get("mtime") or info.get("updated")
    mtime_ns = int(stamp.timestamp() * 1e9) if hasattr(stamp, "timestamp") else 0
    etag = str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("generation") or "")
    size = int(info.get("size") or 0)
    if _TRACE_NAME.search(name):  # taken at its name: sniffing would cost a request per rank
        return FileEntry(url, KINETO, size, mtime_ns, etag=etag.strip('"'))
    if _SNAPSHOT_NAME.search(name):
        return FileEntry(url, MEMORY_SNAPSHOT, size, mtime_ns, etag=etag.strip('"'))
    if name == MODEL_CONFIG_NAME:
        return FileEntry(url, MODEL_CONFIG, size, mtime_ns, etag=etag.strip('"'))
    sniffed = _REMOTE_SNIFFED.get((url, etag))
    if sniffed is None:  # one ranged read per companion file and version, not one per scan
        sniffed = sniff(url)
        if len(_REMOTE_SNIFFED) > 100_000:
            _REMOTE_SNIFFED.clear()
        _REMOTE_SNIFFED[(url, etag)] = sniffed
    if sniffed.kind == OTHER:
        if not is_foreign(sniffed):
            return None
        sniffed = Sniffed(UNREADABLE, f"skipped: {sniffed.reason}")
    return FileEntry(url, sniffed.kind, size, mtime_ns, sniffed.reason, etag=etag.strip('"'))


FOLLOW_SYMLINKS_ENV = "TB_GPUINSIGHT_FOLLOW_SYMLINKS"
_follow_symlinks: Optional[bool] = None


def set_follow_symlinks(follow: Optional[bool]) -> None:
    """Let this process's discovery follow symbolic links out of the logdir (the CLI's --follow-symlinks); None:
    as $TB_GPUINSIGHT_FOLLOW_SYMLINKS says (1 / true / yes), else not."""
    global _follow_symlinks
    _follow_symlinks = follow


def following_symlinks() -> bool:
    """Whether discovery follows symbolic links out of the logdir (see `set_follow_symlinks`)."""
    if _follow_symlinks is not None:
        return _follow_symlinks
    return os.environ.get(FOLLOW_SYMLINKS_ENV, "").strip().lower() in ("1", "true", "yes")


def inside(root: str, path: str) -> bool:
    """True when `path`, its symbolic links resolved, lies inside the folder `root` (also resolved)."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def _walk(root: str, follow: bool = False) -> Iterator[Tuple[str, List[str]]]:
    """os.walk following symlinks that stay inside `root` (all of them when `follow`), visiting each real
    directory once (symlink loops end here)."""
    seen = set()
    real_root = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=lambda e: None):
        if not follow:  # a link (folder or file) leading out of the logdir is not the logdir's
            dirnames[:] = [d for d in dirnames if _stays_in(real_root, os.path.join(dirpath, d))]
            filenames = [f for f in filenames if _stays_in(real_root, os.path.join(dirpath, f))]
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            dirnames[:] = []
            continue
        seen.add(key)
        dirnames.sort()
        yield dirpath, sorted(filenames)


def _stays_in(real_root: str, path: str) -> bool:
    return not os.path.islink(path) or inside(real_root, path)


def _scan_dir(root: str, dirpath: str, found: List[Optional[FileEntry]]) -> Optional[Run]:
    entries = [e for e in found if e]
    traces = [e for e in entries if e.kind == KINETO]
    unreadable = [e for e in entries if e.kind == UNREADABLE]
    if not traces and not unreadable:
        return None
    rel = relative_name(root, dirpath) if dirpath.rstrip("/") != root.rstrip("/") else "."
    run = Run(name=rel, path=dirpath, unreadable=unreadable)
    spans: Dict[Tuple[str, Optional[int]], Span] = {}
    for entry in traces:
        worker, stamp = split_name(_basename(entry.path))
        span = Span(worker=worker, stamp=stamp, trace=entry)
        spans[(worker, stamp)] = span
        run.workers.setdefault(worker, []).append(span)
    for spans_of_worker in run.workers.values():
        spans_of_worker.sort(key=lambda s: (s.stamp if s.stamp is not None else s.trace.mtime_ns, s.name))
    for entry in entries:
        if entry.kind in (ET, TENSOR_TRACE):
            _attach(run, spans, entry)
    run.memory_snapshots = [e for e in entries if e.kind == MEMORY_SNAPSHOT]
    run.model_config = next((e for e in entries if e.kind == MODEL_CONFIG), None)
    return run


def _attach(run: Run, spans: Dict[Tuple[str, Optional[int]], Span], entry: FileEntry) -> None:
    span = spans.get(split_name(_basename(entry.path)))
    owner = span if span is not None and span.stamp is not None else run
    (owner.execution_traces if entry.kind == ET else owner.tensor_traces).append(entry)


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1] if is_url(path) else os.path.basename(path)


# What each file version sniffed as: a server rescans its logdir every few seconds, and reading (and inflating) the
# head of every unchanged trace again each time costs more than the rest of the scan. A rewrite changes the ctime.
_SNIFFED: Dict[Tuple[str, int, int, int, int], "Sniffed"] = {}
_SNIFFED_LIMIT = 200_000


def _sniffed(path: str, st: os.stat_result) -> "Sniffed":
    key = (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    found = _SNIFFED.get(key)
    if found is None:
        if len(_SNIFFED) >= _SNIFFED_LIMIT:
            _SNIFFED.clear()
        found = _SNIFFED[key] = sniff(path)
    return found


def _entry(path: str) -> Optional[FileEntry]:
    try:
        st = os.stat(path)
    except OSError as exc:
        return FileEntry(path, UNREADABLE, 0, 0, exc.strerror or str(exc))
    if not os.path.isfile(path):
        return None
    if _SNAPSHOT_NAME.search(path):  # a pickle: never sniffed as text, read by the snapshot reader only
        return FileEntry(path, MEMORY_SNAPSHOT, st.st_size, st.st_mtime_ns)
    if os.path.basename(path) == MODEL_CONFIG_NAME:
        return FileEntry(path, MODEL_CONFIG, st.st_size, st.st_mtime_ns)
    sniffed = _sniffed(path, st)
    if sniffed.kind == OTHER and path.endswith(".tensor.trace"):  # a damaged companion (as companions() keeps it):
        sniffed = Sniffed(TENSOR_TRACE, sniffed.reason)  # its reader says what is wrong, not "no tensor.trace"
    if sniffed.kind == OTHER and is_foreign(sniffed):
        sniffed = Sniffed(UNREADABLE, f"skipped: {sniffed.reason}")
    if sniffed.kind == OTHER:
        if not _TRACE_NAME.search(path):
            return None
        if sniffed.reason.startswith("a JSON"):
            # Named like a trace and JSON, but its head shows no trace keys yet (a file still being written,
            # or a long header): the reader gives the verdict.
            sniffed = Sniffed(KINETO)
        else:  # named like a trace but not one: say so rather than hide it
            sniffed = Sniffed(UNREADABLE, f"named like a trace but is {sniffed.reason}")
    return FileEntry(path, sniffed.kind, st.st_size, st.st_mtime_ns, sniffed.reason, digest=content_digest(path, st))


_PROBLEM_SCAN_LIMIT = 10_000  # entries looked at to tell an empty logdir from one of other files


def logdir_problem(root: str) -> str:
    """Why a local logdir where `discover` found no run yields none, as "<path>: <reason>": missing, not a
    directory, unreadable, empty, or only files that are not traces (naming a few). "" for a URL logdir."""
    if not root or is_url(root):
        return ""
    if not os.path.exists(root):
        return f"{root}: no such directory (check the --logdir path)"
    if not os.path.isdir(root):
        hint = " (a .tar archive: extract it into a folder first)" if tarfile.is_tarfile(root) else ""
        return f"{root}: not a directory but a file{hint}; --logdir takes the folder holding the traces"
    try:
        os.listdir(root)
    except OSError as exc:
        return f"{root}: cannot be read ({exc.strerror or exc})"
    others: List[str] = []
    for dirpath, files in _walk(root):
        others += [os.path.relpath(os.path.join(dirpath, f), root) for f in files]
        if len(others) >= _PROBLEM_SCAN_LIMIT:
            break
    if not others:
        return f"{root}: empty, no file in it or its subfolders"
    example = ", ".join(sorted(others)[:3])
    tars = [f for f in others if re.search(r"\.(tar|tar\.gz|tgz)$", f)]
    hint = f"; {tars[0]} is an archive: extract it first" if tars else ""
    return (f"{root}: {len(others)}{'+' if len(others) >= _PROBLEM_SCAN_LIMIT else ''} files but no PyTorch "
            f"profiler trace (*.pt.trace.json or *.pt.trace.json.gz), e.g. {example}{hint}")
