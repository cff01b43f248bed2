"""Kernel names: demangled and short display names, a normalised name for comparing runs, and one kernel class.

Normalising removes what changes between two builds of the same work: C++ template arguments and parameter lists,
return types, anonymous namespaces, and launch-specific suffixes (Triton's `_0`/`_1` instance numbers and argument
divisibility tags such as `0d1d2d`, cuBLAS's `__5x_cublas`-style tails). Classes group kernels by what they do, from
the kernel name and, when known, the op that launched it.
"""
from __future__ import annotations

import functools
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ...estimate.formats import peak_key
from . import itanium

CLASSES = ("GEMM", "attention", "conv", "elementwise", "reduction", "norm", "communication", "memcpy", "memset",
           "other")

_ANON = re.compile(r"\(anonymous namespace\)::")
_RETURN = re.compile(r"^(?:void|__global__ void)\s+")
_TRITON_SUFFIX = re.compile(r"(_\d+d\d*(?:d\d*)*|_\d+)+$")
_CUBLAS_TAIL = re.compile(r"__\d+x_cublas$|_kernel__\d+x_\w+$")
_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=65536)
def normalize(name: str) -> str:
    """The name without parameters, numeric and dtype template arguments, return type, anonymous namespaces and
    launch-specific suffixes. Template arguments that name a type or functor are kept (without their own
    arguments): they are what tells `elementwise_kernel<FillFunctor>` from `elementwise_kernel<AddFunctor>`."""
    text = _RETURN.sub("", _ANON.sub("", name.strip()))
    text = _strip_brackets(text, "(", ")")
    text = _templates(_SPACES.sub(" ", text).strip())
    text = _CUBLAS_TAIL.sub("", text)
    if text.startswith("triton"):
        stripped = _TRITON_SUFFIX.sub("", text)
        text = stripped if stripped.rstrip("_") != "triton" else text
    return text or name


_NOISE_ARG = re.compile(r"^(?:-?[\d.]+[uUlLfF]*|true|false|(?:unsigned |signed |const )*(?:char|short|int|long|long long|"
                        r"float|double|bool|half|at::Half|c10::\w+|__half|__nv_bfloat16|__hip_\w+|std::\w+|_BitInt\(\d+\))\s*[*&]*|"
                        r"[\w:]*Float8\w*|[\w:]*BFloat16|[\w:]*Half|[\w:]*complex)$")


def _templates(text: str) -> str:
    """Keep the names inside top-level `<...>` that identify a type or functor; drop numbers and dtypes."""
    out, depth, start = [], 0, 0
    args: list = []
    for i, ch in enumerate(text):
        if ch == "<":
            if depth == 0:
                out.append(text[start:i])
                args, start = [], i + 1
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                kept = [a for a in (_base(x) for x in _split_top(",".join(args))) if a]
                out.append(f"<{', '.join(kept)}>" if kept else "")
                start = i + 1
    out.append(text[start:] if depth == 0 else "")
    return "".join(out)


