"""Decoding events into tables, chunk by chunk: each chunk's events are decoded into light structs (their args left
raw), routed to their tables once per distinct (category, phase), and each table's args are decoded only for the
events that go to it, into a struct of the fields that table reads (see events.py); columns.py builds the columns.
"""
from __future__ import annotations

import operator
from collections import Counter
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import msgspec
import numpy as np

from .columns import _BUILDERS, _ORDER, _TS_LIMIT, Kinds, _Columns, _extra_value, _of, as_float64
from .events import CATEGORIES, MEMORY_EVENT, MODULE_PREFIX, TABLE_OF, TABLES, _ARG_NAMES, _make_schema
from .repair import FieldLog, StructRepairer, _kind, typed_decoder
from .stages import stage
from .table import Interner, Table

_CAT = operator.attrgetter("cat")
_PH = operator.attrgetter("ph")
_TS = operator.attrgetter("ts")
_NAME = operator.attrgetter("name")
_IS_MODULE = operator.methodcaller("startswith", MODULE_PREFIX)


PYTHON_BUCKET_US = 100.0  # resolution of the python_function counts (a decode step lasts ~10 ms)


class _Routes:
    """Where events go, decided once per distinct (category, phase) rather than per event: a code per
    (table, kind), NOWHERE, or a BY_NAME code for events whose destination depends on their name (MEMORY_EVENT,
    MODULE_PREFIX)."""

    NOWHERE = -1
    MEMORY_BY_NAME = -2  # an instant event: a memory event when named so
    MODULE_BY_NAME = -3  # a python_function event: a module call when named so

    def __init__(self) -> None:
        self.dests: List[Tuple[str, str]] = []
        self._codes: Dict[Tuple[str, str], int] = {}

    def codes(self, keys: Iterable[Tuple[str, str]]) -> Dict[Tuple[str, str], int]:
        """The code of every (category, phase) key, with those of `keys` decided."""
        for key in keys:
            if key not in self._codes:
                self._codes[key] = self._decide(*key)
        return self._codes

    def _decide(self, cat: str, ph: str) -> int:
        canon = CATEGORIES.get(cat) or CATEGORIES.get(cat.lower())
        dest = TABLE_OF.get(canon) if canon else None
        if dest is not None and ph == "X":
            return self.add(dest)
        if ph in ("i", "I"):
            return self.MEMORY_BY_NAME
        if ph == "X" and canon == "python_function":
            return self.MODULE_BY_NAME
        return self.NOWHERE

    def add(self, dest: Tuple[str, str]) -> int:
        if dest not in self.dests:
            self.dests.append(dest)
        return self.dests.index(dest)

    def codes_of(self, table: str) -> List[int]:
        return [i for i, (t, _) in enumerate(self.dests) if t == table]

    def kinds(self, codes: np.ndarray) -> Kinds:
        return Kinds(codes, [kind for _, kind in self.dests])


class _ArgsDecoder:
    """Decodes one table's event args, all of a chunk at once; args that do not fit go field by field
    (repair.py), args that are no object are dropped (and counted). Absent or null args read as all absent."""

    def __init__(self, args_type: type, log: FieldLog) -> None:
        self.decoder = typed_decoder(List[args_type])
        self.repairer = StructRepairer(args_type, log, "arg")
        self.empty = args_type()
        self.log = log

    def decode(self, raws: List[msgspec.Raw]) -> List:
        """The args structs of one chunk's events (absent args are `{}`: see events.py)."""
        try:
            return self.decoder.decode(b"[" + b",".join(raws) + b"]")
        except (msgspec.ValidationError, UnicodeDecodeError):
            return [self._one(bytes(r)) for r in raws]

    def _one(self, raw: bytes) -> Any:
        if not raw or raw == b"null":
            return self.empty
        args = self.repairer.decode(raw)
        if args is None:
            self.log.drop("event 'args'", f"{_kind(raw)}, not an object")
            return self.empty
        return args


