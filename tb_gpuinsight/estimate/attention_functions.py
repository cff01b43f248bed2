"""flash-attn's attention run as ``torch.autograd.Function`` subclasses: flash-attn 2 releases before its
``torch.library`` ops and flash-attn 3 builds that call their CUDA extension directly record no sized op inside
the Function, so the only shapes a trace holds are those the profiler records on the Function's forward, named by
its class (``FlashAttnVarlenFunc``; forks that rename it by a prefix match too), with every argument after
``ctx``: tensors with their Input Dims and types, ints, floats and bools with their Concrete Inputs; a tuple
(``window_size=(-1, -1)``) is recorded empty and a string is not recorded at all.

The same class names take different arguments in flash-attn 2 (``flash_attn/flash_attn_interface.py``:
``FlashAttnVarlenFunc.forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
softmax_scale, causal, window_size, ...)``) and flash-attn 3 (``hopper/flash_attn_interface.py``: ``(ctx, q, k, v,
cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, qv, ...)``):
:data:`LAYOUTS` lists both, and the first one whose recorded argument kinds fit (tensors where it has tensors, a
bool where it has ``causal``, ints where it has ``max_seqlen``) is read.

FLOPs are :mod:`.attention`'s: 4 x D per attended (query, key) pair and query head, flash-attn's bottom-right
causal mask. Varlen lengths come from ``cu_seqlens`` when its values are recorded (exact); the profiler records
only its shape, so otherwise the tightest packing of the recorded token totals at ``max_seqlen`` gives an upper
bound. The backward node (``<Class>Backward``) records only grad_output: `analysis/kernels/backward_sizing.py`
sizes its kernels at 2.5x this forward.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .args import OpArgs, UnknownEstimate, numel, read_bytes
from .attention import DENSE, Mask, attended_pairs, attention_flops, causal_mask, packed_lengths
from .autograd_functions import refuse_backward
from .registry import register_suffix

V2 = "flash-attn 2"
V3 = "flash-attn 3"
SOURCE = ("flash-attn 2 flash_attn/flash_attn_interface.py and flash-attn 3 hopper/flash_attn_interface.py "
          "Function.forward arguments; first principles: 4 x D per attended (query, key) pair and query head, "
          "bottom-right causal mask, varlen pairs per sequence; q, k, v (or the packed tensors) read, out and the "
          "float32 log-sum-exp written")
UPPER = "upper bound: "
WINDOW_NOTE = "window_size is a Python tuple the profiler records empty: no sliding window assumed"
PACKED_NOTE = ("inferred from the recorded token totals and max_seqlen (cu_seqlens values are not recorded): "
               "sequences assumed packed at max_seqlen")
SEQUSED_NOTE = "seqused_q/k may shorten each sequence further"
CAUSAL_NOTE = "dense count, causal not recorded"
CHUNK_NOTE = "attention_chunk {} limits each query to its chunk (not modelled)"


@dataclass(frozen=True)
class Layout:
    """Where one library version's ``Function.forward`` keeps its arguments (indices after ``ctx``)."""

    version: str
    causal: int
    packed: str = ""  # "": q, k, v at 0, 1, 2; "kv": q at 0, kv at 1; "qkv": qkv at 0
    cu_seqlens: Optional[int] = None  # cu_seqlens_q, cu_seqlens_k next ("qkv": one cu_seqlens for both)
    max_seqlen: Optional[int] = None  # max_seqlen_q, max_seqlen_k next ("qkv": one max_seqlen)
    window: Optional[int] = None  # window_size (left, right)
    qv: Optional[int] = None  # flash-attn 3's second query part (MLA): scores = q k^T + qv v^T
    seqused: Optional[int] = None  # flash-attn 3's seqused_q, seqused_k
    heads_q: Optional[int] = None  # flash-attn 3 qkv-packed [b, s, Hq + 2 Hk, D]: num_heads_q
    chunk: Optional[int] = None  # flash-attn 3's attention_chunk (> 0: each query attends its chunk only)

    @property
    def tensors(self) -> tuple[int, ...]:
        """Indices of the attention operands."""
        return {"": (0, 1, 2), "kv": (0, 1), "qkv": (0,)}[self.packed]

    def scalars(self) -> tuple[int, ...]:
        """Indices that hold ints in this layout (max_seqlen_q/k)."""
        if self.max_seqlen is None:
            return ()
        return (self.max_seqlen,) if self.packed == "qkv" else (self.max_seqlen, self.max_seqlen + 1)


