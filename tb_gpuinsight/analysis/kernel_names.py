"""Kernel names: demangled and short display names, a normalised name for comparing runs, and one kernel class.

Normalising removes what changes between two builds of the same work: C++ template arguments and parameter lists,
return types, anonymous namespaces, and launch-specific suffixes (Triton's `_0`/`_1` instance numbers and argument
divisibility tags such as `0d1d2d`, cuBLAS's `__5x_cublas`-style tails). Classes group kernels by what they do, from
the kernel name and, when known, the op that launched it.
"""
from __future__ import annotations

import functools
import hashlib
import re
from typing import Any, Dict, List, Optional, Tuple

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
                        r"float|double|bool|half|at::Half|c10::\w+|__half|__nv_bfloat16|__hip_\w+|std::\w+)\s*[*&]*|"
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


_RULES = (
    ("communication", re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|sendrecv|alltoall|c10d", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|\bmha|_attn|attn_", re.I)),
    ("conv", re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit_?gemm|cudnn.*(?:fwd|bwd)|igemm_(?:fwd|bwd|wrw)|"
                        r"[shd]cudnn_", re.I)),
    ("norm", re.compile(r"(?:layer|batch|group|instance|rms)_?norm|bn_(?:fw|bw)|norm2d|_norm_|"
                        r"rsqrt.*mean|mean.*rsqrt|GammaBeta|RowwiseMoments", re.I)),
    ("GEMM", re.compile(r"gemm|xmma|cublas|cutlass|wmma|matmul|hipblaslt|rocblas|_mm_|\bmm_|(?-i:tensorop)|mfma|^Cijk_",
                        re.I)),
    ("reduction", re.compile(r"reduce|softmax|norm|_sum|sum_|mean|argmax|argmin|topk|sort|scan|red_fused|pool|"
                             r"triton_per", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi|copy|fill|cat|index|"
                               r"gather|scatter|embedding|where|cast|relu|gelu|silu|dropout|add|mul", re.I)),
)
_LIBRARY_NAMES = re.compile(r"fbgemm(?:_gpu)?", re.I)  # library namespaces whose name says gemm for any kernel
_OP_RULES = (
    ("GEMM", re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|_int_mm)$")),
    ("attention", re.compile(r"attention")),
    ("conv", re.compile(r"conv")),
    ("norm", re.compile(r"^aten::(?:native_|cudnn_|miopen_|_fused_)?(?:layer|batch|group|instance|rms)_norm")),
)


@functools.lru_cache(maxsize=65536)
def kernel_class(name: str, kind: str = "kernel", op: Optional[str] = None) -> str:
    """One of CLASSES for a GPU activity."""
    if kind in ("memcpy", "memset"):
        return kind
    name = _LIBRARY_NAMES.sub("", normalize(demangle(name) or name))  # parameters say nothing of the work
    for label, pattern in _RULES[:4]:  # these names are unambiguous whatever op launched them
        if pattern.search(name):
            return label
    for label, pattern in _OP_RULES:
        if op and pattern.search(op):
            return label
    for label, pattern in _RULES[4:]:
        if pattern.search(name):
            return label
    return "other"


# ---------------------------------------------------------------------------------------------- display names

def _load_demangler():
    """cpp_demangle (the gimli-rs Rust demangler as a wheel): follows the current Itanium ABI (`DF16b` bfloat16 in
    ROCm CK names, which the system's libstdc++ and the pure-Python parsers reject). Optional on platforms without
    a wheel: names then stay as recorded and `demangle` answers None."""
    try:
        from cpp_demangle import demangle as impl
    except ImportError:  # pragma: no cover - depends on the platform's wheel
        return None
    return impl


_DEMANGLE = _load_demangler()
DEMANGLER = "cpp_demangle" if _DEMANGLE else None


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> Optional[str]:
    """The demangled form of an Itanium-mangled name (`_Z...`), or None when the name is not mangled (most kernel
    names in traces are already demangled by CUPTI / roctracer) or cannot be demangled here."""
    if not name.startswith("_Z") or _DEMANGLE is None:
        return None
    try:
        text = _DEMANGLE(name)
    except Exception:  # noqa: BLE001 - a malformed symbol is shown raw, never an error
        return None
    return text if text and text != name else None


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
_DISPLAY_MAX = 160