def _split_top(text: str) -> list:
    """Split at the commas outside any `<...>`, `(...)` or `{...}`."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "<({"
        depth -= ch in ">)}"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _strip_brackets(text: str, open_: str, close: str) -> str:
    """Remove every bracketed part, nested ones included (`f(a, g(b))` -> `f`)."""
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def _base(arg: str) -> str:
    arg = _strip_brackets(arg, "<", ">").strip()
    return "" if not arg or _NOISE_ARG.match(arg) else arg


# ---------------------------------------------------------------------------------------------- kernel classes
# The registry (kernel_classes.json beside this file) holds one entry per naming convention: its words, class,
# family, why and example names. Its `about` list documents the pattern language; matching is on whole words.

_REGISTRY_FILE = Path(__file__).with_name("kernel_classes.json")
_SCOPES = ("function", "namespace", "args", "params")  # params: parameter types, read as weak hints only
_ANGLES = re.compile(r"[<>]")
_IDENT = re.compile(r"[A-Za-z0-9_]+")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|\|")  # ABCDef -> ABC Def, fp8 -> fp 8; '|' between identifiers
# A kernel's identity is in its first characters (function name, qualifiers, leading template arguments): the
# classifier reads at most this much of a name, so a pathological multi-megabyte name costs no more than a long one.
READ_CHARS = 1 << 16
_UNNAMED = re.compile(r"\(anonymous namespace\)::|`anonymous namespace'::|<unnamed>::")
_RETURN_TYPE = re.compile(r"^(?:__global__\s+)?void\s+|^std::enable_if<[^<>]*>::type\s+")
_HEAD_END = re.compile(r"[<(]")


@dataclass(frozen=True)
class KernelMatch:
    """Why a kernel got its class: the registry entry (or op rule) that decided, and what it was read from."""
    klass: str
    family: str
    why: str
    source: str  # "name", "op", "flops", "kind" or "none"
    link: Optional[str] = None  # "internode" / "intranode" for communication whose name says so


@dataclass(frozen=True)
class _Entry:
    klass: str
    family: str
    why: str
    scope: str
    strength: str
    link: Optional[str]
    patterns: Tuple[Tuple[Tuple[str, ...], bool], ...]  # per alternative: its parts (each " w1 w2 " variants), anchored

    def matches(self, text: str, keys: frozenset) -> bool:
        return any(_pattern_matches(parts, anchored, text, keys) for parts, anchored in self.patterns)

    def match(self, source: str) -> KernelMatch:
        return KernelMatch(self.klass, self.family, self.why, source, self.link)


def _pattern_matches(parts: Tuple[Tuple[str, ...], ...], anchored: bool, text: str, keys: frozenset) -> bool:
    """Every part occurs (as whole words, inside one identifier); the first at the start of the scope if anchored.
    A set lookup of each variant's first word comes first: most entries are rejected without a substring search."""
    for i, variants in enumerate(parts):
        if not any(v.split(" ", 2)[1] in keys and (text.startswith(v) if anchored and i == 0 else v in text)
                   for v in variants):
            return False
    return True


def _compile(pattern: Any) -> Tuple[Tuple[Tuple[str, ...], ...], bool]:
    """'^a|b c & d' -> (((" a c ", " b c "), (" d ",)), anchored)."""
    text = pattern.strip()
    anchored = text.startswith("^")
    parts = []
    for part in text.lstrip("^").split("&"):
        options = [term.split("|") for term in part.split()]
        parts.append(tuple(" " + " ".join(seq) + " " for seq in itertools.product(*options)))
    return tuple(parts), anchored


def _entry(raw: Dict[str, Any], family: str) -> _Entry:
    pats = raw["pattern"] if isinstance(raw["pattern"], list) else [raw["pattern"]]
    return _Entry(raw["class"], family, raw["why"], raw.get("scope", "any"), raw.get("strength", "strong"),
                  raw.get("link"), tuple(map(_compile, pats)))


def _load_registry() -> Tuple[Tuple[str, ...], Tuple[_Entry, ...], Tuple[_Entry, ...]]:
    """(class priority, kernel-name entries, launching-op entries), checked against CLASSES."""
    with open(_REGISTRY_FILE, encoding="utf-8") as f:
        data = json.load(f)
    entries = tuple(_entry(raw, fam["family"]) for fam in data["kernels"] for raw in fam["entries"])
    ops = tuple(_entry(raw, "launching op") for raw in data["ops"])
    priority = tuple(data["priority"])
    bad = {e.klass for e in entries + ops} - set(priority) | set(priority) - set(CLASSES)
    if bad or any(e.scope not in _SCOPES + ("any",) or e.strength not in ("strong", "generic", "weak") for e in entries):
        raise ValueError(f"kernel_classes.json: unknown class, scope or strength ({sorted(bad)})")
    return priority, entries, ops


