"""Estimated DRAM traffic (bytes read + written) of one operator, from the shapes in a trace.

The model (documented here because every number in the UI rests on it):

* **Inputs**: every tensor argument is read once: ``numel x itemsize`` summed over the tensor
  arguments (tensors of a TensorList included). A 0-dim tensor counts as one element. Scalars,
  lists of ints and None arguments count nothing. A TensorList element takes the op's compute
  dtype (its first tensor's dtype) because Kineto types the list only as ``"TensorList"``; when
  the op has no other tensor, 4 bytes (float32) are assumed.
* **Output**: written once, ``numel x itemsize`` of the output the op produces. Its dtype follows
  torch's type promotion (``torch.result_type``: dimensioned tensors decide, a 0-dim tensor or a
  Python scalar only when of a higher category; ``bf16 * fp32`` writes fp32, ``bf16 * 0-dim double``
  writes bf16); comparisons write bool. Per op class:

  - ``out=`` variants (``aten::mul`` recorded with the ``.out`` overload's argument count): the
    ``out`` tensor is written, never read; the other tensors are read.
  - GEMMs (mm, addmm, bmm, baddbmm, addbmm, _scaled_mm, _int_mm, linear, matmul): ``M x N``
    (times the batch); an explicit ``out=`` tensor argument is counted as this write, not as
    a read. ``_int_mm`` writes int32.
  - Convolutions: the output shape computed from input, weight, stride, padding, dilation
    (and output_padding/groups when transposed). Backward: each gradient selected by
    ``output_mask`` reads grad_output once (dgrad, wgrad and the bias reduction are separate kernels),
    grad_input also reads the weight and grad_weight the input; grad_input/grad_weight/grad_bias are
    written once. When the mask is not recorded, grad_input and grad_weight are assumed.
  - Attention: forward writes ``out`` (query's shape with value's head size); backward writes
    grad_q, grad_k, grad_v (the shapes of q, k, v). Softmax statistics are ignored (they are
    ``head_dim`` times smaller than ``out``).
  - In-place fills (``fill_``, ``zero_``, ``normal_``, ...): only the write of ``self``.
  - ``copy_``: read ``src`` and write ``self``, in their own dtypes (a ``copy_`` into a slice writes
    the slice: ``self`` is recorded with the view's shape). ``_to_copy`` writes in its ``dtype`` arg.
  - Indexed in-place writes (``index_put_``, ``index_copy_``, ``index_add_``, ``scatter_``,
    ``scatter_add_``, ``scatter_reduce_``, ``masked_scatter_``, ``put_``): the source and the
    indices are read and only the written slice of ``self`` is written (read too when the op
    accumulates), never the whole destination: a KV-cache update writes a few hundred KB into a
    multi-GB cache. ``scatter*`` read one source element per index; ``masked_scatter_`` reads its
    whole mask; ``index_put_``'s index list is recorded without shapes, so its indices count only
    when a trace has them.
  - ``upsample_*``/interpolate: input read, output written with the spatial size taken from
    ``output_size``, else from the scale factors (``floor(in x scale)``).
  - ``cat``/``stack``: output equals the sum of the inputs.
  - ``embedding``: the gathered rows are read and written (``indices.numel x dim``), plus
    the indices. ``index_select``/``gather``/``take``/``index``: likewise, only the selected
    elements are read (and written), plus the index tensors.
  - Reductions (sum, mean, amax, var, norm, softmax-free losses, ...): inputs only; the output
    is much smaller than the input and is ignored.
  - View and metadata ops (view, transpose, expand, slice, empty...): 0 bytes, they move no data.
  - Everything else (elementwise, unary, binary, normalisation...): the output has the
    broadcast shape of the tensor inputs; when the inputs do not broadcast (batch_norm's
    per-channel vectors, index ops), the largest input's shape.
  - When an output shape cannot be derived (e.g. ``cudnn_convolution`` without recorded
    stride in pre-2024 traces), only the inputs are counted.

* **Custom ops** (a namespace other than aten/prim): vLLM's KV-cache writes
  (``reshape_and_cache``, ``reshape_and_cache_flash``, ``concat_and_cache_mla``) read key/value and
  the slot mapping and write each token once into the cache, in the cache's dtype. Any other custom
  op has no byte rule: its inputs except the ones it mutates (from its schema when torch has it
  loaded; else, for an op whose name says it updates or looks up into something (``cache``,
  ``update``, ``write``, ``embedding``, ``lookup``, a trailing ``_``), the tensors over 16x larger than
  all the smaller inputs together: caches, embedding tables and their optimizer state, touched only
  where indexed) plus its outputs when their shape is known, and the reason says "partial:".
* Caches are ignored: every operand is assumed to come from and go to DRAM once, so the number
  is a lower bound for ops that re-read operands (large GEMM tiles) and an upper bound when the
  inputs are still in L2 from the previous kernel.
* Unknown (``None``) with a reason when the op has no recorded shapes, no tensor arguments, or
  a tensor whose dtype is not recorded. A figure that leaves something out has a reason that starts
  with "partial:" (an exact one has "").

Memcpy/memset events carry their own ``bytes`` arg and are not handled here. Inductor kernels
may carry ``kernel_num_gb``: :func:`bytes_from_inductor` reads it.

This module also holds the argument view (:class:`OpArgs`) and the shape helpers shared with
``flops.py`` (conv geometry, GEMM output shapes), so both estimates agree on the same shapes.
"""
from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from typing import Any, Iterator

