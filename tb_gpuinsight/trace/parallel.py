"""Decoding on several processes: how many (decode_workers), and the merge of parts decoded apart into the tables
one process would have built (the same rows, string categories, shape and collective codes, counts; tests compare
them). fanout.py decodes a streamed trace's batches in workers; a file read whole (one not laid out for streaming)
is split here into contiguous ranges of its events' raw slices, each decoded in a forked worker (decode_parallel).

Codes are handed out in the order the serial reader meets values, first chunk first; so the merge walks the parts
first to last to build each code list (shape and collective codes, shared by tables, are renumbered afterwards by
first use, see reader.renumber_by_first_use), and lays rows out first part first. Workers are forked, so they
read the parent's buffer of the JSON without copying it through a pipe; only tables travel back.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .table import Interner, Table

WORKERS_ENV = "TB_GPUINSIGHT_DECODE_WORKERS"
MIN_EVENTS_PER_PART = 50_000  # below this a worker's start costs more than it saves

# The parent's state a forked worker reads: (reader factory, the events' raw slices, the feeding function). Set
# only around a decode.
_shared: Optional[Tuple[Callable[[], Any], Sequence[Any], Callable]] = None


@dataclass
class Part:
    """What one worker decoded: its tables and the state its reader gathered."""
    tables: Dict[str, Table]
    shapes: List[Any]
    comms: List[Any]
    counts: Counter
    coerced: Counter
    dropped: Counter
    malformed: int
    t_min: float
    t_max: float
    first: int = 0  # added to the part's "event" column (a part decoded on its own counts its events from 0)
    python_calls: Counter = field(default_factory=Counter)


def part_of(reader: Any, tables: Dict[str, Table], first: int = 0) -> Part:
    """A finished reader's tables and counts as a Part."""
    return Part(tables, reader.shapes.items, reader.comms.items, reader.counts, reader.log.coerced,
                reader.log.dropped, reader.malformed, reader.t_min, reader.t_max, first, reader.python_calls)


def decode_workers(workers: Optional[int], file_bytes: Optional[int] = None, path: str = "") -> int:
    """Processes to decode with: `workers`, else $TB_GPUINSIGHT_DECODE_WORKERS, else up to AUTO_WORKERS for a
    file that likely holds AUTO_JSON_BYTES of JSON text or more (its size; a gzipped one's times GZIP_RATIO) in a
    process that is no worker of a pool itself (those of `summarize`, the plugin or Dask each load traces of
    their own) and runs no other thread, else 1. Never more than the machine's cores."""
    if workers is None:
        try:
            workers = int(os.environ[WORKERS_ENV])
        except (KeyError, ValueError):
            workers = _auto_workers(file_bytes, path)
    return max(1, min(workers, os.cpu_count() or 1, 64))


AUTO_JSON_BYTES = 256 << 20  # below this one process decodes a trace in a few seconds: not worth the workers
AUTO_WORKERS = 4
GZIP_RATIO = 10  # Kineto traces inflate 10 to 20 times: the low end, so that only a surely big trace fans out


def _auto_workers(file_bytes: Optional[int], path: str) -> int:
    text = (file_bytes or 0) * (GZIP_RATIO if str(path).endswith(".gz") else 1)
    if text < AUTO_JSON_BYTES:
        return 1
    # Forking a process that runs other threads (TensorBoard's, a user's app) can deadlock: only when asked for.
    return AUTO_WORKERS if forking_is_safe() else 1


def forking_is_safe() -> bool:
    """Whether this process may fork workers: it runs no other thread (a lock another thread holds at the fork
    stays held in the child) and is no pool's worker itself (those of `summarize`, the plugin or Dask)."""
    import multiprocessing  # here: only when forking is considered (its import costs 10 ms and a MB)
    import threading

    return multiprocessing.parent_process() is None and threading.active_count() == 1