_PRIORITY, _ENTRIES, _OP_ENTRIES = _load_registry()
# Inductor names its kernels by what they do (poi pointwise, red / per reduction, tem template) followed by the ops
# fused into them: those ops do not say what the kernel does (a pointwise epilogue of an addmm is not a GEMM), so
# such a name is read by the Inductor entries only, and the launching op (the kernel's own record) adds nothing.
_INDUCTOR_KERNEL = re.compile(r"\s*triton_(?:poi|red|per|tem)_")
_INDUCTOR_ENTRIES = tuple(e for e in _ENTRIES if e.family == "Triton / Inductor")
_GEMM_USERS = frozenset({"conv", "attention"})  # ops whose GEMM kernels do the op's own matrix work
_RANK = {klass: i for i, klass in enumerate(_PRIORITY)}


def words(text: str) -> str:
    """The distinct identifiers of `text` as lower-case words, one space between words and ' | ' between
    identifiers, padded with spaces: `fused_add_rms_norm_kernel<_typeConvert>` -> ' fused add rms norm kernel |
    type convert '. Linear in the length of `text` (regular expressions and joins, no per-character Python)."""
    idents = " | ".join(dict.fromkeys(_IDENT.findall(text)))
    return " " + " ".join(_WORD.findall(idents)).lower() + " "


def name_scopes(name: str) -> Dict[str, str]:
    """The words of a kernel name's scopes: its own function name, its qualifiers, its template arguments and its
    parameter types. Mangled names are demangled first. Reads the first READ_CHARS characters."""
    name = name[:READ_CHARS]
    text = _RETURN_TYPE.sub("", _UNNAMED.sub("", (demangle(name) or name)[:READ_CHARS].strip()))
    cut = _HEAD_END.search(text)
    head, rest = (text[:cut.start()], text[cut.start():]) if cut else (text, "")
    qualifiers, _, function = head.rpartition("::")
    args, params = _split_template(rest)
    return {"function": words(function), "namespace": words(qualifiers), "args": words(args), "params": words(params)}


def _split_template(rest: str) -> Tuple[str, str]:
    """'<template args>(parameters)' -> (template args, parameters); a name cut short keeps all as arguments."""
    if not rest.startswith("<"):
        return "", rest
    depth = 0
    for m in _ANGLES.finditer(rest):
        depth += 1 if m.group() == "<" else -1
        if depth == 0:
            return rest[:m.end()], rest[m.end():]
    return rest, ""


def _best(entries: Iterable[_Entry], text: str) -> Optional[_Entry]:
    """The matching entry of the highest-priority class (the first such entry in the registry)."""
    found = None
    keys = frozenset(text.split())
    for entry in entries:
        if (found is None or _RANK[entry.klass] < _RANK[found.klass]) and entry.matches(text, keys):
            found = entry
    return found


def classify(name: str, kind: str = "kernel", op: Optional[str] = None,
             flops: Optional[float] = None) -> KernelMatch:
    """The class of a GPU activity and the registry entry that decided it.

    Order: a strong match in the kernel's function name, then its qualifiers, then its template arguments (a GEMM
    launched by a convolution or attention op takes the op's class: it does that op's matrix work); else a
    generic wrapper's kind (PyTorch elementwise_kernel, Inductor triton_poi); else the launching op's name (`op`);
    else a weak library hint (cuBLAS, CUTLASS, Inductor templates); else FLOPs the trace recorded for this kernel
    (`flops`, e.g. Inductor's kernel_flop, which it records for matrix templates only): matrix work, GEMM."""
    if kind in ("memcpy", "memset"):
        return KernelMatch(kind, kind, "copy engine / runtime activity", "kind")
    return _classify_name(name, op, flops if flops and flops > 0 else None)


