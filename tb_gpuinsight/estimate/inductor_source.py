"""Bytes of an Inductor Triton kernel from the source Inductor generated for it, where that file can be found.

A Triton kernel's launch op records the file Inductor wrote it to (``kernel_file``, named ``<kernel_hash>.py`` in
Inductor's cache). When that file is at hand, it decides what the trace cannot:

* the argument roles by name (``in_out_ptr*`` read and written, ``in_ptr*`` read, ``out_ptr*`` written), so an
  epilogue updating a GEMM's output in place is counted read + write without guessing from the order;
* the slices: every ``tl.load`` / ``tl.store`` names its pointer and index expression, so a buffer larger than the
  iteration space is read once per distinct index expression (a slice, a strided or gathered read), not in full.

The figure is Inductor's own ``kernel_num_gb`` rule (``SIMDKernel.estimate_kernel_num_bytes``): per buffer, its
size when it is no larger than the iteration space, else the number of distinct index expressions times the
iteration space; twice for an in-place buffer. A source compiled with ``benchmark_kernel`` carries the figures in
its ``inductor_meta``; those win. The file is parsed as text (``ast``), never imported or run.

Where the file is looked for (only a file named ``<kernel_hash>.py``, hash of letters and digits): beside the
trace only (its folder, one folder down, or an Inductor cache copied there, ``<cache>/<hash[1:3]>/<hash>.py``, as
``tb_gpuinsight.profile`` keeps them). Never at the path the trace recorded: a trace names any path it likes, and
the same trace must give the same figures on every machine that reads it.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .args import OpArgs, numel
from .dtypes import itemsize

_HASH = re.compile(r"^[a-z0-9]{16,80}$")
_BUFFER = re.compile(r"^(in_out_ptr|in_ptr|out_ptr)\d+$")
_NUMEL = re.compile(r"^[xyzr]\d*_?numel$")
_SIZE = re.compile(r"^ks\d+$")  # a dynamic size the index expressions use
MAX_SOURCE_BYTES = 4 << 20  # a generated kernel is a few KB; anything larger is not one


@dataclass(frozen=True)
class KernelSource:
    """What the bytes need from one generated kernel: its launch arguments in order, the distinct index
    expressions each buffer is accessed with, and Inductor's own figures when it recorded them."""

    path: str
    args: Tuple[str, ...]  # the launch arguments (constexprs excluded), in the order the trace records them
    indices: Dict[str, Set[str]] = field(default_factory=dict)
    numels: Dict[str, int] = field(default_factory=dict)  # xnumel etc. fixed in the body (static shapes)
    num_gb: Optional[float] = None
    flop: Optional[float] = None

    @property
    def buffers(self) -> List[Tuple[int, str]]:
        """(position among the launch arguments, name) of every buffer."""
        return [(i, a) for i, a in enumerate(self.args) if _BUFFER.match(a)]


def candidates(kernel_file: str, trace_path: Optional[str]) -> List[Path]:
    """Where the source of `kernel_file` may be, in order (see the module docstring); [] for a name that is no
    Inductor kernel file."""
    stem = Path(kernel_file).stem if kernel_file.endswith(".py") else ""
    if not _HASH.match(stem):
        return []
    name, out = f"{stem}.py", []
    if trace_path:
        here = Path(trace_path).parent
        out += [here / name, *sorted(here.glob(f"*/{name}")), *sorted(here.glob(f"*/{stem[1:3]}/{name}"))]
    return out


def find_source(kernel_file: str, trace_path: Optional[str]) -> Optional[KernelSource]:
    """The parsed source of a Triton kernel's `kernel_file`, or None when no readable Inductor kernel is found."""
    for path in candidates(kernel_file, trace_path):
        try:
            stat = path.stat()
        except OSError:
            continue
        if path.is_file() and stat.st_size <= MAX_SOURCE_BYTES:
            parsed = _parse_file(str(path), stat.st_mtime_ns, stat.st_size)
            if parsed is not None:
                return parsed
    return None


@lru_cache(maxsize=512)
def _parse_file(path: str, _mtime: int, _size: int) -> Optional[KernelSource]:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_source(text, path)


def parse_source(text: str, path: str = "") -> Optional[KernelSource]:
    """The kernel of an Inductor-generated Triton file: the ``@triton.jit`` function, its launch arguments and
    index expressions, and the ``kernel_num_gb`` / ``kernel_flop`` of its ``inductor_meta`` if recorded."""
    tree = _tree(text)
    if tree is None:
        return None
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and any(_is_jit(d) for d in n.decorator_list)]
    if len(kernels) != 1:
        return None
    fn = kernels[0]
    params = fn.args.args
    args = tuple(a.arg for a in params if not _constexpr(a))
    meta = _inductor_meta(fn)
    return KernelSource(path, args, _accesses(fn, {a for a in args if _BUFFER.match(a)}), _fixed_numels(fn),
                        _number(meta.get("kernel_num_gb")), _number(meta.get("kernel_flop")))