def split(total: int, workers: int, align: int) -> List[Tuple[int, int]]:
    """Contiguous [start, end) event ranges, at most `workers`, each about MIN_EVENTS_PER_PART long or more (one
    when the trace is small), starting at multiples of `align` (the reader's chunk: parts then hold the very
    chunks a serial decode makes)."""
    parts = max(1, min(workers, total // max(MIN_EVENTS_PER_PART, 1)))
    bounds = sorted({min(total, int(round(total * i / parts / align)) * align) for i in range(parts)} | {total})
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def decode_parallel(new_reader: Callable[[], Any], events: Sequence[Any], ranges: List[Tuple[int, int]],
                    feed: Callable[[Any, Sequence[Any], int, int], None],
                    progress: Optional[Callable[[int], None]] = None) -> List[Part]:
    """Decode each range of `events` in a forked worker (`feed(reader, events, start, end)` fills a fresh reader);
    the parts in the order a serial decode meets them (first first)."""
    import multiprocessing  # here: one process decoding never pays for importing the pool
    from concurrent.futures import ProcessPoolExecutor

    global _shared
    _shared = (new_reader, events, feed)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=len(ranges), mp_context=context) as pool:
            futures = [pool.submit(_decode_range, start, end) for start, end in ranges]
            parts = []
            for (start, end), future in zip(ranges, futures):
                parts.append(future.result())
                if progress:
                    progress(end - start)
        return parts
    finally:
        _shared = None


def _decode_range(start: int, end: int) -> Part:
    new_reader, events, feed = _shared
    reader = new_reader()
    feed(reader, events, start, end)
    return part_of(reader, reader.finish())


def merge_into(reader: Any, parts: List[Part]) -> Dict[str, Table]:
    """The tables of `parts` (in serial order: first part first) as one reader would have built them; the
    reader's counters, codes and time range take the parts' in the same order."""
    shapes, comms = Interner(), Interner()
    shape_maps = [_remap(shapes, p.shapes) for p in parts]
    comm_maps = [_remap(comms, p.comms) for p in parts]
    for part in parts:
        reader.counts.update(part.counts)
        reader.python_calls.update(part.python_calls)
        reader.log.coerced.update(part.coerced)
        reader.log.dropped.update(part.dropped)
        reader.malformed += part.malformed
        reader.t_min = min(reader.t_min, part.t_min)
        reader.t_max = max(reader.t_max, part.t_max)
    reader.shapes.items[:] = shapes.items
    reader.comms.items[:] = comms.items
    codes = {"shape": shape_maps, "comm": comm_maps}
    firsts = [p.first for p in parts]
    return {name: _merge_table(name, [p.tables[name] for p in parts], codes, firsts) for name in parts[0].tables}


def _remap(interner: Interner, items: List[Any]) -> np.ndarray:
    """Each of a part's items' code in the merged list (items new to it are appended in the part's order)."""
    return np.fromiter((interner.code(item) for item in items), dtype=np.int64, count=len(items))


def _merge_table(name: str, tables: List[Table], code_maps: Dict[str, List[np.ndarray]],
                 firsts: List[int]) -> Table:
    """One table from its parts (in serial order: first part first); rows come out in that order. Each column
    is taken out of the parts as it is joined, so that parts and whole never all coexist."""
    kept = [i for i, t in enumerate(tables) if len(t)]
    if not kept:
        return tables[0]
    columns, strings = {}, {}
    for col in list(tables[kept[0]].columns):
        maps = code_maps.get(col)
        if col in tables[kept[0]].strings:
            merged = Interner()
            maps = [_remap(merged, tables[i].strings.get(col, [])) for i in range(len(tables))]
            strings[col] = merged.items
        pieces = []
        for i in kept:
            arr = tables[i].columns.pop(col)
            if maps is not None:
                arr = _apply(arr, maps[i])
            elif col == "event" and firsts[i]:
                arr += firsts[i]
            pieces.append(arr)
        columns[col] = np.concatenate(pieces)
        del pieces
    return Table(name, columns, strings)


def _apply(codes: np.ndarray, remap: np.ndarray) -> np.ndarray:
    """Part codes to merged codes; -1 (none) stays."""
    out = np.full(len(codes), -1, dtype=codes.dtype)
    present = codes >= 0
    out[present] = remap[codes[present]]
    return out
