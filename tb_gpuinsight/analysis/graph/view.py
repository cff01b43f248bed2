"""What the Execution graph tab draws: a collapsed cut of the display tree and its aggregated edges. The browser
lays the cut out (in rows of program order, or layered by dagre, through Cytoscape) with every opened node drawn
as a compound box around its children, so a view stays small (DEFAULT_VISIBLE first, MAX_VISIBLE at most).

Display tree: the ET control tree, with two changes that keep it readable.
- Backward folding: the autograd wrapper of a backward node moves under the module or range that ran its forward
  op (else under `fw_parent`), so a module's backward sits next to its forward.
- Chunking: a node with more than MAX_CHILDREN children gets them in consecutive runs ("group" nodes), nested
  as deep as needed; the 16k top-level ops of an un-annotated step become a few levels of groups.
A view is the set of expanded display nodes; every other node stands for its whole subtree.
"""
from __future__ import annotations

import collections
import heapq

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ...trace.et import shape_text
from .build import ExecutionGraph
from .fold import group_label
MAX_CHILDREN = 24
MAX_VISIBLE = 600
# The first view: enough nodes to show the step's structure, few enough that the whole cut fits a 1280x720 window
# with readable labels (the browser wraps it in rows, graphLayout.ts).
DEFAULT_VISIBLE = 32
# The "depth" collapse mode opens every node up to a depth while the view stays under this.
DEPTH_VISIBLE = 160
_WRAPPER = "autograd::engine::evaluate_function"


@dataclass
class Tree:
    """Display nodes: ET rows first, then group nodes. `first`/`last` are a group's first and last ET rows."""
    parent: List[int]
    children: List[List[int]]
    roots: List[int]
    n_rows: int
    labels: Dict[int, str]
    size: np.ndarray  # ET nodes in each display subtree
    order: np.ndarray  # each display node's first ET row (program order of a subtree)

    def is_group(self, node: int) -> bool:
        return node >= self.n_rows


def build_tree(graph: ExecutionGraph) -> Tree:
    """The display tree (see the module docstring)."""
    et = graph.et
    parent = [int(p) for p in et.parent.tolist()]
    _fold_backward(graph, parent)
    children: List[List[int]] = [[] for _ in range(len(parent))]
    roots: List[int] = []
    for row, up in enumerate(parent):
        (children[up] if up >= 0 else roots).append(row)
    tree = Tree(parent, children, roots, len(et), {}, np.zeros(0), np.zeros(0))
    for node in list(range(len(et))):
        if len(children[node]) > MAX_CHILDREN:
            children[node] = _chunk(tree, node, children[node])
    if len(roots) > MAX_CHILDREN:
        tree.roots = _chunk(tree, -1, roots)
    _measure(tree)
    for node, label in list(tree.labels.items()):
        tree.labels[node] = _group_label(tree, node, et.names)
    return tree


def _fold_backward(graph: ExecutionGraph, parent: List[int]) -> None:
    et = graph.et
    for row in np.flatnonzero(graph.forward >= 0).tolist():
        top = parent[row] if parent[row] >= 0 and et.names[parent[row]].startswith(_WRAPPER) else row
        target = forward_container(graph, row)
        if target >= 0 and not _is_under(parent, target, top):
            parent[top] = target


def forward_container(graph: ExecutionGraph, row: int) -> int:
    """Where a backward node folds: the innermost non-op ancestor of its forward op (the module or range that ran
    it), else the node its `fw_parent` names."""
    et = graph.et
    up = int(et.parent[graph.forward[row]])
    while up >= 0 and graph.is_op[up]:
        up = int(et.parent[up])
    return up if up >= 0 else et.row_of.get(int(et.cols["fw_parent"][row]), -1)


def _is_under(parent: List[int], node: int, ancestor: int) -> bool:
    for _ in range(len(parent)):
        if node < 0:
            return False
        if node == ancestor:
            return True
        node = parent[node]
    return True  # a loop: refuse the move


