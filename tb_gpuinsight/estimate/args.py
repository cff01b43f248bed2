"""The argument view every performance model reads: one cpu_op's ``Input Dims`` / ``Input type`` /
``Concrete Inputs`` (:class:`OpArgs`), shape helpers, and the checks shared by every family (argument counts
against the op's schema, ``out=`` overload positions, type promotion of elementwise results).
"""
from __future__ import annotations

import ast
import math
from typing import Any, Iterator

from ..trace.strides import broadcast_view, folded_strides
from .dtypes import dtype_name, is_floating_type, is_tensor_type, itemsize, result_dtype, size_of_dtype_name
from .schemas import arg_limit, out_positions as out_arg_positions  # noqa: F401 (its callers import it here)


class UnknownEstimate(Exception):
    """Raised inside an estimator when a number cannot be derived; the message is the reason."""


_NOT_RECORDED = object()

# ScalarType enum codes as Concrete Inputs print a dtype argument (c10/core/ScalarType.h).
SCALAR_TYPE_CODE_ITEMSIZE = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1,
    12: 1, 13: 1, 14: 4, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1,
}


def is_shape(obj: Any) -> bool:
    """A tensor shape: a list/tuple of non-negative ints (bools excluded)."""
    return isinstance(obj, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in obj)


def _parse_concrete(text: Any) -> Any:
    """Decode one Concrete Inputs entry ("1", "0.", "False", "[1, 141]") to a Python value."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped == "":
        return _NOT_RECORDED
    if len(stripped) > 10_000:  # guard literal_eval against pathological strings
        return stripped
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    try:
        return float(stripped)  # "inf", "nan"
    except ValueError:
        return stripped.strip("'\"")  # bare strings such as a padding mode "same"


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a shape (1 for a 0-dim tensor)."""
    return math.prod(shape)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy-style broadcast of shapes, or None when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


class ViewShape(tuple):
    """The shape of a broadcast view (0 strides from ``expand``): reading it touches ``stored`` elements of its
    storage, fewer than its numel (each repeated element comes from the same address)."""

    stored: int

    def __new__(cls, shape: Any, strides: Any) -> "ViewShape":
        view = super().__new__(cls, shape)
        view.stored = math.prod(d for d, s in zip(shape, strides) if s != 0)
        return view


def stored_numel(shape: tuple[int, ...]) -> int:
    """Distinct elements an op reads from a tensor of this shape: its numel, or less for a broadcast view."""
    return shape.stored if isinstance(shape, ViewShape) else math.prod(shape)


def read_bytes(tensors: list) -> int:
    """Bytes read from every tensor of ``(index, shape, itemsize)`` once, broadcast views by their storage."""
    return sum(stored_numel(s) * b for _, s, b in tensors)


def _view_shape(shape: Any, strides: Any) -> tuple[int, ...]:
    if isinstance(strides, (list, tuple)) and broadcast_view(list(shape), list(strides)):
        return ViewShape(shape, strides)
    return tuple(shape)


