"""``Input Strides`` (Kineto, ``record_shapes=True`` in torch >= 2.1), kept only where they change what an op reads.

A tensor built by ``expand`` (or broadcast views) has stride 0 on its broadcast dims: an op reading it touches its
real storage, not its logical numel (``gather`` with ``index.expand(64, 32)`` reads 32 index elements, not 2,048).
Every other stride pattern reads each element once, so strides are kept only for ops with such an input, which
keeps shape signatures (and estimates) shared across ops whose strides merely differ in layout.

The reader interns the raw strides beside an op's shape only when its text holds a 0 stride (a cheap byte
search, see :data:`ZERO_STRIDE`); decoding folds them into the op's Concrete Inputs as one trailing
``["Input Strides", [...]]`` entry (:func:`fold_strides`), so they travel with the shape signature into every
estimate and memo key.
"""
from __future__ import annotations

import re
from typing import Any, List, Optional

STRIDES_KEY = "Input Strides"
# A 0 among the stride lists' numbers: `[0,`, ` 0]`, `,0,` ... (ops without one skip strides altogether).
ZERO_STRIDE = re.compile(rb"[\[ ,]0[,\]]")


def _has_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def broadcast_view(shape: Any, strides: Any) -> bool:
    """Whether one tensor's view repeats elements: a 0 stride on a dim of size > 1."""
    return (_has_int_list(shape) and _has_int_list(strides) and len(shape) == len(strides)
            and any(s == 0 and d > 1 for d, s in zip(shape, strides)))


def _any_broadcast(dims: List[Any], strides: List[Any]) -> bool:
    for shape, stride in zip(dims, strides):
        if broadcast_view(shape, stride):
            return True
        if isinstance(shape, list) and isinstance(stride, list) and shape and isinstance(shape[0], list):
            if any(broadcast_view(m, s) for m, s in zip(shape, stride)):  # a TensorList's members
                return True
    return False


def fold_strides(dims: Any, concrete: Any, strides: Any) -> Any:
    """Concrete Inputs with ``["Input Strides", strides]`` appended when some input is a broadcast view (else
    unchanged); absent Concrete Inputs become ``""`` per argument (not recorded) before it."""
    if not isinstance(dims, list) or not isinstance(strides, list) or not _any_broadcast(dims, strides):
        return concrete
    values: List[Any] = list(concrete) if isinstance(concrete, list) else [""] * len(dims)
    return values + [[STRIDES_KEY, strides]]


def folded_strides(concrete: Any) -> Optional[Any]:
    """The strides :func:`fold_strides` appended to Concrete Inputs (lists or frozen tuples), else None."""
    if isinstance(concrete, (list, tuple)) and concrete:
        last = concrete[-1]
        if isinstance(last, (list, tuple)) and len(last) == 2 and last[0] == STRIDES_KEY:
            return last[1]
    return None