def _chunk(tree: Tree, owner: int, kids: List[int]) -> List[int]:
    """Wrap `kids` (in order) into at most MAX_CHILDREN consecutive runs, recursively; returns the new children."""
    kids = sorted(kids)
    if len(kids) <= MAX_CHILDREN:
        return kids
    per = -(-len(kids) // MAX_CHILDREN)
    out = []
    for start in range(0, len(kids), per):
        run = kids[start:start + per]
        if len(run) == 1:
            out.append(run[0])
            continue
        group = len(tree.parent)
        tree.parent.append(owner)
        tree.children.append([])
        tree.labels[group] = ""
        for kid in run:
            tree.parent[kid] = group
        tree.children[group] = _chunk(tree, group, run)
        out.append(group)
    return out


def _measure(tree: Tree) -> None:
    n = len(tree.parent)
    tree.size = np.zeros(n, dtype=np.int64)
    tree.order = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    for node in reversed(_preorder(tree)):
        own = 1 if node < tree.n_rows else 0
        kids = tree.children[node]
        tree.size[node] = own + sum(int(tree.size[k]) for k in kids)
        first = node if own else np.iinfo(np.int64).max
        tree.order[node] = min([first] + [int(tree.order[k]) for k in kids])
    for node in range(n):
        tree.children[node].sort(key=lambda k: tree.order[k])


def _preorder(tree: Tree, roots: Optional[Iterable[int]] = None) -> List[int]:
    out, stack = [], list(reversed(list(tree.roots if roots is None else roots)))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(tree.children[node]))
    return out


def _group_label(tree: Tree, group: int, names: Sequence[str]) -> str:
    """The ops of a run (the rows right under it or its nested runs) named by their commonest kinds."""
    units = [k for k in _preorder(tree, tree.children[group]) if k < tree.n_rows and tree.is_group(tree.parent[k])]
    return group_label([names[k] for k in units])


# ------------------------------------------------------------------------------------------------- the cut

def default_expanded(tree: Tree, graph: ExecutionGraph, mode: str = "annotation", depth: int = 3) -> Set[int]:
    """Nodes to expand first. "annotation": containers only (roots, threads, record_function ranges, then groups;
    ops stay folded), the biggest subtree first, while the view holds at most DEFAULT_VISIBLE nodes, so that a
    single-child chain (process > thread > ProfilerStep#5) opens to where the step's structure shows. "depth":
    every node up to `depth`, breadth first, while the view stays under DEPTH_VISIBLE."""
    if mode == "depth":
        return _expand_to_depth(tree, depth)
    expanded: Set[int] = set()
    visible = len(tree.roots)
    heap = [_priority(tree, node) for node in tree.roots]
    heapq.heapify(heap)
    while heap:
        node = heapq.heappop(heap)[-1]
        kids = tree.children[node]
        if kids and not _is_op(tree, graph, node) and visible - 1 + len(kids) <= DEFAULT_VISIBLE:
            expanded.add(node)
            visible += len(kids) - 1
            for kid in kids:
                heapq.heappush(heap, _priority(tree, kid))
    return expanded


def _priority(tree: Tree, node: int) -> Tuple[bool, int, int]:
    """Named containers before chunking groups, then the biggest subtree, then program order."""
    return tree.is_group(node), -int(tree.size[node]), node


def _expand_to_depth(tree: Tree, depth: int) -> Set[int]:
    expanded: Set[int] = set()
    visible = len(tree.roots)
    level, d = list(tree.roots), 0
    while level and d < depth:
        nxt = []
        for node in level:
            kids = tree.children[node]
            if kids and visible - 1 + len(kids) <= DEPTH_VISIBLE:
                expanded.add(node)
                visible += len(kids) - 1
                nxt.extend(kids)
        level, d = nxt, d + 1
    return expanded


def _is_op(tree: Tree, graph: ExecutionGraph, node: int) -> bool:
    return node < tree.n_rows and bool(graph.is_op[node])


def cut(tree: Tree, expanded: Set[int]) -> Tuple[List[int], bool]:
    """The visible nodes (in program order) for an expanded set, capped at MAX_VISIBLE; and whether capped."""
    count, capped = len(tree.roots), False
    queue = collections.deque(tree.roots)
    opened: Set[int] = set()
    while queue:  # breadth first, so that a cap keeps the upper levels open
        node = queue.popleft()
        kids = tree.children[node]
        if node in expanded and kids:
            if count - 1 + len(kids) > MAX_VISIBLE:
                capped = True
            else:
                opened.add(node)
                count += len(kids) - 1
                queue.extend(kids)
    return _visible_walk(tree, opened), capped


