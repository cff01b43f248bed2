"""A small columnar table: numpy columns, with string columns stored as int32 codes into a shared list.

String columns repeat a lot (kernel and op names, streams, shape signatures), so codes keep big traces lean and make
group-bys cheap. `to_pandas()` turns string columns into pandas Categoricals without copying the strings.
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np


class Table:
    """Columns of equal length. `strings[col]` holds the categories of a coded string column."""

    def __init__(self, name: str, columns: Mapping[str, np.ndarray],
                 strings: Optional[Mapping[str, List[str]]] = None) -> None:
        self.name = name
        self.columns: Dict[str, np.ndarray] = dict(columns)
        self.strings: Dict[str, List[str]] = dict(strings or {})
        lengths = {len(c) for c in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"table {name}: columns differ in length {sorted(lengths)}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __contains__(self, col: str) -> bool:
        return col in self.columns

    def __getitem__(self, col: str) -> np.ndarray:
        return self.columns[col]

    def __repr__(self) -> str:
        return f"Table({self.name!r}, rows={len(self)}, columns={list(self.columns)})"

    def values(self, col: str) -> List:
        """A column as Python values, string columns decoded."""
        data = self.columns[col]
        cats = self.strings.get(col)
        if cats is None:
            return data.tolist()
        return [cats[i] if i >= 0 else None for i in data]

    def decode(self, col: str, code: int) -> Optional[str]:
        """The string behind one code of a string column (None for missing, -1)."""
        return self.strings[col][code] if code >= 0 else None

    def take(self, index: np.ndarray) -> "Table":
        """Rows selected by a boolean mask or integer index, sharing the string lists."""
        return Table(self.name, {k: v[index] for k, v in self.columns.items()}, self.strings)

    def to_pandas(self):
        """A pandas DataFrame; string columns become Categoricals, missing codes become NaN."""
        import pandas as pd  # imported here: the reader itself never needs pandas

        data = {}
        for col, arr in self.columns.items():
            cats = self.strings.get(col)
            data[col] = arr if cats is None else pd.Categorical.from_codes(arr, categories=_unique(cats))
        return pd.DataFrame(data)


def _unique(cats: Sequence[str]) -> List[str]:
    """pandas needs unique categories; coded lists are unique by construction, this guards user-made tables."""
    if len(set(cats)) == len(cats):
        return list(cats)
    raise ValueError("string categories must be unique")


class _Codes(dict):
    """value -> code; looking up a new value gives it the next code (so one C-level lookup per value codes a list:
    `map(codes.__getitem__, values)`)."""

    __slots__ = ("items",)

    def __init__(self, items: List) -> None:
        super().__init__()
        self.items = items

    def __missing__(self, value) -> int:
        code = self[value] = len(self.items)
        self.items.append(value)
        return code

    def __reduce__(self):  # pickled (to a worker's parent) as a plain dict
        return dict, (dict(self),)


def code_labels(labels: Sequence[str], lookup: Dict[str, int], out: List[str]) -> np.ndarray:
    """The codes of `labels` in `out` (int32), appending to `out` (and `lookup`: text -> code) the labels it does
    not hold yet: how tables coded against different string lists are merged onto one."""
    codes = np.empty(len(labels), dtype=np.int32)
    for i, text in enumerate(labels):
        code = lookup.get(text)
        if code is None:
            code = lookup[text] = len(out)
            out.append(text)
        codes[i] = code
    return codes


class Interner:
    """Maps strings (or bytes) to stable int codes; `items` lists them in code order."""

    __slots__ = ("codes", "items")

    def __init__(self) -> None:
        self.items: List = []
        self.codes: Dict = _Codes(self.items)

    def code(self, value) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.items)
            self.items.append(value)
        return c

    def encode(self, values: Iterable) -> Iterator[int]:
        codes, code = self.codes, self.code
        for v in values:
            c = codes.get(v)
            yield code(v) if c is None else c


def unique_rows(stacked: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """`np.unique(stacked, axis=0, return_inverse=True)` of a 2-D integer array (the distinct rows in lexicographic
    order, and each row's index into them), through one 1-D unique over a packed key: numpy's row-wise unique
    sorts the rows as records, ten times slower on a million rows. Columns whose value ranges multiply past 2**62
    take numpy's way."""
    stacked = np.asarray(stacked)
    if stacked.ndim != 2 or stacked.dtype.kind not in "iu" or not stacked.size:
        distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)
    low, high = stacked.min(axis=0).tolist(), stacked.max(axis=0).tolist()  # Python integers: no overflow
    sizes = [h - lo + 1 for lo, h in zip(low, high)]
    total = 1
    for size in sizes:
        total *= size
    if total >= 1 << 62 or max(high) >= 1 << 63:  # (a uint64 beyond int64 too)
        distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)
    key = np.zeros(len(stacked), dtype=np.int64)
    for j, size in enumerate(sizes):
        key = key * size + (stacked[:, j].astype(np.int64) - np.int64(low[j]))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return stacked[first], inverse.reshape(-1)


def unique_keys(acts: Table, cols: Tuple[str, ...]) -> Tuple[np.ndarray, np.ndarray]:
    """Distinct rows of some code columns (rows x len(cols), codes may be -1, as int64) and each activity's index
    into them (`unique_rows`)."""
    stacked = np.stack([acts[c].astype(np.int64) for c in cols], axis=1) if cols else np.zeros((len(acts), 0), np.int64)
    return unique_rows(stacked)