class _Reader:
    """State of one load: schema, column builders, counters."""

    def __init__(self, path: str, extra_args: Tuple[str, ...]) -> None:
        self.path = path
        self.extra_args = extra_args
        self.event_type, self.args_types = _make_schema(extra_args)
        self.decoder = typed_decoder(List[self.event_type])
        self.raw_list = typed_decoder(List[msgspec.Raw])
        self.log = FieldLog()
        self.repairer = StructRepairer(self.event_type, self.log, "event")
        self.args = {t: _ArgsDecoder(typ, self.log) for t, typ in self.args_types.items()}
        self.columns = {t: _Columns(t, self.log) for t in TABLES}
        self.extras: Dict[str, Dict[str, List[np.ndarray]]] = {t: {} for t in TABLES}
        self.shapes = Interner()
        self.comms = Interner()
        self.keys = Interner()  # the (category, phase) pairs met so far
        self.route = _Routes()
        self.counts: Counter = Counter()
        self.python_calls: Counter = Counter()  # PYTHON_BUCKET_US bucket -> python_function events starting in it
        self.malformed = 0
        self._holes = False  # the last decoded chunk holds None for entries that were no object
        self.t_min = np.inf
        self.t_max = -np.inf

    def feed(self, raws: Sequence[msgspec.Raw], first_index: int) -> None:
        """Decode events `first_index ...` of traceEvents into the tables."""
        with stage("decode"):
            evs = self._decode(raws)
        self.feed_events(evs, first_index)

    def decode_block(self, text: bytes) -> List:
        """The events of a JSON array's text (None for entries that are no object); msgspec.DecodeError when
        the text is not a JSON array (stream.py then knows it did not cut at an event boundary)."""
        with stage("decode"):
            try:
                return self.decoder.decode(text)
            except (msgspec.ValidationError, UnicodeDecodeError):
                return self._decode_one_by_one(self.raw_list.decode(text))

    def feed_events(self, evs: List, first_index: int) -> None:
        """Decoded events `first_index ...` of traceEvents (None for entries that were no object) into the tables."""
        index = np.arange(first_index, first_index + len(evs))
        if self._holes:  # entries that were no JSON object (only the one-by-one decode makes them)
            self._holes = False
            keep = [i for i, e in enumerate(evs) if e is not None]
            evs, index = [evs[i] for i in keep], index[keep]
        # One pass over the events numbers their distinct (category, phase) keys: the category counts and the
        # routes are then decided per key, not per event. (zip reuses its pair: a third faster than attrgetter's.)
        pairs = zip(map(_CAT, evs), map(_PH, evs))
        key_ids = np.fromiter(map(self.keys.codes.__getitem__, pairs), dtype=np.int32, count=len(evs))
        counts = np.bincount(key_ids, minlength=len(self.keys.items)).tolist()
        for (cat, _), count in zip(self.keys.items, counts):  # in first-seen order, as the categories came
            if count:
                self.counts[cat] += count
        ts = as_float64(list(map(_TS, evs)))  # None: NaN
        dest = self._destinations(evs, key_ids, ts)
        for table in TABLES:
            codes = self.route.codes_of(table)
            rows = np.flatnonzero(np.isin(dest, codes) if len(codes) > 1 else dest == codes[0]) if codes else ()
            if len(rows):
                chunk = list(map(evs.__getitem__, rows.tolist()))
                self._add(table, chunk, self.route.kinds(dest[rows]), ts[rows])
                self.columns[table].add("event", index[rows])

    def _destinations(self, evs: List, key_ids: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Each event's destination code (see _Routes); untimed events go nowhere, times out of range are dropped."""
        with np.errstate(invalid="ignore"):
            wild = np.abs(ts) > _TS_LIMIT
        for i in np.flatnonzero(wild).tolist():
            self.log.drop("event 'ts'", f"outside {-_TS_LIMIT:g}..{_TS_LIMIT:g} us: the event is left untimed")
            evs[i].ts = None
        route = self.route
        codes = route.codes(self.keys.items)
        dest = np.array([codes[key] for key in self.keys.items], dtype=np.int16)[key_ids]
        dest[np.isnan(ts) | wild] = _Routes.NOWHERE
        by_name = np.flatnonzero(dest <= _Routes.MEMORY_BY_NAME)
        if len(by_name):  # memory instants and module calls are told by their names
            self._count_python_calls(ts[by_name[dest[by_name] == _Routes.MODULE_BY_NAME]])
            rows = by_name.tolist()
            names = list(map(_NAME, map(evs.__getitem__, rows)))
            memory = dest[by_name] == _Routes.MEMORY_BY_NAME
            keep = np.where(memory, np.fromiter(map(MEMORY_EVENT.__eq__, names), bool, len(rows)),
                            np.fromiter(map(_IS_MODULE, names), bool, len(rows)))
            dest[by_name] = np.where(keep, np.where(memory, route.add(("memory", "")), route.add(("modules", ""))),
                                     _Routes.NOWHERE)
        return dest

    def _count_python_calls(self, starts: np.ndarray) -> None:
        """python_function events (with_stack recordings) by start-time bucket: the rate of the profiler's own
        stack recording per step, without keeping the events."""
        if len(starts):
            buckets, counts = np.unique(np.floor(starts / PYTHON_BUCKET_US).astype(np.int64), return_counts=True)
            self.python_calls.update(dict(zip(buckets.tolist(), counts.tolist())))

    def _decode(self, raws: Sequence[msgspec.Raw]) -> List:
        buf = b"[" + b",".join(raws) + b"]"
        try:
            return self.decoder.decode(buf)
        except (msgspec.ValidationError, UnicodeDecodeError):
            return self._decode_one_by_one(raws)

    def _decode_one_by_one(self, raws: Sequence[msgspec.Raw]) -> List:
        """Each event alone, so that a value of the wrong type spoils only its own field (see repair.py); an
        event that is not a JSON object is skipped (and counted)."""
        out = []
        for raw in raws:
            event = self.repairer.decode(raw)
            if event is None:
                self.malformed += 1
                self._holes = True
            out.append(event)  # None keeps positions aligned with traceEvents
        return out

    def _add(self, table: str, evs: List, kinds: Kinds, ts: np.ndarray) -> None:
        """Events of one table with their times (every one finite and in range: see _destinations)."""
        n = len(evs)
        with stage("decode"):
            args = self.args[table].decode(_of(evs, "args"))
        cols = self.columns[table]
        cols.add("ts", ts)
        _BUILDERS[table](cols, evs, args, n, self.shapes, kinds, self.comms)
        if self.extra_args:
            self._add_extras(table, args, n)
        if table in ("memory", "modules"):  # the trace's time range stays that of its activities
            return
        ts = cols.chunks["ts"][-1]
        end = ts + cols.chunks["dur"][-1]
        self.t_min = min(self.t_min, float(np.nanmin(ts)))
        self.t_max = max(self.t_max, float(np.nanmax(end)))

    def _add_extras(self, table: str, args: List, n: int) -> None:
        memo: Dict[bytes, Any] = {}
        for i, name in enumerate(self.extra_args):
            attr = _ARG_NAMES.get(name, f"x{i}")
            col = np.empty(n, dtype=object)
            col[:] = [_extra_value(getattr(a, attr), memo) for a in args]
            self.extras[table].setdefault(name, []).append(col)

    def finish(self) -> Dict[str, Table]:
        tables = {}
        for name in TABLES:
            columns = self.columns.pop(name)
            table = columns.finish(name, _ORDER[name])
            extras = self.extras.pop(name)
            for arg in list(extras):
                parts = extras.pop(arg)
                table.columns[arg] = np.concatenate(parts) if parts else np.empty(0, dtype=object)
            if self.extra_args and not len(table):
                for arg in self.extra_args:
                    table.columns.setdefault(arg, np.empty(0, dtype=object))
            tables[name] = table
        return tables


# Codes shared by several tables (shape signatures: ops and annotations; collective args: ops, kernels and
# annotations) are renumbered in the order of the events that first use them, so that they do not depend on how
# the events were cut into chunks (by bytes when streaming, by count on several cores).
SHARED_CODES = {"shape": ("ops", "annotations"), "comm": ("ops", "kernels", "annotations")}


def renumber_by_first_use(tables: Dict[str, Table], col: str, items: List) -> List:
    """Rewrite column `col` of its tables so that codes follow first use in traceEvents; the reordered items."""
    names = [t for t in SHARED_CODES[col] if col in tables[t].columns and len(tables[t])]
    if not names or not items:
        return items
    events = np.concatenate([tables[t]["event"] for t in names])
    codes = np.concatenate([tables[t][col] for t in names]).astype(np.int64)
    used = codes >= 0
    codes = codes[used][np.argsort(events[used], kind="stable")]
    uniq, first = np.unique(codes, return_index=True)
    order = uniq[np.argsort(first)].tolist()
    order += sorted(set(range(len(items))) - set(order))  # never the case today: kept for safety
    remap = np.empty(len(items), dtype=np.int64)
    remap[order] = np.arange(len(items))
    for t in names:
        arr = tables[t].columns[col]
        tables[t].columns[col] = np.where(arr >= 0, remap[np.maximum(arr, 0)], arr).astype(arr.dtype)
    return [items[i] for i in order]
