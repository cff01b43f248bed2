"""PyTorch Execution Trace (Chakra host trace) reader: schemas 1.0.1, 1.0.2, 1.0.3-chakra, 1.1.0 and 1.1.1.

Two node layouts exist (see ../shared/notes/trace-formats.md):
- 1.0.1: flat nodes with `parent`, `rf_id`, `seq_id`... and `inputs` / `input_shapes` / `input_types` lists;
- 1.0.2 and later: `ctrl_deps` (the parent), `inputs` / `outputs` objects {values, shapes, types[, strides]} and
  the per-node fields in an `attrs` list of {name, type, value}.
Both are decoded by one msgspec schema and normalised into numpy columns (one row per node, in id order) plus the
per-node argument lists, which the graph and the details panel use.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import msgspec
import numpy as np

from ..errors import TraceError
from ..gcpause import gc_paused
from .header import decode_header_value
from .repair import FieldLog, StructRepairer
from .source import read_all

SUPPORTED_SCHEMAS = ("1.0.1", "1.0.2", "1.0.3", "1.1.0", "1.1.1")
ROOT_PREFIXES = ("[pytorch|profiler|execution_graph|", "[pytorch|profiler|execution_trace|")
# Per-node integer fields: 1.0.1 has them on the node, later schemas in `attrs`.
INT_FIELDS = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid")
_MISSING = -1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _Args(msgspec.Struct):
    values: List[Any] = []
    shapes: List[Any] = []
    types: List[Any] = []
    strides: Optional[List[Any]] = None


class _Attr(msgspec.Struct):
    name: str
    value: Any = None


class _Node(msgspec.Struct):
    id: int
    name: str = ""
    parent: Optional[int] = None
    ctrl_deps: Union[int, List[int], None] = None
    rf_id: Optional[int] = None
    fw_parent: Optional[int] = None
    seq_id: Optional[int] = None
    scope: Optional[int] = None
    tid: Optional[int] = None
    fw_tid: Optional[int] = None
    op_schema: Optional[str] = None
    inputs: Union[_Args, List[Any], None] = None
    outputs: Union[_Args, List[Any], None] = None
    input_shapes: Optional[List[Any]] = None
    input_types: Optional[List[Any]] = None
    output_shapes: Optional[List[Any]] = None
    output_types: Optional[List[Any]] = None
    attrs: List[_Attr] = []


class _Top(msgspec.Struct):
    """Top-level keys stay raw until read one by one (decode_header_value): a bad one spoils only itself."""
    schema: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    pid: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    time: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    start_ts: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    finish_ts: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    nodes: Optional[List[msgspec.Raw]] = None  # decoded by _nodes: a bad value spoils only its own field


@dataclass
class Args:
    """A node's inputs or outputs: values (tensors as [id, storage, offset, numel, itemsize, device]), shapes,
    types and, from schema 1.1.1, strides."""
    values: List[Any]
    shapes: List[Any]
    types: List[str]
    strides: Optional[List[Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        out = {"values": self.values, "shapes": self.shapes, "types": self.types}
        if self.strides is not None:
            out["strides"] = self.strides
        return out


@dataclass
class ExecutionTrace:
    """One Execution Trace: node columns in id order (`row_of` maps an ET id to its row)."""
    path: str
    schema: str
    pid: Optional[int]
    start_ts: Optional[int]
    finish_ts: Optional[int]
    ids: np.ndarray
    names: List[str]
    parent: np.ndarray  # row of the parent node, -1 for roots
    cols: Dict[str, np.ndarray]  # INT_FIELDS, -1 where absent
    op_schema: List[str]
    inputs: List[Args]
    outputs: List[Args]
    attrs: List[Dict[str, Any]]  # attrs other than the standard fields (collectives, kernel_backend...)
    row_of: Dict[int, int] = field(default_factory=dict)
    dropped_nodes: int = 0  # nodes left out: no object, or no usable id (absent, not an int64)
    # "field: how" -> count, as KinetoTrace.meta's: values read after a conversion, and values left out.
    coerced_fields: Dict[str, int] = field(default_factory=dict)
    dropped_fields: Dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def is_root(self, row: int) -> bool:
        """The profiler's own process / thread nodes, which no Kineto event matches."""
        return self.names[row].startswith(ROOT_PREFIXES)

    def node(self, row: int) -> Dict[str, Any]:
        """Everything the trace says about one node, JSON-ready."""
        parent = int(self.parent[row])
        return {"id": int(self.ids[row]), "name": self.names[row],
                "parent": int(self.ids[parent]) if parent >= 0 else None,
                **{k: int(self.cols[k][row]) for k in INT_FIELDS},
                "op_schema": self.op_schema[row], "inputs": self.inputs[row].to_dict(),
                "outputs": self.outputs[row].to_dict(), "attrs": self.attrs[row]}