from .dtypes import dtype_name, is_floating_type, is_tensor_type, itemsize, result_dtype, size_of_dtype_name


class UnknownEstimate(Exception):
    """Raised inside an estimator when a number cannot be derived; the message is the reason."""


_NOT_RECORDED = object()

# ScalarType enum codes as Concrete Inputs print a dtype argument (c10/core/ScalarType.h).
_SCALAR_TYPE_CODE_ITEMSIZE = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1,
    12: 1, 13: 1, 14: 4, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1,
}


def _is_shape(obj: Any) -> bool:
    """A tensor shape: a list/tuple of non-negative ints (bools excluded)."""
    return isinstance(obj, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in obj)


def _parse_concrete(text: Any) -> Any:
    """Decode one Concrete Inputs entry ("1", "0.", "False", "[1, 141]") to a Python value."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped == "":
        return _NOT_RECORDED
    if len(stripped) > 10_000:  # guard literal_eval against pathological strings
        return stripped
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    try:
        return float(stripped)  # "inf", "nan"
    except ValueError:
        return stripped.strip("'\"")  # bare strings such as a padding mode "same"


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a shape (1 for a 0-dim tensor)."""
    return math.prod(shape)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy-style broadcast of shapes, or None when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


class OpArgs:
    """Read-only view of one cpu_op's ``Input Dims`` / ``Input type`` / ``Concrete Inputs``."""

    def __init__(self, dims: Any, types: Any, concrete: Any) -> None:
        self.dims = tuple(dims) if isinstance(dims, (list, tuple)) else ()
        self.types = tuple(types) if isinstance(types, (list, tuple)) else ()
        self.concrete = tuple(concrete) if isinstance(concrete, (list, tuple)) else ()

    def __len__(self) -> int:
        return len(self.dims)

    def type_at(self, i: int) -> str | None:
        """The recorded type string of argument i (None when not recorded)."""
        value = self.types[i] if 0 <= i < len(self.types) else None
        return value if isinstance(value, str) else None

    def is_tensor(self, i: int) -> bool:
        """Argument i is a single tensor (types recorded) or a non-empty int list (untyped)."""
        if not 0 <= i < len(self.dims) or not _is_shape(self.dims[i]):
            return False
        type_str = self.type_at(i)
        if type_str is None:  # Jan-2021 traces record dims without types
            return len(self.dims[i]) > 0
        return is_tensor_type(type_str)

    def shape(self, i: int, what: str = "") -> tuple[int, ...]:
        """Shape of tensor argument i; raises UnknownEstimate when it is not a tensor."""
        if not self.is_tensor(i):
            label = what or f"argument {i}"
            raise UnknownEstimate(f"{label} is not a recorded tensor shape")
        return tuple(self.dims[i])

    def opt_shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument i, or None (absent, None, or not a tensor)."""
        return tuple(self.dims[i]) if self.is_tensor(i) else None

    def value(self, i: int, what: str = "") -> Any:
        """Concrete value of scalar argument i; raises UnknownEstimate when not recorded."""
        raw = self.concrete[i] if 0 <= i < len(self.concrete) else _NOT_RECORDED
        parsed = _parse_concrete(raw) if raw is not _NOT_RECORDED else raw
        if parsed is _NOT_RECORDED:
            label = what or f"argument {i}"
            raise UnknownEstimate(f"{label} not recorded (trace has no Concrete Inputs)")
        return parsed

    def opt_value(self, i: int, default: Any = None) -> Any:
        """Concrete value of argument i, or ``default`` when it is not recorded."""
        try:
            return self.value(i)
        except UnknownEstimate:
            return default

    def int_list(self, i: int, n: int, what: str) -> tuple[int, ...]:
        """An int-list argument (stride, padding...) expanded to n entries."""
        value = self.value(i, what)
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise UnknownEstimate(f"{what} is not an int list: {value!r}")
        if len(value) == 1:
            value = list(value) * n
        if len(value) != n:
            raise UnknownEstimate(f"{what} has {len(value)} entries, expected {n}")
        return tuple(value)

    def flag(self, i: int, what: str) -> bool:
        """A bool argument."""
        value = self.value(i, what)
        if isinstance(value, str):
            return value.lower() == "true"
        return bool(value)

    def tensor_items(self) -> Iterator[tuple[int, tuple[int, ...], int | None]]:
        """(arg index, shape, itemsize) of every tensor, TensorList members included."""
        fallback = self.compute_itemsize()
        for i, dim in enumerate(self.dims):
            if self.is_tensor(i):
                type_str = self.type_at(i)
                yield i, tuple(dim), (itemsize(type_str) if type_str is not None else None)
            elif self._is_tensor_list(i):
                for member in dim:
                    if _is_shape(member):
                        yield i, tuple(member), fallback or 4

    def _is_tensor_list(self, i: int) -> bool:
        dim = self.dims[i]
        return (self.type_at(i) in ("TensorList", None) and isinstance(dim, (list, tuple))
                and len(dim) > 0 and all(isinstance(m, (list, tuple)) for m in dim))

    def compute_dtype(self) -> str | None:
        """Type string of the first floating tensor input, else of the first tensor input."""
        first = None
        for i in range(len(self.dims)):
            if self.is_tensor(i) and self.type_at(i) is not None:
                if is_floating_type(self.type_at(i)):
                    return self.type_at(i)
                first = first or self.type_at(i)
        return first

    def compute_itemsize(self) -> int | None:
        """Item size of :meth:`compute_dtype`."""
        dtype = self.compute_dtype()
        return itemsize(dtype) if dtype else None


# --------------------------------------------------------------------------- conv geometry

@dataclass(frozen=True)
class ConvSpec:
    """Where each convolution parameter sits in an op's argument list (None: absent/default)."""

    stride: int | None = None
    padding: int | None = None
    dilation: int | None = None
    transposed: int | bool = False  # an index, or a constant fixed by the op
    output_padding: int | None = None
    groups: int | None = None
    bias: int | None = None


