"""FLOP coverage: the one figure that says how much of the work has a FLOP estimate, defined here once for every
view (the Kernel efficiency cards, the Overview, `analyze`, `report`, `overview`).

    FLOPs known for X % of compute kernel time

Compute kernels are the GPU kernels other than communication (rated on the link, not in FLOP/s) and other than
copies and fills: memcpy / memset events and the kernels whose class is memcpy or memset (KV-cache writes, blit
kernels). A kernel whose FLOPs are known to be zero is known. X = time of compute kernels with a FLOP estimate /
time of compute kernels; unknown (None) when there is no compute kernel time.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ...trace.table import Table, unique_keys
from .names import kernel_class

NOT_COMPUTE = frozenset({"communication", "memcpy", "memset"})
LABEL = "FLOPs known for {} of compute kernel time"
KEY = "compute_flop_share"
SOURCE = "share of compute kernel time with a FLOP estimate (kernels other than communication, copies and fills)"


def is_compute_class(kind: str, klass: str) -> bool:
    """Whether an activity of this event kind and kernel class counts as compute kernel time."""
    return kind == "kernel" and klass not in NOT_COMPUTE


def compute_mask(acts: Table) -> np.ndarray:
    """Per activity: a compute kernel (module doc). Each distinct (name, kind, op) is classified once."""
    if not len(acts):
        return np.zeros(0, dtype=bool)
    names, kinds, ops = acts.strings["name"], acts.strings["kind"], acts.strings.get("op_name", [])
    uniq, inverse = unique_keys(acts, ("name", "kind", "op_name"))
    flags = np.array([is_compute_class(kinds[k], kernel_class(names[n], kinds[k], ops[o] if o >= 0 else None))
                      for n, k, o in uniq.tolist()], dtype=bool)
    return flags[inverse]


def share(known_us: float, compute_us: float) -> Optional[float]:
    """The coverage of `compute_us` of compute kernel time of which `known_us` has FLOPs (None without any)."""
    return known_us / compute_us if compute_us > 0 else None


def flop_coverage(parts: Sequence[Table]) -> Dict[str, Any]:
    """The coverage over the activities of one or several spans (or devices): compute kernel time, the part of it
    with a FLOP estimate, and their share (`KEY`)."""
    compute_us = known_us = 0.0
    for acts in parts:
        mask = compute_mask(acts)
        dur = acts["dur"][mask] if len(acts) else np.zeros(0)
        compute_us += float(dur.sum())
        known_us += float(dur[~np.isnan(acts["flops"][mask])].sum()) if len(acts) else 0.0
    return {"compute_time_us": compute_us, "flop_known_us": known_us, KEY: share(known_us, compute_us)}


def label(pct_text: str) -> str:
    """The figure's one wording, with the share already formatted ("46.4 %")."""
    return LABEL.format(pct_text)


__all__: List[str] = ["NOT_COMPUTE", "LABEL", "KEY", "SOURCE", "is_compute_class", "compute_mask", "share", "flop_coverage",
                      "label"]
