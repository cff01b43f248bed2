"""Optimizer steps: the fused Adam / AdamW / SGD kernels and the ``_foreach_*`` ops that unfused optimizers run.

Per parameter element (first principles, the update rules in torch.optim's docs):

* Adam / AdamW: weight decay 1 (``p *= 1 - lr wd``, or ``g += wd p``), first moment 3 (``m = b1 m + (1 - b1) g``),
  second moment 4 (``v = b2 v + (1 - b2) g^2``), the step 4 (``sqrt(v_hat) + eps``, the division, ``lr`` times it,
  the subtraction); bias corrections are per tensor: 12 FLOPs. Bytes: parameters, gradients and both moments read,
  parameters and moments written (7 element-sized accesses; 9 with ``amsgrad``'s running maximum).
* SGD with momentum: weight decay 2, momentum 3, the step 2: 7 FLOPs; parameters, gradients and the momentum buffer
  read, parameters and buffer written (5 accesses).
* ``_foreach_<op>``: the elementwise op once per element of the first list.

Kineto types these arguments only as "TensorList": elements are assumed 4-byte (fp32 parameters and states, as
mixed-precision training keeps them); the byte reason says so.
"""
from __future__ import annotations

from typing import Any

from .args import OpArgs, UnknownEstimate, numel
from .registry import register

ASSUMED = "upper bound: TensorList dtypes are not recorded; 4-byte (fp32) parameters and states assumed"


def _list_elements(args: OpArgs, i: int = 0) -> int:
    value = args.dims[i] if len(args.dims) > i else None
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(m, (list, tuple)) for m in value):
        raise UnknownEstimate("parameter list shapes not recorded")
    return sum(numel(tuple(m)) for m in value)


def _amsgrad(args: OpArgs) -> bool:
    return args.opt_value(11) in (True, "True")


def _per_element(flops: int, accesses: int, amsgrad_accesses: int = 0):
    def count(op: str, args: OpArgs, out_dims: Any) -> int:
        return flops * _list_elements(args)

    def nbytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
        extra = amsgrad_accesses if amsgrad_accesses and _amsgrad(args) else 0
        return float((accesses + extra) * 4 * _list_elements(args)), ASSUMED

    return count, nbytes


_ADAM = _per_element(12, 7, amsgrad_accesses=2)
_SGD = _per_element(7, 5)
register("_fused_adam_ _fused_adamw_", "optimizer", flops=_ADAM[0], bytes=_ADAM[1],
         source="torch.optim.Adam/AdamW update rule: 12 FLOPs and 7 accesses per parameter element")
register("_fused_sgd_", "optimizer", flops=_SGD[0], bytes=_SGD[1],
         source="torch.optim.SGD update rule with momentum: 7 FLOPs and 5 accesses per parameter element")


def _foreach(flops_per_element: int):
    def count(op: str, args: OpArgs, out_dims: Any) -> int:
        return flops_per_element * _list_elements(args)

    def nbytes(op: str, args: OpArgs, tensors: list, out_dims: Any) -> tuple[float, str]:
        n = _list_elements(args)
        lists = sum(1 for i in range(len(args.dims)) if _is_list_of(args, i, n))
        return float((lists + 1) * 4 * n), ASSUMED  # every list read, the first written

    return count, nbytes


def _is_list_of(args: OpArgs, i: int, n: int) -> bool:
    try:
        return _list_elements(args, i) == n
    except UnknownEstimate:
        return False


for _names, _per in (("add sub mul div maximum minimum clamp_min clamp_max neg abs sign reciprocal", 1),
                     ("sqrt exp log sigmoid tanh", 1), ("addcmul addcdiv lerp", 2)):
    _fe = _foreach(_per)
    register([f"_foreach_{n}{s}" for n in _names.split() for s in ("", "_")], "optimizer", flops=_fe[0],
             bytes=_fe[1], source="elementwise op per element of the tensor list")
register("_foreach_copy_ _foreach_zero_", "optimizer", zero_flops=True, source="tensor-list copy / fill")