@functools.lru_cache(maxsize=65536)
def _classify_name(name: str, op: Optional[str], flops: Optional[float]) -> KernelMatch:
    """`classify` for a kernel, cached per (name, op, FLOPs): a trace has far fewer names than events."""
    scopes = name_scopes(name)
    inductor = _INDUCTOR_KERNEL.match(name) is not None
    by_op = _best(_OP_ENTRIES, words(op)) if op and not (inductor and _INDUCTOR_KERNEL.match(op)) else None
    fallback: Dict[str, _Entry] = {}
    for scope in _SCOPES:
        text = scopes[scope]
        hits = [e for e in (_INDUCTOR_ENTRIES if inductor else _ENTRIES) if e.scope in ("any", scope)]
        strong = _best((e for e in hits if e.strength == "strong"), text) if scope != "params" else None
        if strong is not None and strong.klass == "GEMM" and by_op is not None and by_op.klass in _GEMM_USERS:
            return by_op.match("op")  # cuDNN's GEMM-based convolution algorithms run volta_sgemm_*: conv work
        if strong is not None:
            return strong.match("name")
        for strength in ("generic", "weak"):
            if strength in fallback or scope == "params" and strength == "generic":
                continue
            # parameter types are plumbing (cublasTransposeParams, cudnnTensorStruct): any match there is a hint
            found = _best((e for e in hits if e.strength == strength or scope == "params"), text)
            if found is not None:
                fallback[strength] = found
    if "generic" in fallback:
        return fallback["generic"].match("name")
    if by_op is not None:
        return by_op.match("op")
    if "weak" in fallback:
        return fallback["weak"].match("name")
    if flops:
        return KernelMatch("GEMM", "recorded FLOPs", "the trace recorded FLOPs for this kernel: matrix work", "flops")
    return KernelMatch("other", "unknown", "no registry entry matches the name or the launching op", "none")


def kernel_class(name: str, kind: str = "kernel", op: Optional[str] = None, flops: Optional[float] = None) -> str:
    """One of CLASSES for a GPU activity (see `classify`)."""
    return classify(name, kind, op, flops).klass


# ---------------------------------------------------------------------------------------------- display names

# cpp_demangle (the gimli-rs Rust demangler as a wheel) follows the current Itanium ABI (`DF16b` bfloat16 in ROCm CK
# names, which the system's libstdc++ and the pure-Python parsers reject); LLVM's demangler reads what it does not
# yet (clang 18's template parameter declarations, see `itanium`). Both optional on platforms without a wheel.
DEMANGLER = itanium.DEMANGLERS[0][0] if itanium.DEMANGLERS else None


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> Optional[str]:
    """The demangled form of an Itanium-mangled name (`_Z...`), or None when the name is not mangled (most kernel
    names in traces are already demangled by CUPTI / roctracer) or cannot be demangled here."""
    if not name.startswith("_Z"):
        return None
    return itanium.demangled(name)


# Namespaces that say nothing about which kernel it is (every PyTorch kernel lives in at::native).
_NOISE_NS = re.compile(r"\b(?:at::native::|at::cuda::|at::detail::|at::|c10::|std::|\(anonymous namespace\)::|"
                       r"`anonymous namespace'::|internal::|templates::cuda::)")
# Wrappers whose template argument is the distinctive part (`cutlass::Kernel2<cutlass_80_tensorop_...>`).
_WRAPPERS = frozenset({"Kernel", "Kernel2", "device_kernel", "kentry", "gpu_kernel_impl", "gpu_kernel_impl_nocast",
                       "BinaryFunctor", "BUnaryFunctor", "UnaryFunctor", "func_wrapper_t", "ReduceOp",
                       "AUnaryFunctor", "launch_kernel", "gpu_index_kernel"})
# Template arguments that are plumbing, not identity.
_PLUMBING = re.compile(r"^(?:Array|array|TensorInfo|OffsetCalculator|TrivialOffsetCalculator|LoadWithoutCast|"
                       r"StoreWithoutCast|LoadWithCast|StoreWithCast|RestrictPtrTraits|DefaultPtrTraits|"
                       r"GenericPackedTensorAccessor|PackedTensorAccessor\d*|decltype|type|enable_if|cublasGemvTensorStridedBatched|"
                       r"cublasGemvParams\w*|cublas\w*Params)$")
