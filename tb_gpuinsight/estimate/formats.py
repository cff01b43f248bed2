"""Operand formats of block-scaled (microscaling) GEMM kernels, read from their names: the dtype a kernel really
computes in, and the datasheet peak it is rated against.

Serving kernels quantize inside the kernel: the launching op records bf16 activations while the GEMM multiplies
MXFP4 weights by MXFP8 activations. The names say so, in each library's notation:

* TensorRT-LLM's generated Blackwell kernels (vLLM / SGLang / FlashInfer MoE): ``bmm_<A>_<B>_...`` with
  ``MxE2m1`` (MXFP4), ``MxE4m3`` (MXFP8), ``E2m1`` (NVFP4: E2M1 with an FP8 scale per 16), ``E4m3`` (FP8),
  ``Bfloat16``;
* triton_kernels' ``_matmul_ogs_<layout>_<out>x<act>x<weight>_...`` (``bf16xbf16xmxfp4``, ``bf16xmxfp8xmxfp4``);
* CUTLASS block-scaled kernels: ``<scale>x<value>`` pairs, ``ue8m0xe2m1`` (MX: an E8M0 scale per 32) and
  ``ue4m3xe2m1`` (NVFP4);
* names that spell the format: ``nvfp4``, ``mxfp4``, ``mxfp8``, ``fp4`` GEMMs; FP8 GEMMs with block scales
  (DeepSeek-style 128-wide blocks: ``blockwise``, ``block_fp8``, ``blockscale``, ``1d2d``).

The label lists the operands in the name's order joined by "x" (triton_kernels' own notation): ``mxfp4xmxfp8``.
A GEMM whose operands differ runs at the rate of the wider one (Blackwell's ``kind::mxf8f6f4`` runs FP4 x FP8 at
the FP8 rate; triton_kernels upcasts MXFP4 weights to bf16 on Hopper and CDNA3), so the peak key is the widest
operand's: fp4 < fp6 < fp8 < fp16 / bf16.
"""
from __future__ import annotations

import re
from typing import List, Optional

# One operand's format: (pattern over the lower-cased token, label)
_TOKENS = (
    (re.compile(r"^mx(e2m1|fp4)$"), "mxfp4"), (re.compile(r"^mx(e3m2|e2m3|fp6)$"), "mxfp6"),
    (re.compile(r"^mx(e4m3|e5m2|fp8)$"), "mxfp8"), (re.compile(r"^(e2m1|nvfp4)$"), "nvfp4"),
    (re.compile(r"^(e4m3|e5m2|e4m3fn|fp8|float8_e4m3fn|float8_e5m2)$"), "fp8"),
    (re.compile(r"^(bfloat16|bf16)$"), "bf16"), (re.compile(r"^(fp16|float16|half)$"), "fp16"),
)
_TRTLLM = re.compile(r"^bmm_([A-Za-z0-9]+)_([A-Za-z0-9]+)_")
_TRITON_OGS = re.compile(r"_matmul_ogs_[a-z]+_([a-z0-9]+)_\d+x\d+")
_OGS_DTYPE = re.compile(r"(?:mx)?[a-wyz0-9]+")  # "bf16xmxfp8xmxfp4": runs without an "x", but for an "mx" prefix
_CUTLASS_BS = re.compile(r"u(e8m0|e4m3)x(e2m1|e3m2|e2m3|e4m3|e5m2)")
_SPELLED = (  # (pattern over the lower-cased name, label): the first match wins
    (re.compile(r"nvfp4|fp4_nv"), "nvfp4"), (re.compile(r"mxfp4"), "mxfp4"), (re.compile(r"mxfp8"), "mxfp8"),
    (re.compile(r"mxfp6"), "mxfp6"),
    (re.compile(r"(gemm|mm|matmul)_?fp4|fp4_?(gemm|mm|matmul)"), "nvfp4"),
    (re.compile(r"fp8.*(blockwise|block_?scale|1d2d|1d1d)|(blockwise|block_?scale|block)_?fp8|w8a8_block"),
     "fp8_block"),
)
_GEMM_WORDS = re.compile(r"gemm|matmul|bmm|_mm|mm_|mma|grouped_mm")  # a spelled format names a GEMM, not a cast
_PEAK_ORDER = ("fp4", "fp6", "fp8", "bf16", "fp16")
_PEAK_OF = {"mxfp4": "fp4", "nvfp4": "fp4", "fp4": "fp4", "mxfp6": "fp6", "fp6": "fp6", "mxfp8": "fp8",
            "fp8": "fp8", "fp8_block": "fp8", "bf16": "bf16", "fp16": "fp16"}
_LABEL_PARTS = re.compile(r"fp8_block|mxfp4|mxfp6|mxfp8|nvfp4|fp4|fp6|fp8|bf16|fp16")


def operand_format(kernel: str) -> str:
    """The operand format label a GEMM kernel's name spells ("mxfp4xmxfp8", "nvfp4", "fp8_block", ...), or ""
    when the name says no block-scaled or low-precision format."""
    found = _TRTLLM.match(kernel)
    if found:
        return _join([_token(t) for t in found.groups()])
    low = kernel.lower()
    found = _TRITON_OGS.search(low)
    if found:
        dtypes = _OGS_DTYPE.findall(found.group(1))  # output, activation, weight
        if len(dtypes) != 3:
            return ""
        act, weight = _token(dtypes[1]), _token(dtypes[2])
        return _join([act, weight]) if any(_is_scaled(t) for t in (act, weight)) else ""
    pairs = _CUTLASS_BS.findall(low)
    if pairs:
        return _join(["nvfp4" if s == "e4m3" and v == "e2m1" else _token("mx" + v) for s, v in pairs])
    if not _GEMM_WORDS.search(low):  # nvfp4 / mxfp8 quantize kernels compute no products
        return ""
    return next((label for pattern, label in _SPELLED if pattern.search(low)), "")


def peak_key(label: str) -> Optional[str]:
    """The datasheet dtype a format label is rated against: its widest operand's (None when it names none)."""
    keys = [_PEAK_OF[p] for p in _LABEL_PARTS.findall(label or "")]
    return max(keys, key=_PEAK_ORDER.index) if keys else None


def _token(text: str) -> str:
    low = text.lower()
    return next((label for pattern, label in _TOKENS if pattern.match(low)), "")


def _is_scaled(label: str) -> bool:
    return label.startswith(("mx", "nv"))


def _join(labels: List[str]) -> str:
    """Operands in order, one label when they agree; "" when any operand is not understood or none is low
    precision (a bf16 x bf16 kernel is no news)."""
    if not labels or not all(labels) or not any(_is_scaled(t) or t == "fp8" for t in labels):
        return ""
    return labels[0] if len(set(labels)) == 1 else "x".join(labels)


__all__ = ["operand_format", "peak_key"]
