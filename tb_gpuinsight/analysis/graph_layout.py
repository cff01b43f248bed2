"""Layered (Sugiyama-style) layout of a view's DAG: longest-path layers, one barycenter sweep to order each
layer, fixed spacing. Cheap enough to run per request on ~1,000 nodes."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

X_GAP, Y_GAP = 210.0, 90.0


def layered_layout(n: int, edges: Sequence[Tuple[int, int]]) -> List[Tuple[float, float]]:
    """(x, y) per node 0..n-1; edges (a, b) with a < b point down (callers give nodes in program order, and an
    edge against that order is laid out as if reversed)."""
    preds: List[List[int]] = [[] for _ in range(n)]
    for a, b in edges:
        lo, hi = (a, b) if a < b else (b, a)
        if lo != hi:
            preds[hi].append(lo)
    layer = [0] * n
    for v in range(n):  # index order is a topological order once every edge points to a higher index
        if preds[v]:
            layer[v] = 1 + max(layer[p] for p in preds[v])
    layers: Dict[int, List[int]] = {}
    for v in range(n):
        layers.setdefault(layer[v], []).append(v)
    x = [0.0] * n
    for depth in sorted(layers):
        row = layers[depth]
        # Barycenter of the predecessors' positions keeps edges short; program order breaks ties.
        row.sort(key=lambda v: (sum(x[p] for p in preds[v]) / len(preds[v]) if preds[v] else v * 1e-9, v))
        width = (len(row) - 1) * X_GAP
        for i, v in enumerate(row):
            x[v] = i * X_GAP - width / 2
    return [(x[v], layer[v] * Y_GAP) for v in range(n)]
