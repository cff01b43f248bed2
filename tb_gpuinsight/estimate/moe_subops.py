"""Kernels sized from their op's own sub-ops: per kernel family, a rule that reads the sizes a kernel works on from
the ops recorded just before its launch, for kernels whose launching op does not show them (``vllm::moe_forward``
takes only the hidden states and router logits: the expert weights are found by layer name).

triton_kernels' ``matmul_ogs`` (the MoE expert GEMMs of gpt-oss in vLLM: kernels ``_matmul_ogs_<layout>_<out>x<act>
x<w>_<BM>x<BN>x<BK>x<split-k>[_<epilogue>]``) records, between its op's previous launch and its own, the allocation
of its output and the views of its operands (``_canonicalize_storage`` views x, then w, last before the launch)::

    aten::empty   ['[1, 128, 2944]', '15', ...]      output y: 128 routed rows x N_out, dtype code 15 = bf16
    aten::view    [[32, 3072]]                        x: K = 3072 (a token gather when rows < routed rows)
    aten::view    [[32, 1536, 5888]] unsigned char    w: [E, K / 2 (two mxfp4 values a byte), N]

FLOPs: ``2 x M x N x K`` over the M routed rows (the output's rows, over its split-k slices), plus 2 per output
element of a gated epilogue (``_swiglu``: N_out = N / 2). Bytes: the weights of the experts the rows can reach
(``min(E, M)`` of E: routing is not recorded, so an upper bound), their microscaling scales (one byte per 32
weights of an ``mx*`` format: not recorded, so sized by the format; triton_kernels' own launch metadata leaves
them out), x read once (its unique rows: the gather reads each token once from DRAM), y written once.

Its ``_finalize_matmul[_scatter]`` kernel sums each token's top-k expert rows (the router's k from the ``TopK``
sub-op) of the last matmul output into the token's row (see ``_finalize``). vLLM's own Triton ``fused_moe_kernel``
under ``moe_forward`` is sized from the intermediate caches it views (see ``_fused_moe``): FLOPs only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Pattern, Sequence, Tuple

from .args import SCALAR_TYPE_CODE_ITEMSIZE, OpArgs, UnknownEstimate, is_shape, numel
from .dtypes import itemsize
from .flops import OpEstimate

SOURCE = "sub-op shapes"
ROUTING = ("upper bound: routing not recorded, the weights of every expert the routed rows could reach "
           "(min(E, rows) = {reached} of {experts}) are counted as read")
_VIEWS = ("aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view")
_ALLOCS = ("aten::empty", "aten::empty_strided")
_MX_BLOCK = 32  # OCP microscaling: one 8-bit scale per 32 values


@dataclass(frozen=True)
class SubOp:
    """One op recorded under the launching op before the launch: its name and arguments."""
    name: str
    args: OpArgs

    def out_shape(self) -> Optional[Tuple[int, ...]]:
        """The size list a view or an allocation gives its result (Concrete Inputs), or None."""
        index = 1 if self.name in _VIEWS else 0
        size = self.args.opt_value(index)
        return tuple(size) if is_shape(size) else None


@dataclass(frozen=True)
class Rule:
    """A kernel family whose launches are sized from sub-ops: its name pattern and sizing function."""
    pattern: Pattern[str]
    size: Callable[["re.Match[str]", Sequence[SubOp], Sequence[SubOp]], OpEstimate]


_RULES: List[Rule] = []


def matches(kernel: str) -> bool:
    """A sub-op rule exists for this kernel name."""
    return any(rule.pattern.match(kernel) for rule in _RULES)


def size_kernel(kernel: str, window: Sequence[SubOp], before: Sequence[SubOp]) -> OpEstimate:
    """The FLOPs and bytes of one launch of `kernel` from `window` (the sub-ops recorded between its op's previous
    launch and this one) and `before` (every sub-op of the op before this launch, routing included); raises
    UnknownEstimate with the reason when the family's sizes are not all there."""
    for rule in _RULES:
        found = rule.pattern.match(kernel)
        if found:
            return rule.size(found, window, before)
    raise UnknownEstimate(f"no sub-op rule for kernel {kernel}")


# ------------------------------------------------------------------------------------ triton_kernels matmul_ogs

_DTYPE = r"(?:mx)?[a-wyz]+\d+[a-wyz0-9]*"  # bf16, fp8e4nv, mxfp4: an optional "mx", no other "x" (the separator)
_MATMUL_OGS = re.compile(rf"^_(?:p_)?matmul_ogs_(?P<layout>[NT]+)_(?P<out>{_DTYPE})x(?P<act>{_DTYPE})x(?P<w>{_DTYPE})"
                         r"_(?P<bm>\d+)x(?P<bn>\d+)x(?P<bk>\d+)x(?P<split>\d+)(?:_(?P<epi>\w+))?$")