@functools.lru_cache(maxsize=65536)
def display_name(name: str) -> str:
    """A short name for tables and charts (see the module docstring); the raw name stays the row's `name`."""
    text = (demangle(name) or name).strip()
    if _TENSILE.match(text):
        return _tensile(text)
    text = _ANON.sub("", text)
    text = re.sub(r"^(?:__global__\s+)?void\s+|^std::enable_if<.*?>::type\s+", "", text)
    head, args = _split_call(text)
    if head is None:
        return name
    short = _fold(head, args)
    return short if len(short) <= _DISPLAY_MAX else short[:_DISPLAY_MAX - 1] + "…"


def _tensile(text: str) -> str:
    """`Cijk_Alik_Bljk_BBS_BH_..._MT256x192x64_MI16x16x1_..._WG32_8_1`: the layout and type prefix, the macro tile,
    matrix instruction, GSU and workgroup, and 4 hex digits of the full name (hundreds of Tensile names differ
    only in fields past these)."""
    tokens = text.split("_")
    prefix = []
    for tok in tokens:
        if tok in ("Bias", "UserArgs", "SAV") or _TENSILE_KEEP.match(tok):
            break
        prefix.append(tok)
    kept = [tok for tok in tokens if _TENSILE_KEEP.match(tok)]
    return " ".join(["_".join(prefix[:6])] + kept + [f"#{short_hash(text)}"])


def short_hash(text: str) -> str:
    """4 hex digits of a name, the same in every view and run: tells apart names that fold to one display name."""
    return hashlib.blake2s(text.encode(), digest_size=2).hexdigest()


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


def _fold_arg(arg: str, depth: int) -> str:
    """One template argument's identity: a functor's or lambda owner's name (`sigmoid_kernel_cuda(...)::{lambda}`
    -> `sigmoid_kernel_cuda`), '' for numbers, dtypes, enum casts and plumbing."""
    arg = arg.strip()
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
    """The name columns every kernel row carries: `display_name`, `demangled` (None when not mangled) and
    `kernel_class`. Cached per name: a trace has far fewer names than events."""
    if kind in ("memcpy", "memset"):
        return {"display_name": name, "demangled": None, "kernel_class": kind}
    return {"display_name": display_name(name), "demangled": demangle(name), "kernel_class": kernel_class(name, kind, op)}


# Tensor Core kernels by name: cuBLAS/cuDNN MMA shapes (h884, s1688, 16816...), CUTLASS/xmma "tensorop" and
# hmma/wgmma/gmma instructions, WMMA, AMD MFMA. A name without these can still run on Tensor Cores when its dtype
# is a Tensor Core dtype and it does matrix work (see `uses_tensor_cores`).
_TENSOR_CORE_NAME = re.compile(r"884|1688|16816|hmma|xmma|tensorop|wmma|wgmma|gmma|mfma|_tc_|imma", re.I)
TENSOR_CORE_DTYPES = frozenset({"fp16", "bf16", "tf32", "fp8", "int8"})
_MATRIX_CLASSES = frozenset({"GEMM", "conv", "attention"})


def uses_tensor_cores(name: str, dtype: str, klass: str) -> bool:
    """Whether a kernel (probably) ran on Tensor Cores / matrix cores: its name says so, or it does matrix work
    (GEMM, convolution, attention) in a dtype whose datasheet peak is a Tensor Core peak."""
    if _TENSOR_CORE_NAME.search(name):
        return True
    return klass in _MATRIX_CLASSES and dtype in TENSOR_CORE_DTYPES


__all__ = ["CLASSES", "normalize", "kernel_class", "uses_tensor_cores", "TENSOR_CORE_DTYPES", "demangle",
           "display_name", "name_fields", "short_hash", "DEMANGLER"]