_CONV_SPECS: dict[str, ConvSpec] = {}


def _specs(names: tuple[str, ...], spec: ConvSpec) -> None:
    for name in names:
        _CONV_SPECS[name] = spec


_specs(("convolution", "_convolution", "convolution_overrideable"),
       ConvSpec(bias=2, stride=3, padding=4, dilation=5, transposed=6, output_padding=7, groups=8))
_specs(("conv1d", "conv2d", "conv3d"), ConvSpec(bias=2, stride=3, padding=4, dilation=5, groups=6))
_specs(("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"),
       ConvSpec(bias=2, stride=3, padding=4, output_padding=5, groups=6, dilation=7, transposed=True))
_specs(("cudnn_convolution",), ConvSpec(padding=2, stride=3, dilation=4, groups=5))
_specs(("cudnn_convolution_transpose",),
       ConvSpec(padding=2, output_padding=3, stride=4, dilation=5, groups=6, transposed=True))
_specs(("cudnn_convolution_relu",), ConvSpec(bias=2, stride=3, padding=4, dilation=5, groups=6))
_specs(("cudnn_convolution_add_relu",), ConvSpec(bias=4, stride=5, padding=6, dilation=7, groups=8))
_specs(("miopen_convolution", "miopen_depthwise_convolution", "mkldnn_convolution"),
       ConvSpec(bias=2, padding=3, stride=4, dilation=5, groups=6))
_specs(("miopen_convolution_transpose",),
       ConvSpec(bias=2, padding=3, output_padding=4, stride=5, dilation=6, groups=7, transposed=True))
_specs(("_slow_conv2d_forward", "slow_conv3d_forward", "thnn_conv2d"),
       ConvSpec(bias=3, stride=4, padding=5))
_specs(("slow_conv_transpose2d", "slow_conv_transpose3d"),
       ConvSpec(bias=3, stride=4, padding=5, output_padding=6, dilation=7, transposed=True))
_specs(("_convolution_mode",), ConvSpec(bias=2, stride=3, padding=4, dilation=5, groups=6))

CONV_FORWARD_OPS = frozenset(_CONV_SPECS)


@dataclass(frozen=True)
class ConvGeometry:
    """Batched input/weight shapes of a forward convolution and whether it is transposed."""

    x: tuple[int, ...]
    w: tuple[int, ...]
    transposed: bool
    unbatched: bool


def conv_geometry(op: str, args: OpArgs) -> ConvGeometry:
    """Input and weight shapes (batch added to unbatched input) and the transposed flag."""
    spec = _CONV_SPECS[op]
    x, w = args.shape(0, "conv input"), args.shape(1, "conv weight")
    if len(w) < 3:
        raise UnknownEstimate(f"conv weight shape {w} has no spatial dims")
    unbatched = len(x) == len(w) - 1
    if unbatched:  # conv2d(C,H,W): the op adds the batch dim before convolving
        x = (1,) + x
    if len(x) != len(w):
        raise UnknownEstimate(f"conv input {x} and weight {w} ranks differ")
    transposed = spec.transposed
    if not isinstance(transposed, bool):
        transposed = args.flag(transposed, "conv 'transposed' flag")
    return ConvGeometry(x, w, transposed, unbatched)


def conv_output_shape(op: str, args: OpArgs, geo: ConvGeometry) -> tuple[int, ...]:
    """Output shape of a forward convolution (batched), from the recorded parameters."""
    spec = _CONV_SPECS[op]
    n = len(geo.x) - 2
    stride = args.int_list(spec.stride, n, "conv stride") if spec.stride is not None else (1,) * n
    dilation = (args.int_list(spec.dilation, n, "conv dilation")
                if spec.dilation is not None else (1,) * n)
    groups = _int(args.value(spec.groups, "conv groups")) if spec.groups is not None else 1
    spatial = _conv_spatial(args, spec, geo, n, stride, dilation)
    channels = geo.w[1] * groups if geo.transposed else geo.w[0]
    out = (geo.x[0], channels) + spatial
    if any(d <= 0 for d in out[2:]):
        raise UnknownEstimate(f"conv output shape {out} is empty or negative")
    return out