class OpArgs:
    """Read-only view of one cpu_op's ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` (and the ``Input
    Strides`` folded into them where an input is a broadcast view, see trace/strides.py)."""

    def __init__(self, dims: Any, types: Any, concrete: Any) -> None:
        self.dims = tuple(dims) if isinstance(dims, (list, tuple)) else ()
        self.types = tuple(types) if isinstance(types, (list, tuple)) else ()
        self.concrete = tuple(concrete) if isinstance(concrete, (list, tuple)) else ()
        strides = folded_strides(self.concrete)
        if strides is not None:
            self.concrete = self.concrete[:-1]
        self.strides = tuple(strides) if isinstance(strides, (list, tuple)) else ()

    def _strides_at(self, i: int) -> Any:
        return self.strides[i] if 0 <= i < len(self.strides) else None

    def __len__(self) -> int:
        return len(self.dims)

    def type_at(self, i: int) -> str | None:
        """The recorded type string of argument i (None when not recorded)."""
        value = self.types[i] if 0 <= i < len(self.types) else None
        return value if isinstance(value, str) else None

    def is_tensor(self, i: int) -> bool:
        """Argument i is a single tensor (types recorded) or a non-empty int list (untyped)."""
        if not 0 <= i < len(self.dims) or not is_shape(self.dims[i]):
            return False
        type_str = self.type_at(i)
        if type_str is None:  # Jan-2021 traces record dims without types
            return len(self.dims[i]) > 0
        return is_tensor_type(type_str)

    def shape(self, i: int, what: str = "") -> tuple[int, ...]:
        """Shape of tensor argument i; raises UnknownEstimate when it is not a tensor."""
        if not self.is_tensor(i):
            label = what or f"argument {i}"
            raise UnknownEstimate(f"{label} is not a recorded tensor shape")
        return tuple(self.dims[i])

    def opt_shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument i, or None (absent, None, or not a tensor)."""
        return tuple(self.dims[i]) if self.is_tensor(i) else None

    def value(self, i: int, what: str = "") -> Any:
        """Concrete value of scalar argument i; raises UnknownEstimate when not recorded."""
        raw = self.concrete[i] if 0 <= i < len(self.concrete) else _NOT_RECORDED
        parsed = _parse_concrete(raw) if raw is not _NOT_RECORDED else raw
        if parsed is _NOT_RECORDED:
            label = what or f"argument {i}"
            raise UnknownEstimate(f"{label} not recorded (trace has no Concrete Inputs)")
        return parsed

    def opt_value(self, i: int, default: Any = None) -> Any:
        """Concrete value of argument i, or ``default`` when it is not recorded."""
        try:
            return self.value(i)
        except UnknownEstimate:
            return default

    def int_list(self, i: int, n: int, what: str) -> tuple[int, ...]:
        """An int-list argument (stride, padding...) expanded to n entries."""
        value = self.value(i, what)
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise UnknownEstimate(f"{what} is not an int list: {value!r}")
        if len(value) == 1:
            value = list(value) * n
        if len(value) != n:
            raise UnknownEstimate(f"{what} has {len(value)} entries, expected {n}")
        return tuple(value)

    def flag(self, i: int, what: str) -> bool:
        """A bool argument."""
        value = self.value(i, what)
        if isinstance(value, str):
            return value.lower() == "true"
        return bool(value)

    def tensor_items(self) -> Iterator[tuple[int, tuple[int, ...], int | None]]:
        """(arg index, shape, itemsize) of every tensor, TensorList members included."""
        fallback = self.compute_itemsize()
        for i, dim in enumerate(self.dims):
            if self.is_tensor(i):
                type_str = self.type_at(i)
                size = itemsize(type_str) if type_str is not None else None
                yield i, _view_shape(dim, self._strides_at(i)), size
            elif self._is_tensor_list(i):
                yield from ((i, s, fallback or 4) for s in self.member_shapes(i))

    def member_shapes(self, i: int) -> list[tuple[int, ...]]:
        """Shapes of a list argument's tensor members (a TensorList, index's optional-tensor list), broadcast views
        marked as :class:`ViewShape`."""
        value = self.dims[i] if 0 <= i < len(self.dims) else None
        if not isinstance(value, (list, tuple)):
            return []
        strides = self._strides_at(i)
        strides = strides if isinstance(strides, (list, tuple)) and len(strides) == len(value) else [None] * len(value)
        return [_view_shape(m, st) for m, st in zip(value, strides) if is_shape(m) and isinstance(m, (list, tuple))]

    def _is_tensor_list(self, i: int) -> bool:
        dim = self.dims[i]
        return (self.type_at(i) in ("TensorList", None) and isinstance(dim, (list, tuple))
                and len(dim) > 0 and all(isinstance(m, (list, tuple)) for m in dim))

    def compute_dtype(self) -> str | None:
        """Type string of the first floating tensor input, else of the first tensor input."""
        first = None
        for i in range(len(self.dims)):
            if self.is_tensor(i) and self.type_at(i) is not None:
                if is_floating_type(self.type_at(i)):
                    return self.type_at(i)
                first = first or self.type_at(i)
        return first

    def compute_itemsize(self) -> int | None:
        """Item size of :meth:`compute_dtype`."""
        dtype = self.compute_dtype()
        return itemsize(dtype) if dtype else None


def check_arg_count(op: str, args: OpArgs) -> None:
    """Raise UnknownEstimate when more arguments are recorded than the op's schema has."""
    limit = arg_limit(op, len(args.dims))
    if limit is not None and len(args.dims) > limit:
        raise UnknownEstimate(
            f"shapes look corrupted: {len(args.dims)} arguments recorded, aten::{op} takes at most {limit}")


def op_key(name: Any) -> str:
    """``"aten::addmm"`` -> ``"addmm"``; other namespaces keep theirs (``"fbgemm::x"``)."""
    text = name if isinstance(name, str) else ""
    if text.startswith("aten::"):
        text = text[len("aten::"):]
    return text.split(".", 1)[0] if "::" not in text else text

def checked_tensors(op: str, args: OpArgs) -> list:
    """(index, shape, itemsize) of every tensor argument; raises UnknownEstimate when shapes or dtypes are missing."""
    if not args.dims:
        raise UnknownEstimate("no input shapes recorded")
    check_arg_count(op, args)
    tensors = list(args.tensor_items())
    if not tensors:
        raise UnknownEstimate("no tensor inputs recorded")
    if any(size is None for _, _, size in tensors):
        raise UnknownEstimate("tensor dtype not recorded")
    return tensors


def result_itemsize(op: str, args: OpArgs, tensors: list, fallback: int) -> int:
    """Item size of an elementwise result: bool for comparisons, else torch's type promotion."""
    if op in COMPARISON_OPS:
        return 1
    named = [(dtype_name(args.type_at(i)), len(s)) for i, s, _ in tensors if args.type_at(i) is not None]
    if not named or any(name is None for name, _ in named):
        return fallback
    result = result_dtype(named, _scalar_category(args))
    return size_of_dtype_name(result) or fallback if result else fallback


def _scalar_category(args: OpArgs) -> int | None:
    """Highest category (0 bool, 1 int, 2 float) of the recorded Python scalar arguments."""
    best = None
    for i in range(len(args.dims)):
        if args.type_at(i) != "Scalar":
            continue
        value = args.opt_value(i)
        kind = (0 if isinstance(value, bool) else 1 if isinstance(value, int)
                else 2 if isinstance(value, float) else None)
        if kind is not None and (best is None or kind > best):
            best = kind
    return best


COMPARISON_OPS = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_not", "logical_and",
    "logical_or", "logical_xor", "isin", "signbit",
})