# flash-attn 2 keeps its layout since 2.0 (softcap, alibi_slopes... were added after window_size);
# flash-attn 3 has no kv-packed or varlen qkv-packed Function.
LAYOUTS: dict[str, tuple[Layout, ...]] = {
    "FlashAttnFunc": (Layout(V2, causal=5, window=6), Layout(V3, causal=4, qv=5, window=9, chunk=10)),
    "FlashAttnVarlenFunc": (Layout(V2, causal=9, cu_seqlens=3, max_seqlen=5, window=10),
                            Layout(V3, causal=10, cu_seqlens=3, max_seqlen=7, window=15, qv=11, seqused=5,
                                   chunk=16)),
    "FlashAttnQKVPackedFunc": (Layout(V2, causal=3, packed="qkv", window=4),
                               Layout(V3, causal=2, packed="qkv", window=6, heads_q=10, chunk=7)),
    "FlashAttnVarlenQKVPackedFunc": (Layout(V2, causal=5, packed="qkv", cu_seqlens=1, max_seqlen=2, window=6),),
    "FlashAttnKVPackedFunc": (Layout(V2, causal=4, packed="kv", window=5),),
    "FlashAttnVarlenKVPackedFunc": (Layout(V2, causal=8, packed="kv", cu_seqlens=2, max_seqlen=4, window=9),),
}


@dataclass(frozen=True)
class Problem:
    """One Function call: q [..., Hq, D], k [..., Hk, D], v [..., Hk, Dv] and the (Sq, Sk) lengths per batch."""

    q: tuple[int, ...]
    k: tuple[int, ...]
    v: tuple[int, ...]
    lengths: tuple[tuple[int, int], ...]  # (Sq, Sk) of each sequence (dense: one, counted `batch` times)
    batch: int
    d_qv: int  # qv's head dim (0 without qv)
    mask: Mask
    notes: tuple[str, ...]  # why the FLOPs are an upper bound ("" clauses left out)


def family_of(op: str) -> str:
    """The flash-attn class name ``op`` ends with (the longest: ``FlashAttnVarlenFunc`` before ``...Func``)."""
    return max((name for name in LAYOUTS if op.endswith(name)), key=len)


def layout_of(op: str, args: OpArgs) -> Layout:
    """The first layout of ``op``'s family whose argument kinds fit the recorded ones."""
    layouts = LAYOUTS[family_of(op)]
    for layout in layouts:
        if _fits(layout, args):
            return layout
    versions = " or ".join(layout.version for layout in layouts)
    raise UnknownEstimate(f"{op}: the recorded arguments fit no {versions} {family_of(op)}.forward layout "
                          "(q, k, v tensors, then causal and max_seqlen where that version keeps them)")


def _fits(layout: Layout, args: OpArgs) -> bool:
    if not all(args.is_tensor(i) for i in layout.tensors):
        return False
    if layout.cu_seqlens is not None and not args.is_tensor(layout.cu_seqlens):
        return False
    causal = args.opt_value(layout.causal)
    if args.type_at(layout.causal) != "Scalar" or (causal is not None and not isinstance(causal, bool)):
        return False
    values = [args.opt_value(i) for i in layout.scalars()]
    return all(args.type_at(i) == "Scalar" for i in layout.scalars()) and \
        all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values)


def problem(op: str, args: OpArgs) -> Problem:
    """Read one Function call (:class:`Problem`); raises UnknownEstimate with what does not fit."""
    layout = layout_of(op, args)
    q, k, v = _operands(layout, args)
    varlen = layout.cu_seqlens is not None
    rank = 3 if varlen else 4
    if not all(len(s) == rank for s in (q, k, v)):
        raise UnknownEstimate(f"{op}: q {q}, k {k}, v {v} are not {'[tokens' if varlen else '[batch, seq'}, heads, "
                              "dim] (a paged KV cache is not modelled)")
    if q[-1] != k[-1] or k[-2] != v[-2] or k[-2] == 0 or q[-2] % k[-2]:
        raise UnknownEstimate(f"{op}: inconsistent heads or head dims: q {q}, k {k}, v {v}")
    mask, notes = _mask(layout, args)
    qv = args.opt_shape(layout.qv) if layout.qv is not None else None
    if varlen:
        lengths, more = _varlen_lengths(layout, args, q[0], k[0])
        return Problem(q, k, v, lengths, 1, qv[-1] if qv else 0, mask, more + notes)
    return Problem(q, k, v, ((q[1], k[1]),), q[0], qv[-1] if qv else 0, mask, notes)


def _operands(layout: Layout, args: OpArgs) -> tuple[tuple[int, ...], ...]:
    """(q, k, v) shapes, unpacking kv [..., 2, Hk, D] and qkv [..., 3, H, D] or [b, s, Hq + 2 Hk, D]."""
    if layout.packed == "":
        return tuple(args.shape(i, name) for i, name in ((0, "q"), (1, "k"), (2, "v")))
    if layout.packed == "kv":
        kv = args.shape(1, "kv")
        if len(kv) < 3 or kv[-3] != 2:
            raise UnknownEstimate(f"kv {kv} is not [..., 2, heads, dim]")
        return args.shape(0, "q"), kv[:-3] + kv[-2:], kv[:-3] + kv[-2:]
    qkv = args.shape(0, "qkv")
    heads_q = args.opt_value(layout.heads_q) if layout.heads_q is not None else None
    if len(qkv) == 4 and layout.cu_seqlens is None and isinstance(heads_q, int) and 0 < heads_q < qkv[2]:
        heads_k = (qkv[2] - heads_q) // 2
        return qkv[:2] + (heads_q, qkv[3]), qkv[:2] + (heads_k, qkv[3]), qkv[:2] + (heads_k, qkv[3])
    if len(qkv) < 3 or qkv[-3] != 3:
        raise UnknownEstimate(f"qkv {qkv} is not [..., 3, heads, dim] (a [b, s, Hq + 2 Hk, dim] qkv needs "
                              "num_heads_q recorded)")
    one = qkv[:-3] + qkv[-2:]
    return one, one, one