def _tree(text: str) -> Optional[ast.Module]:
    """The file's syntax tree, or that of its kernel alone: a file written with ``benchmark_kernel`` splices its
    benchmark harness in with an indentation Python does not accept, around a kernel that is well formed."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        pass
    lines = text.splitlines()
    jit = next((i for i, line in enumerate(lines) if line.startswith("@triton.jit")), None)
    if jit is None:
        return None
    start = next((i for i in range(jit - 1, -1, -1) if lines[i].startswith("@")), jit)
    end = next((i for i in range(jit + 2, len(lines)) if lines[i][:1] not in ("", " ", "\t")), len(lines))
    try:
        return ast.parse("\n".join(lines[start:end]))
    except (SyntaxError, ValueError):
        return None


def _is_jit(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "jit" or isinstance(node, ast.Name) and node.id == "jit"


def _constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)


def _inductor_meta(fn: ast.FunctionDef) -> Dict[str, object]:
    """The literal entries of ``inductor_meta={...}`` in the kernel's heuristics decorator."""
    for deco in fn.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        for kw in deco.keywords:
            if kw.arg == "inductor_meta" and isinstance(kw.value, ast.Dict):
                out = {}
                for key, value in zip(kw.value.keys, kw.value.values):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                        out[key.value] = value.value
                return out
    return {}


def _number(value: object) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _accesses(fn: ast.FunctionDef, buffers: Set[str]) -> Dict[str, Set[str]]:
    """buffer -> the distinct index expressions it is loaded from or stored to (``tl.load(ptr + (index), ...)``,
    ``tl.store``, ``tl.atomic_*``, ``tl.make_block_ptr(ptr, ...)``); a use in another form counts as one more."""
    found: Dict[str, Set[str]] = {b: set() for b in buffers}
    seen: Set[int] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        callee = ast.unparse(node.func)
        target = node.args[0]
        if callee.endswith("make_block_ptr"):
            base = next((kw.value for kw in node.keywords if kw.arg == "base"), target)
            if isinstance(base, ast.Name) and base.id in found:
                found[base.id].add("block:" + ast.unparse(node))
                seen.add(id(base))
            continue
        if not re.search(r"(^|\.)(load|store|atomic_\w+)$", callee):
            continue
        if isinstance(target, ast.Name) and target.id in found:
            found[target.id].add("0")
            seen.add(id(target))
        elif isinstance(target, ast.BinOp) and isinstance(target.op, ast.Add) and isinstance(target.left, ast.Name) \
                and target.left.id in found:
            found[target.left.id].add(ast.unparse(target.right))
            seen.add(id(target.left))
    for node in ast.walk(fn):  # any other use (passed on, offset in another way): one more access, as Inductor's
        if isinstance(node, ast.Name) and node.id in found and id(node) not in seen and isinstance(node.ctx, ast.Load):
            found[node.id].add(f"other:{node.lineno}:{node.col_offset}")
    return found


def _fixed_numels(fn: ast.FunctionDef) -> Dict[str, int]:
    """``xnumel = 16384`` and the like, set at the top of a kernel compiled for static shapes."""
    out = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and _NUMEL.match(stmt.targets[0].id) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, int):
            out[stmt.targets[0].id] = stmt.value.value
    return out


def source_bytes(src: KernelSource, tensors: Sequence[Optional[Tuple[int, int]]],
                 scalars: Sequence[Optional[int]]) -> Optional[Tuple[float, str]]:
    """Bytes the kernel moves and how they were found, from its launch: `tensors[i]` the (elements, bytes per
    element) of launch argument i when it is a buffer, `scalars[i]` its value when it is an integer. None when
    the launch does not match the source (another argument count, a buffer that is no tensor, no iteration
    space)."""
    if src.num_gb is not None:
        return src.num_gb * 1e9, "Inductor's kernel_num_gb, in the kernel's source"
    if len(tensors) != len(src.args) or len(scalars) != len(src.args):
        return None
    if any(not (_BUFFER.match(a) or _NUMEL.match(a) or _SIZE.match(a)) for a in src.args):
        return None  # a template's or workspace's argument (arg_A, ws_ptr): not the layout Inductor's rule reads
    space = 1
    numels = [(i, a) for i, a in enumerate(src.args) if _NUMEL.match(a)]
    if not numels:
        return None
    for i, name in numels:
        value = src.numels.get(name, scalars[i])
        if not isinstance(value, int) or value <= 0:
            return None
        space *= value
    total, sliced = 0.0, []
    for i, name in src.buffers:
        if tensors[i] is None:
            return None
        elements, itemsize = tensors[i]
        accesses = len(src.indices.get(name, ()))
        if not accesses:
            continue  # never read nor written (Inductor counts it 0 as well)
        if elements > space:
            sliced.append(f"{name}: {accesses} x {space}")
            elements = accesses * space
        total += elements * itemsize * (2 if name.startswith("in_out_ptr") else 1)
    roles = ", ".join(name for _, name in src.buffers)
    note = f"Inductor source: roles ({roles}) and index expressions"
    if sliced:
        note += f"; larger buffers read per distinct index ({'; '.join(sliced)} elements)"
    return total, note


def launch_bytes(src: KernelSource, dims: object, types: object, concrete: object) -> Optional[Tuple[float, str]]:
    """`source_bytes` of one launch op from its recorded ``Input Dims`` / ``Input type`` / ``Concrete Inputs``."""
    args = OpArgs(dims, types, concrete)
    tensors: List[Optional[Tuple[int, int]]] = []
    scalars: List[Optional[int]] = []
    for i in range(len(args)):
        size = itemsize(args.type_at(i) or "") if args.is_tensor(i) else None
        tensors.append((numel(tuple(args.dims[i])), size) if size else None)
        value = None if args.is_tensor(i) else args.opt_value(i)
        scalars.append(value if isinstance(value, int) and not isinstance(value, bool) else None)
    return source_bytes(src, tensors, scalars)