def _conv_spatial(args: OpArgs, spec: ConvSpec, geo: ConvGeometry, n: int,
                  stride: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[int, ...]:
    """Spatial output sizes (torch's formulas, incl. "same"/"valid" padding strings)."""
    pad_value = args.value(spec.padding, "conv padding") if spec.padding is not None else 0
    kernel, size = geo.w[2:], geo.x[2:]
    if isinstance(pad_value, str):
        if pad_value == "same":
            return tuple(size)
        if pad_value != "valid":
            raise UnknownEstimate(f"conv padding mode {pad_value!r} not understood")
        padding = (0,) * n
    else:
        padding = args.int_list(spec.padding, n, "conv padding") if spec.padding is not None \
            else (0,) * n
    if geo.transposed:
        out_pad = (args.int_list(spec.output_padding, n, "conv output_padding")
                   if spec.output_padding is not None else (0,) * n)
        return tuple((size[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1)
                     + out_pad[i] + 1 for i in range(n))
    return tuple((size[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                 for i in range(n))


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnknownEstimate(f"expected an int, got {value!r}")
    return value


# --------------------------------------------------------------------------- GEMM shapes

# op -> (indices of the two matrix operands, number of tensor inputs before an out= tensor)
GEMM_OPERANDS: dict[str, tuple[tuple[int, int], int]] = {
    "mm": ((0, 1), 2), "_int_mm": ((0, 1), 2), "addmm": ((1, 2), 3),
    "_addmm_activation": ((1, 2), 3), "bmm": ((0, 1), 2), "baddbmm": ((1, 2), 3),
    "addbmm": ((1, 2), 3), "_scaled_mm": ((0, 1), 6),
}


def gemm_output_shape(op: str, args: OpArgs) -> tuple[int, ...]:
    """Output shape of a GEMM-family op from its operand shapes."""
    if op == "linear":
        x, w = args.shape(0, "linear input"), args.shape(1, "linear weight")
        _check_inner(x, w[-1:] + w[:1] if len(w) == 2 else w)
        return x[:-1] + ((w[0],) if len(w) == 2 else ())
    if op == "matmul":
        return matmul_output_shape(args.shape(0, "matmul self"), args.shape(1, "matmul other"))
    (ia, ib), _ = GEMM_OPERANDS[op]
    a, b = args.shape(ia, "first matrix"), args.shape(ib, "second matrix")
    _check_inner(a, b)
    if op == "addbmm":
        return (a[-2], b[-1])
    return a[:-1] + (b[-1],)


def _check_inner(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """GEMM operands must share the inner dim (a[..., K] @ b[..., K, N] or b[K])."""
    if not a or not b:
        raise UnknownEstimate("GEMM operand is 0-dim")
    inner_b = b[-2] if len(b) >= 2 else b[0]
    if a[-1] != inner_b:
        raise UnknownEstimate(f"GEMM operand shapes {a} and {b} are inconsistent (corrupted record?)")


def matmul_output_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """torch.matmul's output shape (vector operands drop their dim)."""
    if not a or not b:
        raise UnknownEstimate("matmul of a 0-dim tensor")
    _check_inner(a, b)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    if batch is None:
        raise UnknownEstimate(f"matmul batch dims {a} and {b} do not broadcast")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


# --------------------------------------------------------------------------- op classes

VIEW_OPS = frozenset({
    "view", "_unsafe_view", "as_strided", "transpose", "t", "permute", "expand", "expand_as",
    "slice", "select", "unsqueeze", "squeeze", "detach", "alias", "narrow", "split",
    "split_with_sizes", "chunk", "unbind", "unflatten", "view_as", "numpy_T", "_reshape_alias",
    "lift_fresh", "empty", "empty_like", "empty_strided", "resize_", "set_", "as_strided_",
    "_nested_view_from_buffer", "real", "imag", "view_as_real", "view_as_complex", "diagonal",
    "movedim", "swapaxes", "transpose_", "unsqueeze_", "squeeze_", "t_", "mT", "mH",
})
FILL_OPS = frozenset({
    "fill_", "zero_", "normal_", "uniform_", "random_", "exponential_", "bernoulli_",
    "geometric_", "log_normal_", "cauchy_", "zeros_like", "ones_like", "full_like",
    "rand_like", "randn_like",
})
REDUCTION_OPS = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "aminmax", "prod", "norm", "linalg_vector_norm",
    "var", "std", "var_mean", "std_mean", "argmax", "argmin", "all", "any", "logsumexp",
    "count_nonzero", "nansum", "nanmean", "mse_loss", "l1_loss", "nll_loss", "nll_loss_forward",
    "nll_loss2d_forward", "cross_entropy_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div", "topk",
    "_foreach_norm", "dot", "vdot", "equal",
})
CONCAT_OPS = frozenset({"cat", "_cat", "concat", "concatenate", "stack", "hstack", "vstack"})
ATTENTION_FORWARD_OPS = frozenset({
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math", "_flash_attention_forward", "_efficient_attention_forward",
    "_cudnn_attention_forward",
})
ATTENTION_BACKWARD_OPS = frozenset({
    "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "_flash_attention_backward",
    "_scaled_dot_product_fused_attention_overrideable_backward",
    "_efficient_attention_backward", "_cudnn_attention_backward",
})
CONV_BACKWARD_OPS = frozenset({
    "convolution_backward", "cudnn_convolution_backward", "cudnn_convolution_backward_input",
    "cudnn_convolution_backward_weight",
})


@functools.lru_cache(maxsize=4096)
def schema_arg_limit(op: str) -> int | None:
    """Most arguments any overload of ``aten::<op>`` takes (None: unknown or no torch).

    Kineto records every schema argument, keyword-only ones included, so a longer
    ``Input Dims`` means a corrupted record: some 2022 traces append other ops' shapes.
    """
    if not op or "::" in op or not op.replace("_", "").isalnum():
        return None
    try:
        import torch  # lazy: optional dependency
        packet = getattr(torch.ops.aten, op)
        return max(len(getattr(packet, o)._schema.arguments) for o in packet.overloads())
    except Exception:
        return None


def check_arg_count(op: str, args: OpArgs) -> None:
    """Raise UnknownEstimate when more arguments are recorded than the op's schema has."""
    limit = schema_arg_limit(op)
    if limit is not None and len(args.dims) > limit:
        raise UnknownEstimate(
            f"shapes look corrupted: {len(args.dims)} arguments recorded, aten::{op} takes at most {limit}")


def op_key(name: Any) -> str:
    """``"aten::addmm"`` -> ``"addmm"``; other namespaces keep theirs (``"fbgemm::x"``)."""
    text = name if isinstance(name, str) else ""
    if text.startswith("aten::"):
        text = text[len("aten::"):]
    return text.split(".", 1)[0] if "::" not in text else text


# --------------------------------------------------------------------------- estimate

def estimate_bytes(name: str, dims: Any, types: Any, concrete: Any,
                   out_dims: Any = None) -> tuple[float | None, str]:
    """Estimated DRAM bytes (read + write) of one op and "" or the reason it is unknown or partial.

    ``out_dims`` optionally gives the op's output shape when the caller knows it from
    elsewhere; it is used only where the inputs do not determine the output. A known figure that
    leaves something out carries a reason starting with "partial:". Never raises.
    """
    try:
        op, args = op_key(name), OpArgs(dims, types, concrete)
        if _is_custom(name):
            return _custom_bytes(op, args, out_dims)
        return _estimate_bytes(op, args, out_dims), ""
    except UnknownEstimate as exc:
        return None, str(exc)
    except Exception as exc:  # a malformed trace must not break the caller
        return None, f"byte estimate failed: {type(exc).__name__}: {exc}"[:200]


def _checked_tensors(op: str, args: OpArgs) -> list:
    if not args.dims:
        raise UnknownEstimate("no input shapes recorded")
    check_arg_count(op, args)
    tensors = list(args.tensor_items())
    if not tensors:
        raise UnknownEstimate("no tensor inputs recorded")
    if any(size is None for _, _, size in tensors):
        raise UnknownEstimate("tensor dtype not recorded")
    return tensors


def _estimate_bytes(op: str, args: OpArgs, out_dims: Any) -> float:
    if args.dims and op in VIEW_OPS:
        return 0.0
    tensors = _checked_tensors(op, args)
    out_size = args.compute_itemsize() or 4
    special = _special_bytes(op, args, tensors, out_size, out_dims)
    if special is not None:
        return float(special)
    out_positions = out_arg_positions(op, len(args.dims))
    if out_positions:  # out= variants: the out tensor is written, never read
        return float(sum(numel(s) * b for i, s, b in tensors if i not in out_positions)
                     + sum(numel(s) * b for i, s, b in tensors if i in out_positions))
    read = sum(numel(s) * b for _, s, b in tensors)
    if op in REDUCTION_OPS:
        return float(read)
    shapes = [s for _, s, _ in tensors]
    out = broadcast_shapes(*shapes)
    if out is None:
        out = max(shapes, key=numel)
    return float(read + numel(out) * _result_itemsize(op, args, tensors, out_size))


def _result_itemsize(op: str, args: OpArgs, tensors: list, fallback: int) -> int:
    """Item size of an elementwise result: bool for comparisons, else torch's type promotion."""
    if op in COMPARISON_OPS:
        return 1
    named = [(dtype_name(args.type_at(i)), len(s)) for i, s, _ in tensors if args.type_at(i) is not None]
    if not named or any(name is None for name, _ in named):
        return fallback
    result = result_dtype(named, _scalar_category(args))
    return size_of_dtype_name(result) or fallback if result else fallback


def _scalar_category(args: OpArgs) -> int | None:
    """Highest category (0 bool, 1 int, 2 float) of the recorded Python scalar arguments."""
    best = None
    for i in range(len(args.dims)):
        if args.type_at(i) != "Scalar":
            continue
        value = args.opt_value(i)
        kind = (0 if isinstance(value, bool) else 1 if isinstance(value, int)
                else 2 if isinstance(value, float) else None)
        if kind is not None and (best is None or kind > best):
            best = kind
    return best


COMPARISON_OPS = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_not", "logical_and",
    "logical_or", "logical_xor", "isin", "signbit",
})


@functools.lru_cache(maxsize=4096)
def out_arg_positions(op: str, nargs: int) -> frozenset[int]:
    """Positions of ``out=`` tensors when the recorded argument count selects an out overload.

    Kineto names ``aten::mul.out`` just ``aten::mul``; the overload is the one whose schema has
    ``nargs`` arguments. Empty when no torch, no such overload, or the overloads of that length disagree.
    """
    if not op or "::" in op or not op.replace("_", "").isalnum():
        return frozenset()
    try:
        import torch  # lazy: optional dependency
        packet = getattr(torch.ops.aten, op)
        found = set()
        for name in packet.overloads():
            schema = getattr(packet, name)._schema
            if len(schema.arguments) == nargs:
                found.add(frozenset(i for i, a in enumerate(schema.arguments)
                                    if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write))
        return found.pop() if len(found) == 1 else frozenset()
    except Exception:
        return frozenset()


def _special_bytes(op: str, args: OpArgs, tensors: list, out_size: int,
                   out_dims: Any) -> float | None:
    """Bytes for the op classes with their own output rule, or None for the default rule."""
    if op in FILL_OPS:
        return numel(tensors[0][1]) * tensors[0][2]
    if op == "copy_" and len(tensors) >= 2:
        return sum(numel(s) * b for _, s, b in tensors[:2])
    if op in CONCAT_OPS:
        return 2 * sum(numel(s) * b for _, s, b in tensors)
    if op == "embedding" and len(tensors) >= 2:
        (_, weight, wsize), (_, idx, isize) = tensors[0], tensors[1]
        return numel(idx) * isize + 2 * numel(idx) * weight[-1] * wsize
    if op in GATHER_OPS and len(tensors) >= 2:
        return _gather_bytes(op, args, tensors)
    if op in INDEXED_WRITE_OPS:
        return _indexed_write_bytes(op, args, tensors)
    if op in UPSAMPLE_OPS:
        return _upsample_bytes(op, args, tensors)
    if op == "_to_copy":
        return _cast_bytes(args, tensors)
    if op in GEMM_OPERANDS or op in ("linear", "matmul"):
        return _gemm_bytes(op, args, tensors, out_size)
    if op in CONV_FORWARD_OPS:
        return _conv_bytes(op, args, tensors, out_size, out_dims)
    if op in CONV_BACKWARD_OPS:
        return _conv_backward_bytes(op, args, tensors, out_dims)
    if op in ATTENTION_FORWARD_OPS:
        return _attention_bytes(args, tensors, out_size, backward=False)
    if op in ATTENTION_BACKWARD_OPS:
        return _attention_bytes(args, tensors, out_size, backward=True)
    return None


# Ops that read only the selected part of their source: counting the whole source would claim more traffic than
# DRAM can carry (an index_select from a 150k-row embedding table reads 141 rows, not the table).
GATHER_OPS = {"index_select", "gather", "take", "index"}


def _gather_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Selected elements read and written, plus the indices."""
    (_, src, size) = tensors[0]
    index_elems = sum(numel(s) for _, s, _ in tensors[1:])
    index_bytes = sum(numel(s) * b for _, s, b in tensors[1:])
    if op == "index_select":
        dim = int(args.opt_value(1, 0) or 0) % max(len(src), 1)
        selected = numel(src) // max(src[dim], 1) * index_elems if src else index_elems
    else:  # gather/take/index: output has the indices' shape (index: the broadcast of its index tensors)
        selected = max((numel(s) for _, s, _ in tensors[1:]), default=0)
        if op == "index" and src and len(tensors) == 2:
            selected *= numel(src[len(tensors[1][1]):]) if len(tensors[1][1]) < len(src) else 1
    return float(index_bytes + 2 * selected * size)


# In-place writes through an index: the op touches the written slice, not the whole destination (a KV-cache
# update writes a few hundred KB into a multi-GB cache). Read-modify-write variants also read that slice.
INDEXED_WRITE_OPS = frozenset({
    "index_put_", "_index_put_impl_", "index_copy_", "index_add_", "index_reduce_",
    "scatter_", "scatter_add_", "scatter_reduce_", "masked_scatter_", "put_",
})
_ACCUMULATING = frozenset({"index_add_", "index_reduce_", "scatter_add_", "scatter_reduce_"})


def _indexed_write_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Source and index read, the written slice written (and read when the op accumulates)."""
    dest_shape, dest_size = tensors[0][1], tensors[0][2]
    others = tensors[1:]
    if op in ("index_put_", "_index_put_impl_"):
        # Kineto records the index list without shapes (Input Dims []): indices count only when recorded
        index_shapes = _index_list_shapes(args)
        index_bytes = sum(numel(s) * 8 for s in index_shapes)  # long indices
        values = args.opt_shape(2)
        written = _index_put_slice(dest_shape, index_shapes, values)
        source = numel(values) * (itemsize(args.type_at(2)) or dest_size) if values is not None else 0
        accumulate = bool(args.opt_value(3, False))
        return float(source + index_bytes + written * dest_size * (2 if accumulate else 1))
    index_bytes = sum(numel(s) * b for i, s, b in others if _is_index_arg(op, i))
    sources = [(s, b) for i, s, b in others if not _is_index_arg(op, i)]
    if op in ("scatter_", "scatter_add_", "scatter_reduce_", "put_"):
        # one element per index: that many of src are read (src may be larger than index) and written
        written = max((numel(s) for i, s, _ in others if _is_index_arg(op, i)), default=0)
        source = sum(min(numel(s), written) * b for s, b in sources)
    else:
        source = sum(numel(s) * b for s, b in sources)
        written = max((numel(s) for s, _ in sources), default=0)  # index_copy_/index_add_: the slice's shape
        if op == "masked_scatter_":  # the mask is read whole (as index_bytes); at most numel(source) written
            written = min(numel(dest_shape), written)
    accumulate = op in _ACCUMULATING
    return float(source + index_bytes + written * dest_size * (2 if accumulate else 1))


def _is_index_arg(op: str, i: int) -> bool:
    """index_copy_(self, dim, index, source), scatter_(self, dim, index, src), masked_scatter_(self, mask, ...)."""
    return i == 1 if op in ("masked_scatter_", "put_") else i == 2


def _index_list_shapes(args: OpArgs) -> list[tuple[int, ...]]:
    """Shapes of index_put_'s ``indices`` (a list of optional tensors, recorded as a list of shapes)."""
    value = args.dims[1] if len(args.dims) > 1 else None
    if isinstance(value, (list, tuple)) and all(isinstance(m, (list, tuple)) for m in value):
        return [tuple(m) for m in value if _is_shape(m) and m]
    return []


def _index_put_slice(dest: tuple[int, ...], index_shapes: list, values: tuple[int, ...] | None) -> int:
    """Elements written: the broadcast index shape times the destination dims not indexed."""
    if index_shapes:
        indexed = broadcast_shapes(*index_shapes)
        if indexed is not None and len(index_shapes) <= len(dest):
            return numel(indexed) * numel(dest[len(index_shapes):])
    return numel(values) if values is not None else numel(dest)


UPSAMPLE_OPS = frozenset({
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa",
})


def _upsample_bytes(op: str, args: OpArgs, tensors: list) -> float:
    """Input read, output written: its spatial size from output_size, else from the scale factors."""
    (_, x, size) = tensors[0]
    return float(numel(x) * size + numel(upsample_output_shape(args, x)) * size)


def upsample_output_shape(args: OpArgs, x: tuple[int, ...]) -> tuple[int, ...]:
    """(N, C, *out_spatial) of an upsample op from ``output_size`` or its scale factors."""
    n = len(x) - 2
    if n < 1:
        raise UnknownEstimate(f"upsample input {x} has no spatial dims")
    size = args.opt_value(1)
    if isinstance(size, (list, tuple)) and len(size) == n and all(isinstance(v, int) for v in size):
        return x[:2] + tuple(size)
    scales = _upsample_scales(args, n)
    if scales is None:
        raise UnknownEstimate("upsample output_size and scale factors not recorded")
    return x[:2] + tuple(int(math.floor(d * f)) for d, f in zip(x[2:], scales))


def _upsample_scales(args: OpArgs, n: int) -> tuple[float, ...] | None:
    """scale_factors (a list, .vec overloads) or scales_h/scales_w... (trailing float scalars)."""
    values = [args.opt_value(i) for i in range(2, len(args.dims))]
    for value in values:
        if isinstance(value, (list, tuple)) and len(value) == n and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return tuple(float(v) for v in value)
    floats = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return tuple(floats[-n:]) if len(floats) >= n else None


def _cast_bytes(args: OpArgs, tensors: list) -> float:
    """_to_copy(self, dtype, ...): read self, write it in the target dtype (self's when not given)."""
    (_, x, size) = tensors[0]
    code = args.opt_value(1)
    out_size = _SCALAR_TYPE_CODE_ITEMSIZE.get(code, size) if isinstance(code, int) and not isinstance(
        code, bool) else size
    return float(numel(x) * (size + out_size))


# --------------------------------------------------------------------------- custom ops

def _is_custom(name: Any) -> bool:
    """A namespaced op outside aten/prim (vLLM's _C_cache_ops::..., fbgemm::..., a user's mylib::...)."""
    return isinstance(name, str) and "::" in name and not name.startswith(("aten::", "prim::", "prims::"))


# KV-cache writes: (source tensor indices, destination indices, slot index). They write each source token into
# the cache (in the cache's dtype, fp8 caches included) and read nothing else of it.
_CACHE_WRITES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "reshape_and_cache": ((0, 1), (2, 3), 4),
    "reshape_and_cache_flash": ((0, 1), (2, 3), 4),
    "concat_and_cache_mla": ((0, 1), (2,), 3),
}
_PRESUMED_BUFFER_RATIO = 16


