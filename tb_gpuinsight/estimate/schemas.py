"""What the estimates need of op schemas: the most arguments an aten op takes (a longer record is corrupted), which
positions are ``out=`` tensors for a given argument count, and which arguments an op outside aten mutates.

Reading a schema from torch means importing torch: about a second and 150 MB, more than analysing a mid-size trace.
So the answers for every op torch's dispatcher registers are shipped in ``op_schemas.json``, written from torch by
``python -m tb_gpuinsight.estimate.schemas`` (a test checks it against the installed torch). Under the torch release
the table was written from, the table is the whole answer. Under another release, torch is asked, lazily, only what
the table may not know: an aten op it lacks (added since), or a record longer than the table's schema (an argument
added since); without torch the table's answer stands. A namespace torch does not register (``vllm::``, ``_C::``)
is unknown to torch too unless its library is imported, which the estimates never do: it is answered "unknown"
without torch. Where torch is already imported (the API called from a training script), asking it costs nothing and
the caller's libraries may have registered their ops, so it is asked.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Dict, FrozenSet, Optional

from .lazy_torch import installed_torch_version, torch_module

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_schemas.json")
_EMPTY: Dict[str, Any] = {"torch": None, "aten": {}, "mutated": {}, "namespaces": []}


@functools.lru_cache(maxsize=1)
def table() -> Dict[str, Any]:
    """The shipped table; an unreadable or malformed file is an empty table (every answer then comes from torch)."""
    try:
        with open(TABLE_PATH, "rb") as f:
            data = json.loads(f.read())
        if not (isinstance(data.get("aten"), dict) and isinstance(data.get("mutated"), dict)
                and isinstance(data.get("namespaces"), list)):
            return _EMPTY
        return data
    except (OSError, ValueError, AttributeError):
        return _EMPTY


@functools.lru_cache(maxsize=1)
def table_is_installed_torch() -> bool:
    """Whether the installed torch is the release the table was written from (a build tag like ``+cpu`` aside)."""
    written = table()["torch"]
    return isinstance(written, str) and written.split("+")[0] == installed_torch_version().split("+")[0]


def _ask_torch() -> bool:
    """Whether torch may know more than the table: another release, or already imported here (it costs nothing
    then, and a library imported beside it, the API's caller's own, may have registered its ops)."""
    return "torch" in sys.modules or not table_is_installed_torch()


def _aten_entry(op: str) -> Optional[list]:
    entry = table()["aten"].get(op)
    return entry if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) else None


@functools.lru_cache(maxsize=4096)
def arg_limit(op: str, nargs: int) -> Optional[int]:
    """Most arguments any overload of ``aten::<op>`` takes, for a record of ``nargs`` arguments (None: unknown).

    Kineto records every schema argument, keyword-only ones included, so a longer ``Input Dims`` means a corrupted
    record (some 2022 traces append other ops' shapes). A record longer than the table's limit asks torch, whose
    schema may be newer; without torch the table's limit stands."""
    entry = _aten_entry(op)
    if entry is not None and nargs <= entry[0]:
        return entry[0]
    found = torch_arg_limit(op) if _ask_torch() else None
    return found if found is not None else (entry[0] if entry is not None else None)


@functools.lru_cache(maxsize=4096)
def out_positions(op: str, nargs: int) -> FrozenSet[int]:
    """Positions of ``out=`` tensors when ``nargs`` recorded arguments select an out overload of ``aten::<op>``.

    Kineto names ``aten::mul.out`` just ``aten::mul``; the overload is the one whose schema has ``nargs``
    arguments. Empty when no overload of that length has one, or the overloads of that length disagree."""
    entry = _aten_entry(op)
    if entry is not None and (nargs <= entry[0] or not _ask_torch()):
        return frozenset(entry[1].get(str(nargs), ()))
    return torch_out_positions(op, nargs) if _ask_torch() else frozenset()


@functools.lru_cache(maxsize=1024)
def mutated(op: str) -> Optional[FrozenSet[int]]:
    """Indices of the arguments ``ns::name`` writes to per its schema, or None when its schema is unknown."""
    found = table()["mutated"].get(op.split(".", 1)[0])
    if isinstance(found, list):
        return frozenset(found)
    if "torch" in sys.modules or (op.split("::", 1)[0] in table()["namespaces"] and _ask_torch()):
        return torch_mutated(op)
    return None  # a library's own namespace: torch knows it only once that library is imported, here it is not


# --------------------------------------------------------------------------- torch's answers

def _is_aten_name(op: str) -> bool:
    return bool(op) and "::" not in op and op.replace("_", "").isalnum()


def torch_arg_limit(op: str) -> Optional[int]:
    """:func:`arg_limit` from torch's own schemas (imports torch)."""
    if not _is_aten_name(op):
        return None
    try:
        packet = getattr(torch_module().ops.aten, op)
        return max(len(getattr(packet, o)._schema.arguments) for o in packet.overloads())
    except Exception:
        return None


def torch_out_positions(op: str, nargs: int) -> FrozenSet[int]:
    """:func:`out_positions` from torch's own schemas (imports torch)."""
    if not _is_aten_name(op):
        return frozenset()
    try:
        packet = getattr(torch_module().ops.aten, op)
        found = set()
        for name in packet.overloads():
            schema = getattr(packet, name)._schema
            if len(schema.arguments) == nargs:
                found.add(frozenset(i for i, a in enumerate(schema.arguments)
                                    if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write))
        return found.pop() if len(found) == 1 else frozenset()
    except Exception:
        return frozenset()


def torch_mutated(op: str) -> Optional[FrozenSet[int]]:
    """:func:`mutated` from torch's own schemas (imports torch); its first overload speaks for the op."""
    try:
        namespace, name = op.split("::", 1)
        packet = getattr(getattr(torch_module().ops, namespace), name.split(".", 1)[0])
        schema = getattr(packet, packet.overloads()[0])._schema
        return frozenset(i for i, a in enumerate(schema.arguments)
                         if a.alias_info is not None and a.alias_info.is_write)
    except Exception:
        return None


def build_table() -> Dict[str, Any]:
    """The table from the installed torch: every op its dispatcher registers, answered by the functions above."""
    torch = torch_module()
    if torch is None:
        raise RuntimeError("torch is not installed: the schema table is written from torch's dispatcher")
    names = sorted({n.split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()})
    aten: Dict[str, list] = {}
    mutated_args: Dict[str, list] = {}
    for qualified in names:
        namespace, op = qualified.split("::", 1)
        if namespace == "aten":
            limit = torch_arg_limit(op)
            if limit is not None:
                outs = {str(n): sorted(torch_out_positions(op, n)) for n in range(limit + 1)}
                aten[op] = [limit, {n: p for n, p in outs.items() if p}]
        else:
            found = torch_mutated(qualified)
            if found is not None:
                mutated_args[qualified] = sorted(found)
    return {"torch": torch.__version__, "aten": aten, "mutated": mutated_args,
            "namespaces": sorted({n.split("::", 1)[0] for n in names})}


def main() -> None:
    """Write the table from the installed torch (run after changing torch's pin)."""
    data = build_table()
    tmp = TABLE_PATH + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    os.replace(tmp, TABLE_PATH)
    sys.stdout.write(f"{TABLE_PATH}: {len(data['aten'])} aten ops, {len(data['mutated'])} others, "
                     f"torch {data['torch']}\n")


if __name__ == "__main__":
    main()
