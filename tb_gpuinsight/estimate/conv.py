"""Convolution: forward FLOPs as torch.utils.flop_counter's ``aten.convolution`` formula counts them (a test holds the
two equal), with the output shape computed from stride / padding / dilation; backward from first principles (each
gradient costs the forward, the weight gradient divided by ``groups``); bytes: input, weight (and bias) read, output
written; backward per ``output_mask``."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .args import OpArgs, UnknownEstimate, is_shape, numel, op_key, read_bytes
from .registry import register


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

CONV_BACKWARD_OPS = frozenset({
    "convolution_backward", "cudnn_convolution_backward", "cudnn_convolution_backward_input",
    "cudnn_convolution_backward_weight",
})

def _conv_bytes(op: str, args: OpArgs, tensors: list, out_size: int, out_dims: Any) -> float:
    read = read_bytes(tensors)
    try:
        out = conv_output_shape(op, args, conv_geometry(op, args))
    except UnknownEstimate:
        if not is_shape(out_dims):
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
    if is_shape(value):
        return tuple(value)
    return tuple(fallback) if is_shape(fallback) else None



# --------------------------------------------------------------------------- conv adapters

def _conv(op: str, args: OpArgs, out_dims: Any) -> int:
    """Every forward convolution through the registry's aten.convolution formula."""
    geo = conv_geometry(op, args)
    try:
        out = conv_output_shape(op, args, geo)
    except UnknownEstimate as exc:
        out = _given_output(out_dims, geo.unbatched)
        if out is None:
            if not geo.transposed:
                raise UnknownEstimate(f"conv output shape unknown: {exc}") from None
            out = geo.x  # the transposed formula reads only input and weight
    return conv_flops(geo.x, geo.w, out, geo.transposed)


def conv_flops(x: tuple[int, ...], w: tuple[int, ...], out: tuple[int, ...], transposed: bool) -> int:
    """2 x batch x (weight's two channel dims: c_out x c_in / groups) x kernel size x spatial points: one multiply
    and one add per weight element at each output point, or at each input point of a transposed convolution (which
    scatters every input point through the kernel). Bias is not counted."""
    points = (x if transposed else out)[2:]
    return 2 * x[0] * math.prod(w) * math.prod(points)


def _given_output(out_dims: Any, unbatched: bool) -> tuple[int, ...] | None:
    if not isinstance(out_dims, tuple) or not all(isinstance(d, int) for d in out_dims):
        return None
    return (1,) + out_dims if unbatched else out_dims


def _conv_backward(op: str, args: OpArgs, out_dims: Any) -> int:
    """aten.convolution_backward and its 2021 cuDNN forms, from first principles.

    Each computed gradient (grad_input, grad_weight; ``output_mask``) costs as much as the forward:
    ``2 x N x Cout x prod(out spatial) x (Cin / groups) x prod(kernel)``, i.e. 2 x numel(grad_output)
    x numel(weight[1:]) (the weight's dim 1 already is Cin / groups); for a transposed conv the roles of
    input and output swap. torch.utils.flop_counter's registry does not divide the weight gradient by
    ``groups`` (it counts ``groups`` times too much for grouped and depthwise convs), so it is not used
    here. The bias gradient (a reduction of grad_output) is not counted.
    """
    if op == "convolution_backward":
        grad_out, x, w = (args.shape(i, n) for i, n in ((0, "grad_output"), (1, "input"), (2, "weight")))
        transposed = args.flag(7, "conv 'transposed' flag")
        mask = _mask(args.value(10, "convolution_backward output_mask"))
    elif op == "cudnn_convolution_backward":
        x, grad_out, w = (args.shape(i, n) for i, n in ((0, "input"), (1, "grad_output"), (2, "weight")))
        transposed, mask = False, _mask(args.value(10, "cudnn_convolution_backward output_mask"))
    elif op == "cudnn_convolution_backward_input":
        grad_out, w = args.shape(1, "grad_output"), args.shape(2, "weight")
        x, transposed, mask = grad_out, False, (True, False, False)  # x is not read when not transposed
    else:  # cudnn_convolution_backward_weight(weight_size, grad_output, self, ...)
        grad_out, x = args.shape(1, "grad_output"), args.shape(2, "input")
        w = _weight_size(args, out_dims)
        transposed, mask = False, (False, True, False)
    return conv_gradient_flops(grad_out, x, w, transposed) * (int(mask[0]) + int(mask[1]))


def conv_gradient_flops(grad_out: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...],
                        transposed: bool) -> int:
    """FLOPs of one convolution gradient (input or weight): the forward's count."""
    if len(w) < 3:
        raise UnknownEstimate(f"conv weight shape {w} has no spatial dims")
    small = x if transposed else grad_out  # the side the weight's dim 0 channels live on
    return 2 * math.prod(small) * math.prod(w[1:])


def conv_backward_parts(op: str, args: OpArgs) -> dict[str, tuple[float, float]]:
    """FLOPs and bytes of each gradient ``aten::convolution_backward`` computes (``output_mask``), as its kernels do
    them apart: "dgrad" (grad_output and weight read, grad_input written; the forward's FLOPs), "wgrad"
    (grad_output and input read, grad_weight written; the forward's FLOPs, / groups by the weight's shape) and
    "bias" (grad_output summed per output channel: 1 FLOP per element, [C_out] written). dgrad + wgrad give the
    op's FLOPs; the three give its bytes."""
    if op_key(op) != "convolution_backward":
        return {}
    shapes = {i: (s, b) for i, s, b in args.tensor_items()}
    if not all(i in shapes and shapes[i][1] for i in (0, 1, 2)):
        raise UnknownEstimate("convolution_backward: grad_output, input or weight not recorded")
    (go, b_go), (x, b_x), (w, b_w) = shapes[0], shapes[1], shapes[2]
    mask = _mask(args.value(10, "convolution_backward output_mask"))
    grad = conv_gradient_flops(go, x, w, args.flag(7, "conv 'transposed' flag"))
    read_go = numel(go) * b_go
    parts = {"dgrad": (grad, read_go + numel(w) * b_w + numel(x) * b_x),
             "wgrad": (grad, read_go + numel(x) * b_x + numel(w) * b_w),
             "bias": (numel(go), read_go + w[0] * b_w)}
    return {part: value for part, value, on in zip(("dgrad", "wgrad", "bias"), parts.values(), mask) if on}


def _mask(value: Any) -> tuple[bool, bool, bool]:
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise UnknownEstimate(f"output_mask not understood: {value!r}")
    flags = [bool(v) for v in value] + [False]
    return flags[0], flags[1], flags[2]


def _weight_size(args: OpArgs, out_dims: Any) -> tuple[int, ...]:
    value = args.opt_value(0)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(out_dims, tuple) and out_dims and all(isinstance(d, int) for d in out_dims):
        return out_dims
    raise UnknownEstimate("weight size not recorded (trace has no Concrete Inputs)")




register(CONV_FORWARD_OPS, "conv", flops=_conv, bytes=lambda op, args, tensors, out_dims: _conv_bytes(
    op, args, tensors, args.compute_itemsize() or 4, out_dims),
         source="torch.utils.flop_counter's conv count; output shape from stride/padding/dilation")
register(CONV_BACKWARD_OPS, "conv", flops=_conv_backward, bytes=lambda op, args, tensors, out_dims:
         _conv_backward_bytes(op, args, tensors, out_dims),
         source="first principles: each gradient in output_mask costs the forward (weight gradient / groups)")