def _custom_bytes(op: str, args: OpArgs, out_dims: Any) -> tuple[float, str]:
    """Bytes of a custom op: a KV-cache rule, else its non-mutated inputs plus outputs (flagged partial)."""
    tensors = _checked_tensors(op, args)
    base = op.rsplit("::", 1)[-1].split(".", 1)[0]
    if base in _CACHE_WRITES:
        return _cache_write_bytes(base, args, tensors), ""
    mutated, how = _mutated_args(op, base, tensors)
    read = sum(numel(s) * b for i, s, b in tensors if i not in mutated)
    written = numel(tuple(out_dims)) * (args.compute_itemsize() or 4) if _is_shape(out_dims) else 0
    parts = ["partial: custom op without a byte rule"]
    if mutated:
        parts.append(f"arguments {sorted(mutated)} {how}, their writes not counted")
    if not written:
        parts.append("outputs not recorded")
    return float(read + written), "; ".join(parts)


def _cache_write_bytes(base: str, args: OpArgs, tensors: list) -> float:
    sources, caches, slots = _CACHE_WRITES[base]
    by_index = {i: (s, b) for i, s, b in tensors}
    source_elems = sum(numel(by_index[i][0]) for i in sources if i in by_index)
    read = sum(numel(by_index[i][0]) * by_index[i][1] for i in sources + (slots,) if i in by_index)
    cache_size = min((by_index[i][1] for i in caches if i in by_index), default=None)
    if cache_size is None:
        raise UnknownEstimate(f"{base}: cache tensor not recorded")
    return float(read + source_elems * cache_size)


