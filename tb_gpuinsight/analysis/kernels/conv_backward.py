"""The kernels of one ``aten::convolution_backward`` each take the FLOPs and bytes of the gradient they compute.

A backward convolution computing several gradients (``output_mask``) launches one kernel family per gradient:
grad_input (dgrad), grad_weight (wgrad) and, with a bias, a reduction of grad_output. Split by duration, each would
get a share of the op's total unrelated to its own work. Each library names the gradient in its kernels:

* cuDNN / CUTLASS: ``dgrad`` / ``wgrad`` (``sm80_xmma_dgrad_implicit_gemm_*``, ``cudnn::detail::wgrad_alg0_engine``,
  ``winogradWgradData4x4``);
* MIOpen: ``bwd`` (backward data) / ``wrw`` (backward weights): ``igemm_bwd_gtcx2_*``, ``igemm_wrw_gtcx2_*``,
  ``naive_conv_bwd_nchw``, ``naive_conv_wrw_nhwc``, ``gridwise_convolution_backward_weight_*``;
* Composable Kernel: ``BwdData`` / ``BwdWeight`` (``DeviceGroupedConvBwdWeight_Xdl_CShuffle``);
* the bias gradient: PyTorch's sum over grad_output (a reduction kernel).

When every receiving kernel of such an op names its gradient, each gradient's figures (`estimate/conv.py`'s
`conv_backward_parts`) go to its kernels, split by duration among them only; otherwise the op's figures stay split
by duration, as for any op.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

import numpy as np

from ...estimate.args import OpArgs
from ...estimate.conv import conv_backward_parts
from ...estimate.flops import OpEstimate
from ...trace.kineto import KinetoTrace
from ...trace.table import Table
from .names import kernel_class, words
from .subop_sizing import EstimateWriter

_WGRAD = re.compile(r" (?:wgrad|wrw|bwd weights?|backward weights?|bwdweights?) ")
_DGRAD = re.compile(r" (?:dgrad|bwd data|backward data|bwddata) | (?:igemm|naive conv|conv) bwd ")
BACKWARD_OPS = ("aten::convolution_backward",)


def conv_part(name: str) -> Optional[str]:
    """"wgrad", "dgrad", "bias" or None: the gradient a convolution-backward kernel computes, by its name."""
    text = words(name[:4096])
    if _WGRAD.search(text):
        return "wgrad"
    if _DGRAD.search(text):
        return "dgrad"
    return "bias" if kernel_class(name) == "reduction" else None


def split_conv_backward(trace: KinetoTrace, acts: Table) -> int:
    """Give the kernels of each convolution_backward op their own gradient's figures (rule in the module
    docstring). Returns how many activities were re-sized."""
    names, ops = acts.strings["name"], trace.ops
    op_names = ops.strings.get("name", [])
    backward = {i for i, n in enumerate(op_names) if n in BACKWARD_OPS}
    if not backward:
        return 0
    receivers = (acts["op"] >= 0) & ~np.isnan(acts["flops"]) & (acts["flops"] > 0)
    rows = np.flatnonzero(receivers & np.isin(ops["name"][np.maximum(acts["op"], 0)], list(backward)))
    if not len(rows):
        return 0
    writer, done = EstimateWriter(acts), 0
    by_op: Dict[int, List[int]] = {}
    for row in rows.tolist():
        by_op.setdefault(int(acts["op"][row]), []).append(row)
    for op, mine in by_op.items():
        done += _split_one(trace, acts, writer, op, mine, [conv_part(names[acts["name"][r]]) for r in mine])
    return done


def _split_one(trace: KinetoTrace, acts: Table, writer: EstimateWriter, op: int, rows: List[int],
               parts: List[Optional[str]]) -> int:
    if None in parts or len(set(parts)) < 2 or trace.ops["shape"][op] < 0:
        return 0  # a kernel that does not say its gradient, or one gradient only: the duration split is right
    try:
        figures = conv_backward_parts("aten::convolution_backward", OpArgs(*trace.shape(int(trace.ops["shape"][op]))))
    except Exception:  # unknown shapes or mask: keep the op's figures
        return 0
    if not set(parts) <= set(figures):
        return 0
    dur = acts["dur"][rows]
    reasons = {p: acts.strings["flops_reason"][acts["flops_reason"][rows[0]]] for p in figures}
    for part, (flops, nbytes) in figures.items():
        mine = [i for i, p in enumerate(parts) if p == part]
        if not mine:
            continue
        total = float(dur[mine].sum())
        for i in mine:
            share = dur[i] / total if total > 0 else 1.0 / len(mine)
            note = f"{part} kernel of convolution_backward: its gradient's own figures (named by the kernel)"
            writer.write(rows[i], OpEstimate(flops, note if not reasons[part] else f"{note}; {reasons[part]}",
                                             nbytes, note, acts.strings["dtype"][acts["dtype"][rows[i]]]
                                             if acts["dtype"][rows[i]] >= 0 else None), share)
    return len(rows)