def _visible_walk(tree: Tree, opened: Set[int]) -> List[int]:
    out, stack = [], list(reversed(tree.roots))
    while stack:
        node = stack.pop()
        if node in opened:
            stack.extend(reversed(tree.children[node]))
        else:
            out.append(node)
    return out


def representatives(tree: Tree, visible: Sequence[int]) -> np.ndarray:
    """Per ET row, the visible node that stands for it. An opened node (shown as its children) is stood for by
    its first child's representative, so that edges to and from it still show."""
    rep = np.full(len(tree.parent), -1, dtype=np.int64)
    for node in visible:
        rep[_preorder(tree, [node])] = node
    for node in reversed(_preorder(tree)):
        if rep[node] < 0 and tree.children[node]:
            rep[node] = rep[tree.children[node][0]]
    return rep[: tree.n_rows]


# --------------------------------------------------------------------------------------- figures and JSON

@dataclass
class Figures:
    """Per display node, over its subtree: CPU time (a linked node's own inclusive time, else its children's),
    GPU time, FLOPs, kernel count, rated kernel time and efficiency x time, ops on the critical path; and whether
    the node itself is an op of the path (`on_path`: what the graph outlines, not every group that holds one)."""
    cpu_us: np.ndarray
    gpu_us: np.ndarray
    flops: np.ndarray
    kernels: np.ndarray
    rated_us: np.ndarray
    eff_us: np.ndarray
    critical: np.ndarray
    on_path: np.ndarray
    captured_us: Optional[np.ndarray] = None  # of gpu_us: graph-replayed kernels counted through captured ops


def figures(tree: Tree, graph: ExecutionGraph) -> Figures:
    """Subtree totals of every display node (computed once per graph)."""
    n = len(tree.parent)
    captured = graph.kernels.captured_us if graph.kernels.captured_us is not None else np.zeros(tree.n_rows)
    own = {"gpu_us": graph.kernels.gpu_us, "flops": graph.kernels.flops, "rated_us": graph.kernels.rated_us,
           "eff_us": graph.kernels.eff_us, "captured_us": captured}
    summed = ("gpu_us", "flops", "rated_us", "eff_us", "kernels", "critical", "captured_us")
    out = {k: np.zeros(n) for k in ("cpu_us",) + summed}
    kernel_count = np.zeros(tree.n_rows)
    for row, rows in graph.kernels.rows.items():
        kernel_count[row] = len(rows)
    on_path = np.zeros(tree.n_rows)
    on_path[graph.critical_rows()] = 1
    for node in reversed(_preorder(tree)):
        kids = tree.children[node]
        for key in summed:
            mine = 0.0
            if node < tree.n_rows:
                mine = {"kernels": kernel_count, "critical": on_path}.get(key, own.get(key))[node]
            out[key][node] = mine + sum(out[key][k] for k in kids)
        linked = node < tree.n_rows and not np.isnan(graph.cpu_dur[node])
        out["cpu_us"][node] = graph.cpu_dur[node] if linked else sum(out["cpu_us"][k] for k in kids)
    return Figures(**out, on_path=np.r_[on_path, np.zeros(n - tree.n_rows)].astype(bool))


def _kind(tree: Tree, graph: ExecutionGraph, node: int) -> str:
    if tree.is_group(node):
        return "group"
    if graph.et.is_root(node):
        return "root"
    if graph.is_op[node]:
        return "op"
    return "backward" if graph.forward[node] >= 0 or graph.et.names[node].startswith(_WRAPPER) else "annotation"


def label(tree: Tree, graph: ExecutionGraph, node: int) -> str:
    return tree.labels[node] if tree.is_group(node) else graph.et.names[node]