def _mutated_args(op: str, base: str, tensors: list) -> tuple[frozenset[int], str]:
    """Arguments not to charge as read: those a custom op mutates per its schema when torch knows it;
    else, when its name says it updates or looks up into something (``cache``, ``update``, ``write``,
    ``embedding``, ``lookup``, a trailing ``_``), the tensors far larger than all the smaller ones together
    (caches, embedding tables and their optimizer state: touched only where indexed). The name condition
    keeps a GEMM's weight (also far larger than its input, e.g. vllm::rocm_unquantized_gemm at decode,
    which does read all of it) counted as read."""
    schema_mutated = _schema_mutated(op)
    if schema_mutated is not None:
        return schema_mutated, "are mutated (schema)"
    if not (base.endswith("_") or any(hint in base.lower() for hint in _SPARSE_ACCESS_HINTS)):
        return frozenset(), ""
    return _far_larger(tensors), (f"are over {_PRESUMED_BUFFER_RATIO}x the other inputs, presumed tables or "
                                  "buffers touched only where indexed")


_SPARSE_ACCESS_HINTS = ("cache", "update", "write", "inplace", "in_place", "embedding", "lookup")


def _far_larger(tensors: list) -> frozenset[int]:
    """Indices of the tensors above the last size gap: a tensor over 16x the sum of all smaller ones."""
    sized = sorted((numel(s) * b, i) for i, s, b in tensors)
    smaller, gap = 0, len(sized)
    for rank, (size, _) in enumerate(sized):
        if smaller > 0 and size > _PRESUMED_BUFFER_RATIO * smaller:
            gap = rank
        smaller += size
    return frozenset(i for _, i in sized[gap:])


