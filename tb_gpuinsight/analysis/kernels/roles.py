"""What a GPU activity does for its launching op: the op's compute, its plain work, or a helper.

One op often launches several kernels: a cuDNN convolution launches layout transforms (`nchwToNhwcKernel`) around
its conv kernel, cuBLAS a split-K reduction after its GEMM, MIOpen `batched_transpose_*` and `SubTensorOp*`
kernels, ROCm fills a buffer with `__amd_rocclr_fillBuffer`. The op's FLOPs are the work of its compute kernels
only; a helper moves a tensor and does no arithmetic of the op's formula. The roles below decide who gets what
(see `efficiency._attribute`; a helper's own bytes, the tensor it moves, are `helper_bytes.py`'s):

- compute: GEMM, convolution and attention kernels (by `names.py` class), the FFT and Winograd stages of
  cuDNN convolutions (`fft2d_r2c`, `winograd`: the algorithm's arithmetic), Triton / Inductor kernels.
  A kernel whose launching op carries Inductor's `kernel_flop` / `kernel_num_gb` args is compute too.
- work: any other kernel (elementwise, reduction...): the op's own work when the op launched no compute kernel.
- layout, splitk, epilogue: helpers recognised by name (registry below, each entry with its reason).
- memset, memcpy: by event kind (`gpu_memset` / `gpu_memcpy` categories) on every vendor, and ROCm's runtime
  fill/copy kernels by name. Never decided by a missing `bytes` arg.

A `work` kernel launched by an op that also launched a compute kernel is re-labelled `epilogue` (a bias add,
scaling or a cast around the GEMM/convolution).
"""
from __future__ import annotations

import functools
import re
from typing import Dict, Tuple

from .names import NAME_CHARS, kernel_class, name_head  # noqa: F401  (NAME_CHARS, name_head: public here too)

COMPUTE, WORK, LAYOUT, SPLITK, EPILOGUE, MEMSET, MEMCPY = "compute", "work", "layout", "splitk", "epilogue", \
    "memset", "memcpy"
ROLES = (COMPUTE, WORK, LAYOUT, SPLITK, EPILOGUE, MEMSET, MEMCPY)
HELPERS = frozenset({LAYOUT, SPLITK, EPILOGUE, MEMSET, MEMCPY})
COPIES = frozenset({MEMSET, MEMCPY})  # never take FLOPs, even as an op's only activity

# Name patterns of helper kernels, checked before the compute classes (several also match a GEMM pattern:
# `cublasLt::splitKreduce_kernel` says cublas, MIOpen's `SubTensorOp` says TensorOp).
HELPER_PATTERNS: Tuple[Tuple[str, "re.Pattern[str]", str], ...] = (
    (MEMSET, re.compile(r"__amd_rocclr_fillBuffer|__amd_rocclr_fillImage", re.I),
     "ROCm runtime fill kernel: a hipMemset launched as a kernel"),
    (MEMCPY, re.compile(r"__amd_rocclr_copyBuffer|__amd_rocclr_copyImage|__amd_rocclr_copy", re.I),
     "ROCm runtime copy kernel: a hipMemcpy launched as a kernel"),
    (LAYOUT, re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|batched_transpose|transpose_NCHW|"
                        r"transpose_NHWC|transpose_CNHW|\bim2col|Im2Col|Col2Im|col2im|Im[23]d2Col|Col2Im[23]d|"
                        r"generic4dTransposer|"
                        r"reorder_?kernel", re.I),
     "layout transform (cuDNN / MIOpen tensor format change, im2col): moves a tensor, no arithmetic of the op"),
    (SPLITK, re.compile(r"splitKreduce|split_?k_?reduc|reduce_1Block_kernel|splitk_reduction", re.I),
     "split-K reduction: sums the partial results a GEMM/convolution kernel already computed"),
    (EPILOGUE, re.compile(r"add_tensor_kernel|scalePackedTensor|SubTensorOp|biasAdd|bias_add|"
                          r"cublasLt::epilogue|computeOffsetsKernel|computeWgradSplitKOffsets|"
                          r"prepare_grouped_gemm_data", re.I),
     "bias / scaling / offset / argument-setup helper of a cuDNN, cuBLAS, CUTLASS or MIOpen call"),
)
ROLE_REASONS: Dict[str, str] = {
    COMPUTE: "GEMM, convolution, attention or Triton/Inductor kernel: takes its op's FLOPs",
    WORK: "the op's own work (no compute kernel in the op): takes its op's FLOPs and bytes by duration",
    EPILOGUE: "non-compute kernel launched by a GEMM/convolution/attention op: bias, scaling, cast or epilogue",
    MEMSET: "memset (gpu_memset event, or a runtime fill kernel)",
    MEMCPY: "memcpy (gpu_memcpy event, or a runtime copy kernel)",
    **{role: reason for role, _, reason in HELPER_PATTERNS if role not in (MEMSET, MEMCPY, EPILOGUE)},
}
_COMPUTE_CLASSES = frozenset({"GEMM", "attention", "conv"})
_LIBRARY_NAMES = re.compile(r"fbgemm(?:_gpu)?", re.I)  # library namespaces whose name says gemm for any kernel
# Compute kernels the `names.py` classes miss: cuDNN FFT / Winograd stages, cuDNN's own conv kernels
# (`volta_scudnn_*`, `cudnn_ampere_hcudnn_*`), Tensile GEMMs of rocBLAS / hipBLASLt (`Cijk_*`), MIOpen / CK convs.
_COMPUTE_STAGES = re.compile(r"fft\d*d?_|winograd|[shdi]cudnn_|^Cijk_|igemm|naive_conv|gridwise_(?:gemm|conv)|"
                             r"miopenSp\d*AsmConv|ck_tile.*(?:gemm|fmha)", re.I)


def kernel_role(name: str, kind: str = "kernel") -> str:
    """Role of an activity from its event kind and name alone (before the op-level `work` -> `epilogue` step)."""
    return _role(name_head(name), kind)


@functools.lru_cache(maxsize=65536)
def _role(name: str, kind: str) -> str:
    if kind in COPIES:
        return kind
    for role, pattern, _ in HELPER_PATTERNS:
        if pattern.search(name):
            return role
    plain = _LIBRARY_NAMES.sub("", name)  # `fbgemm_gpu::permute_...` is not a GEMM
    if name.startswith("triton_") or _COMPUTE_STAGES.search(plain) or kernel_class(plain) in _COMPUTE_CLASSES:
        return COMPUTE
    return WORK


def helper_bytes_reason(role: str) -> str:
    """Why a helper kernel's bytes are unknown when no tensor rule (`helper_bytes.py`) gives them."""
    return {LAYOUT: "layout transform: the trace does not say which of the op's tensors it moves",
            SPLITK: "split-K reduction: the number of partial results is not in the trace",
            EPILOGUE: "helper of a GEMM/convolution/attention op: the tensor it touches is not in the trace",
            MEMSET: "runtime fill kernel: its size is not in the trace",
            MEMCPY: "runtime copy kernel (or copy without a bytes arg): its size is not in the trace",
            }.get(role, "helper kernel: its size is not in the trace")


__all__ = ["ROLES", "HELPERS", "COPIES", "HELPER_PATTERNS", "ROLE_REASONS", "kernel_role", "helper_bytes_reason",
           "name_head", "NAME_CHARS",
           "COMPUTE", "WORK", "LAYOUT", "SPLITK", "EPILOGUE", "MEMSET", "MEMCPY"]