_TENSILE = re.compile(r"^Cijk_")
_TENSILE_KEEP = re.compile(r"^(?:MT\d+x\d+x\d+|MI\d+x\d+x\d+|GSU\w+|WG\d+_\d+_\d+)$")
_TENSILE_TILE = re.compile(r"^(?:MT\d+x\d+x\d+|MI\d+x\d+x\d+)$")  # macro tile, matrix instruction
_DISPLAY_MAX = 160


# Names are classified and shortened from their first NAME_CHARS characters: real kernel and op names stay under
# 2 KiB (CUTLASS templates included), and every pattern reads a name's head; a pathological 10 MB name then costs
# what a 16 KiB one does instead of seconds per pattern. The full name is kept everywhere else.
NAME_CHARS = 1 << 14


def name_head(name: str) -> str:
    """The part of a name that classifying it reads (all of it, unless it is longer than NAME_CHARS)."""
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS]


@functools.lru_cache(maxsize=65536)
def display_name(name: str) -> str:
    """A short name for tables and charts (see the module docstring); the raw name stays the row's `name`. A name
    past NAME_CHARS is shortened from its head (real names stay under 2 KiB; folding megabytes costs seconds)."""
    if len(name) > NAME_CHARS:
        return name_head(name)[:_DISPLAY_MAX - 1] + "…"
    text = (demangle(name) or itanium.qualified_name(name) or name).strip()
    if _TENSILE.match(text):
        return _tensile(text)
    text = _ANON.sub("", text)
    text = re.sub(r"^(?:__global__\s+)?void\s+|^std::enable_if<.*?>::type\s+", "", text)
    head, args = _split_call(text)
    if head is None:
        return name
    short = _fold(head, args) + (_cute_details(text) if "cute::" in text else "")
    return short if len(short) <= _DISPLAY_MAX else short[:_DISPLAY_MAX - 1] + "…"


_CUTE_SHAPE = re.compile(r"cute::tuple<cute::C<(\d+)>, ?cute::C<(\d+)>, ?cute::C<(\d+)>")
_CUTE_SCHEDULE = re.compile(r"cutlass::gemm::Kernel(\w+)")
_CUTE_TYPES = (("float_e4m3_t", "e4m3"), ("float_e5m2_t", "e5m2"), ("bfloat16_t", "bf16"), ("half_t", "fp16"),
               ("tfloat32_t", "tf32"), ("int8_t", "int8"), ("float_e2m1_t", "e2m1"))


def _cute_details(text: str) -> str:
    """What a CUTLASS 3 / CuTe template says of its kernel beyond the class name (`GemmUniversal`, `GemmKernel`):
    the CTA tile (the first shape of three extents >= 8: the cluster shape, (2, 1, 1), comes before it), the
    kernel schedule (`KernelTmaWarpSpecializedCooperative` -> TmaWarpSpecializedCooperative) and the first
    element type, so that kernels of one class tell apart."""
    tile = next(("x".join(m.groups()) for m in _CUTE_SHAPE.finditer(text) if min(map(int, m.groups())) >= 8), "")
    schedule = _CUTE_SCHEDULE.search(text)
    dtype = min(((text.find(t), short) for t, short in _CUTE_TYPES if t in text), default=(0, ""))[1]
    parts = [tile, schedule.group(1) if schedule else "", dtype]
    return "".join(f" {p}" for p in parts if p) + f" #{short_hash(text)}"