@functools.lru_cache(maxsize=1024)
def _schema_mutated(op: str) -> frozenset[int] | None:
    """Indices of arguments with a write alias in the op's schema, or None when torch does not know it."""
    try:
        import torch  # lazy: optional dependency
        namespace, name = op.split("::", 1)
        packet = getattr(getattr(torch.ops, namespace), name.split(".", 1)[0])
        schema = getattr(packet, packet.overloads()[0])._schema
        return frozenset(i for i, a in enumerate(schema.arguments)
                         if a.alias_info is not None and a.alias_info.is_write)
    except Exception:
        return None


def _gemm_bytes(op: str, args: OpArgs, tensors: list, out_size: int) -> float:
    """Operands read once, output written once; a trailing out= tensor is the write."""
    n_inputs = GEMM_OPERANDS[op][1] if op in GEMM_OPERANDS else 3
    reads = [(i, s, b) for i, s, b in tensors if i < n_inputs]
    out_shape = gemm_output_shape(op, args)
    if op == "_int_mm":
        out_size = 4
    elif op == "_scaled_mm":
        code = args.opt_value(6)
        out_size = _SCALAR_TYPE_CODE_ITEMSIZE.get(code, out_size) if isinstance(code, int) else out_size
    return sum(numel(s) * b for _, s, b in reads) + numel(out_shape) * out_size


