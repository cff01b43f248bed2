"""Names of the Execution graph's chunking groups (runs of consecutive ops, see graph_view.py): what a run does,
as its commonest op kinds, not its first and last op (which are mostly `aten::view` and `aten::as_strided`).

A backward op is named by its autograd function ("ConvolutionBackward0", not "autograd::engine::evaluate_function:
ConvolutionBackward0") and any op without its namespace ("addmm", "AccumulateGrad"); ops that only reshape or
alias a tensor name a run only when it holds nothing else.
"""
from __future__ import annotations

import collections
from typing import Sequence

_WRAPPER = "autograd::engine::evaluate_function: "
_LAYOUT = frozenset({"view", "as_strided", "empty", "empty_strided", "t", "transpose", "reshape", "_reshape_alias",
                     "resize_", "expand", "slice", "select", "detach", "contiguous", "unsqueeze", "squeeze", "permute",
                     "alias", "lift_fresh", "_unsafe_view", "result_type", "record_stream"})


def short_name(name: str) -> str:
    """An op's name as a group label quotes it."""
    if name.startswith(_WRAPPER):
        name = name[len(_WRAPPER):]
    return name.rsplit("::", 1)[-1] or name


def group_label(units: Sequence[str], top: int = 2) -> str:
    """A run of ops named by its `top` commonest kinds with their counts, e.g. "ConvolutionBackward0 ×20,
    ReluBackward0 ×17"; "group" for an empty run."""
    counts = collections.Counter(short_name(n) for n in units)
    if not counts:
        return "group"
    work = collections.Counter({k: v for k, v in counts.items() if k not in _LAYOUT}) or counts
    named = [f"{name} ×{n}" if n > 1 else name for name, n in work.most_common(top)]
    return ", ".join(named) + (", …" if len(work) > top else "")