def _tensile(text: str) -> str:
    """`Cijk_Alik_Bljk_BBS_BH_..._MT256x192x64_MI16x16x1_..._WG32_8_1` (Tensile, hipBLASLt) ->
    `MT256x192x64 MI16x16x1 TN #c54f`: what tells one GEMM kernel from another, short enough for a table's name
    column (the class column says GEMM, the dtype column the types, the hover the whole name): the macro tile, the
    matrix instruction, the transposes of A and B (A's free index before its summation index `l`, `Ailk`, is N;
    `Alik` is T; B's summation index first, `Bljk`, is N), and 4 hex digits of the full name (hundreds of names
    differ only in fields past these)."""
    tokens = text.split("_")
    macro = [tok for tok in tokens if _TENSILE_TILE.match(tok)]
    a = next((tok for tok in tokens if tok.startswith("A") and len(tok) == 4), "")
    b = next((tok for tok in tokens if tok.startswith("B") and len(tok) == 4 and "l" in tok), "")
    trans = ("T" if a[1:2] == "l" else "N") + ("N" if b[1:2] == "l" else "T") if a and b else ""
    return " ".join([*macro, *([trans] if trans else []), f"#{short_hash(text)}"])


try:  # hashlib's own blake2s, without importing hashlib, which loads OpenSSL (3.5 MB in every CLI run)
    from _blake2 import blake2s as _blake2s
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2s as _blake2s


def short_hash(text: str) -> str:
    """4 hex digits of a name, the same in every view and run: tells apart names that fold to one display name."""
    return _blake2s(text.encode(), digest_size=2).hexdigest()


def _split_call(text: str) -> Tuple[Optional[str], List[str]]:
    """The function's qualified name and its top-level template arguments (parameters dropped); (None, []) when
    the text does not parse as a name."""
    depth, start = 0, None
    for i, ch in enumerate(text):
        if ch == "(" and depth == 0:  # the parameter list (or a lambda's enclosing function): the name ends here
            return text[:i].strip() or None, []
        if ch == "<":
            start = i if depth == 0 else start
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
            if depth == 0:
                return text[:start].strip() or None, _split_top(text[start + 1:i])
    return (text if start is None else text[:start]).strip() or None, []


def _fold(head: str, args: List[str], depth: int = 0) -> str:
    """`head<args>` folded: a wrapper gives way to its arguments, numbers, dtypes and plumbing are dropped, and
    arguments show their own name only (`flash_fwd_kernel<Flash_fwd_kernel_traits>`)."""
    head = _NOISE_NS.sub("", head).strip()
    last = head.rsplit("::", 1)[-1]
    if last in _WRAPPERS:
        kept = list(dict.fromkeys(k for k in (_fold_arg(a, max(depth, 1)) for a in args) if k))
        if kept:
            prefix = head.rsplit("::", 1)[0] + "::" if depth == 0 and last == "kentry" and "::" in head else ""
            return prefix + ", ".join(kept)
    if depth:
        return last
    kept = list(dict.fromkeys(k for k in (_fold_arg(a, 1) for a in args) if k))
    return f"{head}<{', '.join(kept)}>" if kept else head


# A function argument (`&__hip_bfloat16 silu<__hip_bfloat16>(...)`, as LLVM prints it): its address-of and return type.
_FUNCTION_ARG = re.compile(r"^&(?:[\w:]+ )*")


def _fold_arg(arg: str, depth: int) -> str:
    """One template argument's identity: a functor's or lambda owner's name (`sigmoid_kernel_cuda(...)::{lambda}`
    -> `sigmoid_kernel_cuda`), '' for numbers, dtypes, enum casts and plumbing."""
    arg = _FUNCTION_ARG.sub("", arg.strip())
    if not arg or _NOISE_ARG.match(arg) or re.match(r"^\(.*\)-?\d+$", arg):  # `(cudnnKernelDataType_t)2`
        return ""
    head, inner = _split_call(arg)
    if head is None:
        return ""
    last = _NOISE_NS.sub("", head).rsplit("::", 1)[-1].strip()
    if _PLUMBING.match(last) or _NOISE_ARG.match(head) or not re.match(r"^[\w&~]", last):
        return ""
    return _fold(head, inner, depth)


