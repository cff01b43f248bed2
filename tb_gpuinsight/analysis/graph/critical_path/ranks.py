"""The critical paths of a run's ranks side by side: which rank's path is longest, and why.

Per rank (one worker's spans): the wall time, the path time (wall minus idle) and the time per cause over its steps,
and its longest segment. The longest path is compared with the median rank's, cause by cause. In a collective every
rank waits for the slowest one inside the collective, so the rank that spends the least time communicating is the
one the others wait for: named as the likely straggler when the ranks communicate.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .path import CriticalPath
from .deps import CAUSES

_MS = 1000.0


def rank_rows(items: Sequence[Tuple[str, Sequence[CriticalPath]]]) -> List[Dict[str, Any]]:
    """One row per worker: worker, rank, wall_us, path_us, causes, steps, top (its longest segment)."""
    rows = []
    for i, (worker, parts) in enumerate(items):
        causes = dict.fromkeys(CAUSES, 0.0)
        wall = path = 0.0
        steps = 0
        top: Optional[Dict[str, Any]] = None
        for cp in parts:
            for c, us in cp.totals().items():
                causes[c] += us
            wall += sum(s["wall_us"] for s in cp.steps)
            path += sum(s["path_us"] for s in cp.steps)
            steps += len(cp.steps)
            seg = cp.longest()
            if seg is not None and (top is None or seg["dur_us"] > top["dur_us"]):
                top = {"name": seg["name"], "cause": seg["cause"], "dur_us": seg["dur_us"]}
        ranks = [cp.rank for cp in parts if cp.rank is not None]
        rows.append({"worker": worker, "rank": ranks[0] if ranks else i, "wall_us": wall, "path_us": path,
                     "steps": steps, "causes": causes, "top": top})
    return rows


def compare(items: Sequence[Tuple[str, Sequence[CriticalPath]]]) -> Dict[str, Any]:
    """The /critical_path/ranks answer: `ranks`, `longest` (a worker, None without ranks) and `why`."""
    rows = rank_rows(items)
    if not rows:
        return {"ranks": [], "longest": None, "why": "no analysed rank"}
    paths = np.array([r["path_us"] for r in rows])
    longest = rows[int(np.argmax(paths))]
    return {"ranks": rows, "longest": longest["worker"], "why": explain(rows, longest)}


def explain(rows: List[Dict[str, Any]], longest: Dict[str, Any]) -> str:
    """One paragraph: the longest path, what it is made of, how it differs from the median rank, the straggler."""
    name = f"{longest['worker']} (rank {longest['rank']})"
    path, wall = longest["path_us"], longest["wall_us"]
    lead = max(CAUSES, key=lambda c: longest["causes"][c])
    share = longest["causes"][lead] / wall if wall > 0 else 0.0
    text = (f"{name} has the longest critical path: {path / _MS:.2f} ms of {wall / _MS:.2f} ms, "
            f"{share:.0%} {lead.replace('_', ' ')}.")
    if len(rows) > 1:
        median = {c: float(np.median([r["causes"][c] for r in rows])) for c in CAUSES}
        median_path = float(np.median([r["path_us"] for r in rows]))
        delta = {c: longest["causes"][c] - median[c] for c in CAUSES if c != "idle"}
        most = max(delta, key=lambda c: delta[c])
        text += (f" That is {(path - median_path) / _MS:+.2f} ms against the median rank"
                 + (f", mostly {most.replace('_', ' ')} ({delta[most] / _MS:+.2f} ms)." if delta[most] > 0 else "."))
    if longest["top"]:
        top = longest["top"]
        text += f" Its longest segment: {top['name'][:120]} ({top['cause']}, {top['dur_us'] / _MS:.2f} ms)."
    return text + (_straggler(rows) if len(rows) > 1 else "")


def _straggler(rows: List[Dict[str, Any]]) -> str:
    comm = [r["causes"]["communication"] for r in rows]
    if max(comm) <= 0:
        return ""
    least = rows[int(np.argmin(comm))]
    return (f" {least['worker']} (rank {least['rank']}) spends the least time in communication "
            f"({least['causes']['communication'] / _MS:.2f} ms against up to {max(comm) / _MS:.2f} ms): the other "
            "ranks wait for it in collectives.")


def ranks_frame(answer: Dict[str, Any]):
    """A `compare` answer as a DataFrame (causes and the longest segment flattened into columns), with
    `attrs["longest"]` and `attrs["why"]`."""
    import pandas as pd

    rows = [{"worker": r["worker"], "rank": r["rank"], "wall_us": r["wall_us"], "path_us": r["path_us"],
             "steps": r["steps"], **{f"{c}_us": r["causes"][c] for c in CAUSES},
             **{f"top_{k}": (r["top"] or {}).get(k) for k in ("name", "cause", "dur_us")}} for r in answer["ranks"]]
    frame = pd.DataFrame(rows)
    frame.attrs.update(longest=answer["longest"], why=answer["why"])
    return frame