def node_json(tree: Tree, graph: ExecutionGraph, figs: Figures, node: int) -> Dict[str, object]:
    """One display node's summary (what a graph node shows and is coloured by)."""
    rated = figs.rated_us[node]
    up = tree.parent[node]
    return {"id": node, "label": label(tree, graph, node), "kind": _kind(tree, graph, node),
            "et_id": int(graph.et.ids[node]) if node < tree.n_rows else None,
            "parent": up if up >= 0 else None, "expandable": bool(tree.children[node]),
            "size": int(tree.size[node]), "cpu_us": _num(figs.cpu_us[node]), "gpu_us": float(figs.gpu_us[node]),
            "flops": float(figs.flops[node]), "kernels": int(figs.kernels[node]),
            "efficiency": float(figs.eff_us[node] / rated) if rated > 0 else None,
            "critical": bool(figs.on_path[node]), "critical_ops": int(figs.critical[node]),
            "captured_us": float(figs.captured_us[node]) if figs.captured_us is not None else 0.0,
            "source": "graph capture" if figs.captured_us is not None and figs.captured_us[node] > 0 else "",
            "shapes": shape_text(graph.et.inputs[node]) if node < tree.n_rows else ""}


def _num(x: float) -> Optional[float]:
    return None if np.isnan(x) else float(x)


def view_json(tree: Tree, graph: ExecutionGraph, figs: Figures, expanded: Set[int]) -> Dict[str, object]:
    """The visible nodes (in program order), their aggregated data edges, the critical path through them, and the
    opened nodes (each with its parent, for the compound boxes the browser draws)."""
    visible, capped = cut(tree, expanded)
    rep = representatives(tree, visible)
    index = {node: i for i, node in enumerate(visible)}
    counts: Dict[Tuple[int, int], int] = {}
    for p, c in graph.data_edges:
        a, b = index[int(rep[p])], index[int(rep[c])]
        if a != b:
            counts[(a, b)] = counts.get((a, b), 0) + 1
    path = _critical_pairs([index[int(rep[r])] for r in graph.critical_rows()])
    opened = _opened(tree, visible)
    nodes = [node_json(tree, graph, figs, node) for node in visible]
    edges = [{"source": visible[a], "target": visible[b], "count": n, "critical": (a, b) in path}
             for (a, b), n in counts.items()]
    edges += [{"source": visible[a], "target": visible[b], "count": 0, "critical": True}
              for a, b in path if (a, b) not in counts]
    depth = _depths(tree)
    return {"nodes": nodes, "edges": edges, "capped": capped, "max_visible": MAX_VISIBLE,
            "expanded": [{"id": n, "label": label(tree, graph, n), "depth": int(depth[n]),
                          "parent": tree.parent[n] if tree.parent[n] >= 0 else None}
                         for n in _preorder(tree) if n in opened]}


def _depths(tree: Tree) -> np.ndarray:
    """Every display node's number of ancestors, in one pass (linear, whatever the nesting depth)."""
    depth = np.zeros(len(tree.parent), dtype=np.int64)
    for node in _preorder(tree):
        for kid in tree.children[node]:
            depth[kid] = depth[node] + 1
    return depth


def _critical_pairs(reps: Sequence[int]) -> Set[Tuple[int, int]]:
    pairs = set()
    for a, b in zip(reps, reps[1:]):
        if a != b:
            pairs.add((a, b))
    return pairs


def _opened(tree: Tree, visible: Sequence[int]) -> Set[int]:
    opened: Set[int] = set()
    for node in visible:
        up = tree.parent[node]
        while up >= 0 and up not in opened:
            opened.add(up)
            up = tree.parent[up]
    return opened


def ancestors(tree: Tree, node: int) -> List[int]:
    """The display ancestors of a node, nearest first."""
    out, up = [], tree.parent[node]
    while up >= 0 and len(out) < len(tree.parent):
        out.append(up)
        up = tree.parent[up]
    return out


def search(tree: Tree, graph: ExecutionGraph, figs: Figures, query: str, limit: int = 50) -> List[Dict[str, object]]:
    """ET nodes whose name contains `query` (case-insensitive), most GPU time first."""
    q = query.lower()
    rows = [r for r, name in enumerate(graph.et.names) if q in name.lower()]
    rows.sort(key=lambda r: (-figs.gpu_us[r], -(figs.cpu_us[r] if not np.isnan(figs.cpu_us[r]) else 0), r))
    return [{"id": r, "name": graph.et.names[r], "et_id": int(graph.et.ids[r]), "gpu_us": float(figs.gpu_us[r]),
             "path": [label(tree, graph, a) for a in reversed(ancestors(tree, r))][-3:]} for r in rows[:limit]]