_GATED = ("swiglu",)  # epilogues that halve N: two inputs (gate, up) per output element, 2 FLOPs each


def _last(ops: Sequence[SubOp], names: Tuple[str, ...], start: int = None) -> Tuple[int, Optional[SubOp]]:
    """(index, op) of the last op named one of `names` before position `start` (the end by default)."""
    end = len(ops) if start is None else start
    for i in range(end - 1, -1, -1):
        if ops[i].name in names:
            return i, ops[i]
    return -1, None


def _operands(window: Sequence[SubOp]) -> Tuple[SubOp, SubOp, SubOp]:
    """(y allocation, x view, w view) of one matmul_ogs launch, or UnknownEstimate."""
    w_at, w = _last(window, _VIEWS)
    _, x = _last(window, _VIEWS, w_at)
    _, y = _last(window, _ALLOCS)
    if w is None or x is None or y is None:
        raise UnknownEstimate("matmul_ogs: its output allocation and operand views are not among the sub-ops "
                              "recorded before the launch (record_shapes=True records them)")
    return y, x, w


def _matmul_ogs(found: "re.Match[str]", window: Sequence[SubOp], before: Sequence[SubOp]) -> OpEstimate:
    y, x, w = _operands(window)
    y_shape, x_shape, w_shape = y.out_shape(), x.args.opt_shape(0), w.args.opt_shape(0)
    if not y_shape or len(y_shape) < 2 or not x_shape or not w_shape or len(w_shape) != 3:
        raise UnknownEstimate(f"matmul_ogs sub-op shapes not understood: y {y_shape}, x {x_shape}, w {w_shape}")
    _, w_rows, n = w_shape
    k = x_shape[-1]
    packing = k // w_rows if w_rows and k % w_rows == 0 else 0
    if packing not in (1, 2) or (packing == 2) != ("fp4" in found["w"]):
        raise UnknownEstimate(f"matmul_ogs: x {x_shape} and w {w_shape} do not share K for weights of "
                              f"{found['w']}")
    gated = found["epi"] in _GATED
    n_out = y_shape[-1]
    if n_out != (n // 2 if gated else n):
        raise UnknownEstimate(f"matmul_ogs: output {y_shape} does not fit w {w_shape}"
                              f"{' and its gated epilogue' if gated else ''}")
    rows = numel(y_shape) // n_out // max(int(found["split"]), 1)
    flops = 2 * rows * n * k + (2 * rows * n_out if gated else 0)
    return OpEstimate(float(flops), _flops_note(rows, n, k, gated, y_shape, x_shape, w_shape, before),
                      *_matmul_ogs_bytes(found, y, x, w, rows), x.args.type_at(0))


def _matmul_ogs_bytes(found: "re.Match[str]", y: SubOp, x: SubOp, w: SubOp, rows: int) -> Tuple[float, str]:
    w_shape = w.args.opt_shape(0)
    experts, w_rows, n = w_shape
    w_item, x_item = itemsize(w.args.type_at(0)), itemsize(x.args.type_at(0))
    y_item = SCALAR_TYPE_CODE_ITEMSIZE.get(y.args.opt_value(1))
    if None in (w_item, x_item, y_item):
        raise UnknownEstimate("matmul_ogs: operand dtypes not recorded")
    reached = min(experts, rows) / experts
    weights = numel(w_shape) * w_item
    k = x.args.opt_shape(0)[-1]
    scales = experts * k * n // _MX_BLOCK if found["w"].startswith("mx") else 0
    total = reached * (weights + scales) + numel(x.args.opt_shape(0)) * x_item + numel(y.out_shape()) * y_item
    note = (ROUTING.format(reached=min(experts, rows), experts=experts) + f"; {SOURCE}: w {list(w_shape)} x {w_item} B"
            + (f" + {found['w']} scales (1 B per {_MX_BLOCK} weights)" if scales else "")
            + f", x {list(x.args.opt_shape(0))} read, y {list(y.out_shape())} written")
    return float(total), note


def _flops_note(rows: int, n: int, k: int, gated: bool, y_shape, x_shape, w_shape, before: Sequence[SubOp]) -> str:
    """Where the sizes came from, and the router's top-k when the op recorded it."""
    topk = next((s.args.opt_value(1) for s in before if s.name == "TopK"), None)
    routed = f", top-{topk} routing" if isinstance(topk, int) else ""
    return (f"{SOURCE}: 2 x {rows} rows x N {n} x K {k}" + (" + 2 per gated output" if gated else "")
            + f" (y {list(y_shape)} allocated, x {list(x_shape)} and w {list(w_shape)} viewed before the "
              f"launch{routed})")


_RULES.append(Rule(_MATMUL_OGS, _matmul_ogs))


# ---------------------------------------------------------------------------------- triton_kernels finalize

_FINALIZE = re.compile(r"^_finalize_matmul(?P<scatter>_scatter)?_(?P<a>[a-z0-9]+)$")


def _finalize(found: "re.Match[str]", window: Sequence[SubOp], before: Sequence[SubOp]) -> OpEstimate:
    """``_finalize_matmul[_scatter]``: sums each token's top-k expert rows of the last matmul_ogs output A
    ([split-k, ..., rows, N], the op's last allocation) into its output row. FLOPs: one add per element of A beyond
    the first of each output element (as ``moe_sum``); bytes: A read, the output (A's dtype) written and, scattering,
    the int32 index of the routed rows read."""
    _, a = _last(before, _ALLOCS)
    topk = next((s.args.opt_value(1) for s in before if s.name == "TopK"), None)
    a_shape = a.out_shape() if a is not None else None
    if not a_shape or len(a_shape) < 2 or not isinstance(topk, int) or topk < 1 or a_shape[-2] % topk:
        raise UnknownEstimate("finalize: the matmul output it reduces or the router's top-k is not among the "
                              "sub-ops recorded before the launch")
    item = SCALAR_TYPE_CODE_ITEMSIZE.get(a.args.opt_value(1))
    if item is None:
        raise UnknownEstimate("finalize: the dtype of the matmul output it reduces is not recorded")
    rows, n = a_shape[-2], a_shape[-1]
    out = rows // topk * n
    index = rows * 4 if found["scatter"] else 0
    flops = numel(a_shape) - out
    return OpEstimate(float(flops), f"{SOURCE}: sums {list(a_shape)} (allocated before the launch) over top-{topk} "
                      f"into {rows // topk} x {n}", float(numel(a_shape) * item + out * item + index),
                      f"{SOURCE}: A {list(a_shape)} read, {rows // topk} x {n} written in its dtype"
                      + (f", {rows} int32 scatter indices read" if index else ""), _TORCH_TYPES.get(found["a"]))


_TORCH_TYPES = {"bf16": "c10::BFloat16", "fp16": "c10::Half", "fp32": "float"}
_RULES.append(Rule(_FINALIZE, _finalize))


# ------------------------------------------------------------------------------------- vLLM fused_moe_kernel

_FUSED_MOE = re.compile(r"^fused_moe_kernel$")
_ACTIVATIONS = ("_and_mul", "::silu", "::gelu", "::relu")  # the gated activation run between the two GEMMs


def _fused_moe(found: "re.Match[str]", window: Sequence[SubOp], before: Sequence[SubOp]) -> OpEstimate:
    """vLLM's Triton ``fused_moe_kernel`` run by the modular ``TritonExperts`` (no ``fused_experts`` op around it):
    the three caches it views out of its workspaces before the first GEMM, ``(T, k, N)``, ``(T x k, N')`` and
    ``(T, k, K)``, give both GEMMs: ``2 x T x k x N x K`` for the first (hidden -> cache 1), ``2 x T x k x K x N'``
    for the second (cache 2 -> cache 3), told apart by the activation op recorded between them. The expert
    weights (count, dtype, layout) are not among the sub-ops: bytes unknown."""
    views = [s for s in before if s.name in _VIEWS and s.out_shape() is not None]
    triple = next((views[i:i + 3] for i in range(len(views) - 3, -1, -1)
                   if _caches(*(v.out_shape() for v in views[i:i + 3]))), None)
    if triple is None:
        raise UnknownEstimate("fused_moe_kernel: the intermediate caches (T, k, N), (T x k, N'), (T, k, K) are not "
                              "among the sub-ops recorded before the launch")
    (tokens, topk, n), (_, n2), (_, _, k) = (v.out_shape() for v in triple)
    second = any(s.name.endswith(_ACTIVATIONS) for s in window)
    flops = 2 * tokens * topk * (k * n2 if second else n * k)
    which = (f"second GEMM: 2 x {tokens} x top-{topk} x K {k} x N' {n2} (cache 2 -> cache 3)" if second else
             f"first GEMM: 2 x {tokens} x top-{topk} x N {n} x K {k} (hidden -> cache 1)")
    return OpEstimate(float(flops), f"{SOURCE}: {which}, from the cache views before the launch", None,
                      "the expert weights (count, dtype) are not among the sub-ops: bytes unknown",
                      triple[0].args.type_at(0))


def _caches(first, second, third) -> bool:
    """(T, k, N), (T x k, N'), (T, k, K): the shapes of fused MoE's three intermediate caches, in creation order."""
    return (len(first) == 3 and len(second) == 2 and len(third) == 3 and first[:2] == third[:2]
            and second[0] == first[0] * first[1] and 0 < second[1] <= first[2])


_RULES.append(Rule(_FUSED_MOE, _fused_moe))

__all__ = ["SOURCE", "ROUTING", "SubOp", "Rule", "matches", "size_kernel"]