@functools.lru_cache(maxsize=65536)
def name_fields(name: str, kind: str = "kernel", op: Optional[str] = None) -> Dict[str, Any]:
    """The name columns every kernel row carries: `display_name`, `demangled` (None when not mangled),
    `kernel_class` and `kernel_family` (the vendor / library convention that gave the class, with 'internode' or
    'intranode' where a communication kernel's name says so). Cached per name: a trace has far fewer names than
    events."""
    if kind in ("memcpy", "memset"):
        return {"display_name": name, "demangled": None, "kernel_class": kind, "kernel_family": kind}
    match = classify(name, kind, op)
    family = f"{match.family}, {match.link}" if match.link else match.family
    return {"display_name": display_name(name), "demangled": demangle(name), "kernel_class": match.klass,
            "kernel_family": family, "fused_from": fused_from(name)}


_FUSED = re.compile(r"\s*triton_(?:poi|red|per|tem)_fused(\w*?)(?:_\d+)?\s*$")


def fused_from(name: str) -> Optional[str]:
    """The ops an Inductor kernel fuses, as its name lists them (`triton_poi_fused_addmm_gelu_view_15` ->
    'addmm_gelu_view'); None for other kernels. Its class comes from the kernel kind, not from these."""
    match = _FUSED.match(name)
    return match.group(1).strip("_") or None if match else None


# Tensor Core kernels by name (words, see `words`): cuBLAS/cuDNN MMA shapes (h884, s1688, 16816...), CUTLASS/xmma
# "tensorop", hmma/wgmma/gmma/umma (tcgen05) instructions, WMMA, cuBLASLt nvJet (Hopper+ only), AMD MFMA/XDL and
# Tensile's matrix-instruction field (MI16x16x1). A name without these still ran on Tensor Cores when it does matrix
# work (GEMM, convolution, attention) in a Tensor Core dtype: the rating dtype, or else a dtype its name spells
# (bf16, e4m3, E2m1, MxE4m3: the trtllm-gen and block-scaled GEMMs of Blackwell).
_TENSOR_CORE_WORDS = frozenset({"884", "1688", "16816", "161616", "16832", "8816", "hmma", "xmma", "tensorop", "wmma",
                                "wgmma", "gmma", "umma", "tcgen", "mfma", "xdl", "xdlops", "tc", "imma", "nvjet"})
_CUDA_CORE_WORDS = frozenset({"ffma", "simt"})
TENSOR_CORE_DTYPES = frozenset({"fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8"})
_TENSOR_CORE_DTYPE_WORDS = (" bf 16 ", " fp 16 ", " f 16 ", " half ", " e 4 m 3 ", " e 5 m 2 ", " e 2 m 1 ", " fp 8 ",
                            " fp 4 ", " tf 32 ", " int 8 ", " bfloat 16 ", " b float 16 ", " nv bfloat 16 ")
_MATRIX_CLASSES = frozenset({"GEMM", "conv", "attention"})


def uses_tensor_cores(name: str, dtype: str, klass: str) -> bool:
    """Whether a kernel (probably) ran on Tensor Cores / matrix cores (see the rules above)."""
    text = " ".join(name_scopes(name).values())
    keys = frozenset(text.split())
    if keys & _CUDA_CORE_WORDS:  # sm80_xmma_gemm_f32f32_..._ffma: an xmma kernel on CUDA cores
        return False
    if keys & _TENSOR_CORE_WORDS or " mi " in text and _TENSILE_MI.search(text):
        return True
    if klass not in _MATRIX_CLASSES:
        return False
    if dtype:
        return dtype in TENSOR_CORE_DTYPES or peak_key(dtype) in TENSOR_CORE_DTYPES  # "mxfp4xmxfp8" operands
    return any(w in text for w in _TENSOR_CORE_DTYPE_WORDS)


_TENSILE_MI = re.compile(r" mi \d+ x \d+ x \d+ ")


__all__ = ["CLASSES", "normalize", "kernel_class", "classify", "KernelMatch", "words", "name_scopes", "uses_tensor_cores", "TENSOR_CORE_DTYPES", "demangle",
           "display_name", "name_fields", "short_hash", "DEMANGLER", "fused_from"]