def _conv_bytes(op: str, args: OpArgs, tensors: list, out_size: int, out_dims: Any) -> float:
    read = sum(numel(s) * b for _, s, b in tensors)
    try:
        out = conv_output_shape(op, args, conv_geometry(op, args))
    except UnknownEstimate:
        if not _is_shape(out_dims):
            return read  # documented: inputs only when the output shape is unknown
        out = tuple(out_dims)
    return read + numel(out) * out_size


def _conv_backward_bytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> float:
    """Each computed gradient reads grad_output once (dgrad, wgrad and the bias reduction run as separate
    kernels): grad_input also reads the weight, grad_weight the input; each gradient is written once in
    its source tensor's dtype."""
    by_index = {i: (s, b) for i, s, b in tensors}
    if op == "cudnn_convolution_backward_input":
        reads, writes = [1, 2], [(_shape_or(args.opt_value(0), out_dims), by_index.get(1, ((), 0))[1])]
    elif op == "cudnn_convolution_backward_weight":
        reads, writes = [1, 2], [(_shape_or(args.opt_value(0), out_dims), by_index.get(2, ((), 0))[1])]
    else:
        grad_idx, x_idx, w_idx = (0, 1, 2) if op == "convolution_backward" else (1, 0, 2)
        mask = args.opt_value(10)
        if not isinstance(mask, (list, tuple)) or len(mask) < 2:
            mask = (True, True, False)  # documented default when the mask is not recorded
        reads, writes = [], []
        if mask[0] and x_idx in by_index:
            reads += [grad_idx, w_idx]
            writes.append(by_index[x_idx])
        if mask[1] and w_idx in by_index:
            reads += [grad_idx, x_idx]
            writes.append(by_index[w_idx])
        if len(mask) > 2 and mask[2] and op == "convolution_backward" and w_idx in by_index:
            reads.append(grad_idx)
            writes.append(((by_index[w_idx][0][0],), by_index[w_idx][1]))
    read = sum(numel(by_index[i][0]) * by_index[i][1] for i in reads if i in by_index)
    return read + sum(numel(s) * b for s, b in writes if s is not None)


def _shape_or(value: Any, fallback: Any) -> tuple[int, ...] | None:
    if _is_shape(value):
        return tuple(value)
    return tuple(fallback) if _is_shape(fallback) else None


def _attention_bytes(args: OpArgs, tensors: list, out_size: int, backward: bool) -> float:
    """All tensor args read; forward writes out, backward writes dq, dk, dv."""
    read = sum(numel(s) * b for _, s, b in tensors)
    first = 1 if backward else 0
    q = args.shape(first, "query")
    k = args.shape(first + 1, "key")
    v = args.shape(first + 2, "value")
    if backward:
        written = numel(q) + numel(k) + numel(v)
    else:
        written = numel(q[:-1]) * v[-1]
    return read + written * out_size


def bytes_from_inductor(args: Any) -> float | None:
    """Bytes from an Inductor kernel's ``kernel_num_gb`` arg (GB of 1e9 bytes), else None."""
    if not isinstance(args, dict):
        return None
    value = args.get("kernel_num_gb")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number * 1e9 if math.isfinite(number) and number >= 0 else None