def _mask(layout: Layout, args: OpArgs) -> tuple[Mask, tuple[str, ...]]:
    """flash-attn's mask: bottom-right causal, a window from a recorded list; notes where a flag is unknown."""
    causal = args.opt_value(layout.causal)
    window = args.opt_value(layout.window) if layout.window is not None else None
    left = right = None
    notes = []
    if isinstance(window, (list, tuple)) and len(window) == 2 and all(isinstance(w, int) for w in window):
        left, right = (w if w >= 0 else None for w in window)
    else:
        notes.append(WINDOW_NOTE)
    chunk = args.opt_value(layout.chunk) if layout.chunk is not None else None
    if isinstance(chunk, int) and chunk > 0:
        notes.append(CHUNK_NOTE.format(chunk))
    if causal is None:
        notes.append(CAUSAL_NOTE)
        return DENSE, tuple(notes)
    if causal:
        return causal_mask(bottom_right=True, window_left=left), tuple(notes)
    return Mask(left, right, bottom_right=True), tuple(notes)


def _varlen_lengths(layout: Layout, args: OpArgs, total_q: int, total_k: int
                    ) -> tuple[tuple[tuple[int, int], ...], tuple[str, ...]]:
    """(Sq, Sk) per sequence: from recorded cu_seqlens values (exact), else the tightest packing (a bound)."""
    at = layout.cu_seqlens
    count = args.shape(at, "cu_seqlens")[0] - 1
    cu_k = at if layout.packed == "qkv" else at + 1
    offsets = [args.opt_value(at), args.opt_value(cu_k)]
    seqused = layout.seqused is not None and any(args.is_tensor(layout.seqused + j) for j in (0, 1))
    notes = (SEQUSED_NOTE,) if seqused else ()
    if all(_offsets(o, count) for o in offsets):
        q_lens, k_lens = ([b - a for a, b in zip(o, o[1:])] for o in offsets)
        return tuple(zip(q_lens, k_lens)), notes
    longest = [args.opt_value(i) for i in layout.scalars()] * (2 if layout.packed == "qkv" else 1)
    if count <= 0 or not all(isinstance(x, int) and x > 0 for x in longest[:2]):
        raise UnknownEstimate(f"varlen attention: max_seqlen {longest[:2]} or {count} sequences not usable "
                              "(Concrete Inputs not recorded?)")
    lengths = zip(packed_lengths(total_q, longest[0], count), packed_lengths(total_k, longest[1], count))
    return tuple(lengths), (PACKED_NOTE,) + notes


def _offsets(value: Any, count: int) -> bool:
    """A recorded cu_seqlens: count + 1 non-decreasing ints."""
    return isinstance(value, (list, tuple)) and len(value) == count + 1 and all(
        isinstance(x, int) and not isinstance(x, bool) for x in value) and list(value) == sorted(value)


def _flops(op: str, args: OpArgs, out_dims: Any) -> tuple[int, str]:
    refuse_backward(op)
    p = problem(op, args)
    pairs = sum(attended_pairs(sq, sk, p.mask) for sq, sk in p.lengths)
    flops = attention_flops(p.batch * p.q[-2], pairs, p.q[-1] + p.d_qv, p.v[-1], False)
    return flops, (UPPER + "; ".join(p.notes)) if p.notes else ""


def _bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Every recorded tensor read once (q, k, v or the packed tensors, cu_seqlens, descales, alibi slopes), out
    [..., Hq, Dv] written in q's dtype (bf16 for FP8 inputs, as flash-attn 3 writes) and the float32 log-sum-exp
    per query and head."""
    refuse_backward(op)
    p = problem(op, args)
    size = next((b for i, _, b in tensors if i == 0 and b), 2)
    queries = numel(p.q[:-1])  # tokens x query heads
    return float(read_bytes(tensors) + queries * (p.v[-1] * (2 if size == 1 else size) + 4))


for _name in LAYOUTS:
    register_suffix(_name, "attention", flops=_flops, bytes=_bytes, source=SOURCE)
    register_suffix(_name + "Backward", "attention", flops=_flops, bytes=_bytes, source=SOURCE)

__all__ = ["LAYOUTS", "Layout", "Problem", "SOURCE", "V2", "V3", "family_of", "layout_of", "problem"]