def schema_supported(schema: str) -> bool:
    """True for the schema versions this reader knows (any `-chakra.x` suffix)."""
    return any(schema == s or schema.startswith(s + "-") or schema.startswith(s + ".") for s in SUPPORTED_SCHEMAS)


def load_et(path: "os.PathLike[str] | str") -> ExecutionTrace:
    """Read an Execution Trace (`.json` or `.json.gz`); raises TraceError with a one-line reason."""
    path = os.fspath(path)
    content = read_all(path)
    try:
        try:
            top = msgspec.json.decode(content.view(), type=_Top)
        except UnicodeDecodeError:  # invalid UTF-8 (a cut-off name, say) becomes U+FFFD rather than a failure
            text = bytes(content.view()).decode("utf-8", "replace").encode("utf-8")
            top = msgspec.json.decode(text, type=_Top)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"not a valid Execution Trace: {_one_line(exc)}") from None
    except msgspec.DecodeError as exc:
        reason = "truncated JSON" if "truncated" in str(exc) else f"malformed JSON: {_one_line(exc)}"
        raise TraceError(path, reason) from None
    except RecursionError:
        raise TraceError(path, "not a valid Execution Trace: nesting too deep") from None
    except MemoryError:
        raise TraceError(path, "out of memory while reading the Execution Trace") from None
    if top.nodes is None:
        raise TraceError(path, "not an Execution Trace (no 'nodes' list)")
    log = FieldLog()
    for key in ("schema", "pid", "time", "start_ts", "finish_ts"):
        setattr(top, key, decode_header_value(getattr(top, key), key, log))
    schema = top.schema if isinstance(top.schema, str) else ""
    if not schema_supported(schema):
        raise TraceError(path, f"unsupported Execution Trace schema {str(top.schema)[:60]!r} "
                               f"(supported: {', '.join(SUPPORTED_SCHEMAS)})")
    with gc_paused():  # a big ET is millions of new lists: see gcpause.py
        nodes = _nodes(top.nodes, log)
        if top.nodes and not nodes:
            raise TraceError(path, f"not a valid Execution Trace: none of its {len(top.nodes):,} nodes is an "
                                   "object with an id")
        return _build(path, schema, top, nodes, len(top.nodes) - len(nodes), log)


def _nodes(raws: List[msgspec.Raw], log: FieldLog) -> List[_Node]:
    """The nodes: all at once when they fit the schema, else one by one and field by field (repair.py); a node
    that is no object or has no id is left out."""
    try:
        return msgspec.json.decode(b"[" + b",".join(raws) + b"]", type=List[_Node])
    except (msgspec.ValidationError, UnicodeDecodeError):
        pass
    repairer = StructRepairer(_Node, log, "node")
    return [n for n in map(repairer.decode, raws) if n is not None]


