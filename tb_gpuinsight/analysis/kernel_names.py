"""Kernel names for comparing runs: a normalised name that survives recompiles and template churn, and a class.

Normalising removes what changes between two builds of the same work: C++ template arguments and parameter lists,
return types, anonymous namespaces, and launch-specific suffixes (Triton's `_0`/`_1` instance numbers and argument
divisibility tags such as `0d1d2d`, cuBLAS's `__5x_cublas`-style tails). Classes group kernels by what they do, from
the kernel name and, when known, the op that launched it.
"""
from __future__ import annotations

import functools
import re
from typing import Optional

CLASSES = ("GEMM", "attention", "convolution", "elementwise", "reduction", "memcpy/memset", "communication",
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
                        r"float|double|bool|half|at::Half|c10::\w+|__half|__nv_bfloat16|std::\w+)\s*[*&]*|"
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
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
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
    ("convolution", re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit_?gemm|cudnn.*(?:fwd|bwd)", re.I)),
    ("GEMM", re.compile(r"gemm|xmma|cublas|cutlass|wmma|matmul|hipblaslt|rocblas|_mm_|\bmm_|tensorop|mfma", re.I)),
    ("reduction", re.compile(r"reduce|softmax|norm|_sum|sum_|mean|argmax|argmin|topk|sort|scan|red_fused|"
                             r"triton_per", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi|copy|fill|cat|index|"
                               r"gather|scatter|embedding|where|cast|relu|gelu|silu|dropout|add|mul", re.I)),
)
_OP_RULES = (
    ("GEMM", re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|_int_mm)$")),
    ("attention", re.compile(r"attention")),
    ("convolution", re.compile(r"conv")),
)


@functools.lru_cache(maxsize=65536)
def kernel_class(name: str, kind: str = "kernel", op: Optional[str] = None) -> str:
    """One of CLASSES for a GPU activity."""
    if kind in ("memcpy", "memset"):
        return "memcpy/memset"
    for label, pattern in _RULES[:3]:  # these names are unambiguous whatever op launched them
        if pattern.search(name):
            return label
    for label, pattern in _OP_RULES:
        if op and pattern.search(op):
            return label
    for label, pattern in _RULES[3:]:
        if pattern.search(name):
            return label
    return "other"


# Tensor Core kernels by name: cuBLAS/cuDNN MMA shapes (h884, s1688, 16816...), CUTLASS/xmma "tensorop" and
# hmma/wgmma/gmma instructions, WMMA, AMD MFMA. A name without these can still run on Tensor Cores when its dtype
# is a Tensor Core dtype and it does matrix work (see `uses_tensor_cores`).
_TENSOR_CORE_NAME = re.compile(r"884|1688|16816|hmma|xmma|tensorop|wmma|wgmma|gmma|mfma|_tc_|imma", re.I)
TENSOR_CORE_DTYPES = frozenset({"fp16", "bf16", "tf32", "fp8", "int8"})
_MATRIX_CLASSES = frozenset({"GEMM", "convolution", "attention"})


def uses_tensor_cores(name: str, dtype: str, klass: str) -> bool:
    """Whether a kernel (probably) ran on Tensor Cores / matrix cores: its name says so, or it does matrix work
    (GEMM, convolution, attention) in a dtype whose datasheet peak is a Tensor Core peak."""
    if _TENSOR_CORE_NAME.search(name):
        return True
    return klass in _MATRIX_CLASSES and dtype in TENSOR_CORE_DTYPES


__all__ = ["CLASSES", "normalize", "kernel_class", "uses_tensor_cores", "TENSOR_CORE_DTYPES"]