def _int(value: Any) -> Optional[int]:
    """An integer that fits int64; anything else (absent, text, out of range) is None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX
    return value if ok else None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


def _build(path: str, schema: str, top: _Top, nodes: List[_Node], dropped: int, log: FieldLog) -> ExecutionTrace:
    count = len(nodes)
    nodes = sorted((n for n in nodes if _int(n.id) is not None), key=lambda n: n.id)  # ids beyond int64: dropped
    dropped += count - len(nodes)
    id_list = [n.id for n in nodes]
    row_of = {i: r for r, i in enumerate(id_list)}
    if len(row_of) != len(nodes):
        raise TraceError(path, "not a valid Execution Trace: node ids repeat")
    # Column by column over plain lists (a per-cell numpy store costs ~1 us each, 10^6 of them on a big ET).
    ints = {k: [getattr(n, k) for n in nodes] for k in INT_FIELDS}
    schemas = [n.op_schema for n in nodes]
    extras: List[Dict[str, Any]] = [{} for _ in nodes]
    for row, n in enumerate(nodes):
        if n.attrs:  # schema 1.0.2 on: the standard fields travel in attrs
            _from_attrs(n.attrs, row, ints, schemas, extras[row])
    cols = {k: np.array([v if type(v) is int and _INT64_MIN <= v <= _INT64_MAX else _MISSING  # noqa: E721 (_int)
                         for v in values], dtype=np.int64) for k, values in ints.items()}
    parent = [row_of.get(_parent_id(n), -1) for n in nodes]
    parent = [-1 if up == row else up for row, up in enumerate(parent)]  # the process node names itself
    _break_cycles(parent)
    return ExecutionTrace(path, schema, _int(top.pid), _int(top.start_ts), _int(top.finish_ts),
                          np.array(id_list, dtype=np.int64), [n.name for n in nodes],
                          np.array(parent, dtype=np.int64), cols, [s or "" for s in schemas],
                          [_args(n.inputs, n.input_shapes, n.input_types) for n in nodes],
                          [_args(n.outputs, n.output_shapes, n.output_types) for n in nodes], extras, row_of,
                          dropped, dict(log.coerced.most_common()), dict(log.dropped.most_common()))


def _break_cycles(parent: List[int]) -> None:
    """Make the parent links a forest: a node whose ancestors loop back is cut loose (becomes a root). Each node
    is walked once (linear in nodes, however deep the chains)."""
    state = bytearray(len(parent))  # 0 unseen, 1 on the current walk, 2 known good
    for start in range(len(parent)):
        if state[start]:
            continue
        walk = []
        row = start
        while row >= 0 and state[row] == 0:
            state[row] = 1
            walk.append(row)
            row = parent[row]
        if row >= 0 and state[row] == 1:  # the walk came back to itself
            parent[walk[-1]] = -1
        for r in walk:
            state[r] = 2


def _from_attrs(attrs: List[_Attr], row: int, ints: Dict[str, List[Any]], schemas: List[Any],
                extra: Dict[str, Any]) -> None:
    """One node's attrs: the standard fields into their columns, the remaining (non-empty) ones into `extra`."""
    for a in attrs:
        if a.name in ints:
            ints[a.name][row] = a.value
        elif a.name == "op_schema":
            schemas[row] = a.value
        elif a.value not in ("", None):
            extra[a.name] = a.value


def _parent_id(n: _Node) -> Optional[int]:
    if n.parent is not None:
        return n.parent
    deps = n.ctrl_deps
    if isinstance(deps, list):  # some Chakra writers list the control dependencies
        return deps[0] if deps else None
    return deps


def _args(value: Union[_Args, List[Any], None], shapes: Optional[List[Any]], types: Optional[List[Any]]) -> Args:
    if isinstance(value, _Args):
        return Args(value.values, value.shapes, [str(t) for t in value.types], value.strides)
    return Args(value or [], shapes or [], [str(t) for t in types or []])


def tensor_keys(args: Args) -> List[Tuple[int, int]]:
    """(tensor id, storage id) of every tensor among the args, lists of tensors included."""
    out: List[Tuple[int, int]] = []
    for typ, value in zip(args.types, args.values):
        if "Tensor" in typ:
            _collect_tensors(value, out)
    return out


def _collect_tensors(value: Any, out: List[Tuple[int, int]]) -> None:
    """Tensors of a (possibly nested) value, depth first, without recursion (nesting can be arbitrarily deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if not isinstance(item, list) or not item:
            continue
        if len(item) >= 5 and _int(item[0]) is not None and _int(item[1]) is not None:
            out.append((item[0], item[1]))
            continue
        stack.extend(reversed(item))


def shape_text(args: Args, limit: int = 4) -> str:
    """A short text of the first shapes, e.g. "[32, 64], [64]" (used in node labels)."""
    shown: Sequence[Any] = [s for s, t in zip(args.shapes, args.types) if "Tensor" in t][:limit]
    return ", ".join(str(s) for s in shown)
