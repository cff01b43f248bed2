"""The performance-model registry: one entry per op schema (or name pattern), each with its FLOP and byte formula.

Each op family lives in its own small module (``gemm``, ``conv``, ``attention``, ``moe``, ``norms``,
``pointwise``, ``movement``, ``comm``; ``custom`` holds the fallback for namespaced ops without an entry) and
registers its ops here with :func:`register`, the way ``torch.utils.flop_counter`` registers one formula per op:
adding an op is adding one entry. An entry names

* ``flops(op, args, out_dims)``: the FLOPs (or ``(FLOPs, note)``, the note starting "upper bound:" when the
  figure is a bound); raise :class:`UnknownEstimate` with the reason when it cannot be known. ``zero_flops``
  marks pure data movement (copies, fills, gathers): 0 FLOPs, known.
* ``bytes(op, args, tensors, out_dims)``: the DRAM traffic (or ``(bytes, reason)``; a reason starting "partial:"
  says what is left out). Without one, the default rule applies: every tensor argument read once, the
  broadcast output written once.
* ``source``: where the formula comes from (first principles, torch's registry, a library's schema).

Names: ``"mm"`` for ``aten::mm``; ``"_C::rms_norm"`` for a namespaced op; ``"*::rms_norm"`` for that base name in
any namespace (vLLM ``_C``, SGLang ``sgl_kernel``, ``aiter``... often share schemas); :func:`register_prefix` for
names a code generator makes up (Inductor's ``triton_poi_fused_...``); :func:`register_suffix` for class names forks
decorate in front (``*FlashAttnVarlenFunc``).
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union

from .args import OpArgs, UnknownEstimate

Number = Union[float, int]
FlopsFn = Callable[[str, OpArgs, Any], Union[Number, "tuple[Number, str]"]]
BytesFn = Callable[[str, OpArgs, list, Any], Union[Number, "tuple[Number, str]"]]

FAMILIES = ("gemm", "conv", "attention", "moe", "norms", "pointwise", "movement", "comm", "optimizer", "triton")


@dataclass(frozen=True)
class OpModel:
    """One registry entry: the family, the FLOP and byte formulas, and their source."""

    family: str
    flops: Optional[FlopsFn] = None
    bytes: Optional[BytesFn] = None
    zero_flops: bool = False
    source: str = ""


_MODELS: dict[str, OpModel] = {}
_PREFIXES: dict[str, OpModel] = {}  # name patterns: kernels named by their generator (Inductor's triton_*)
_SUFFIXES: dict[str, OpModel] = {}  # autograd Function classes forks rename by a prefix (*FlashAttnVarlenFunc)


def register(names: Union[str, Iterable[str]], family: str, *, flops: Optional[FlopsFn] = None,
             bytes: Optional[BytesFn] = None, zero_flops: bool = False, source: str = "") -> None:
    """Register one model under each name (a whitespace-separated string or an iterable of names)."""
    model = OpModel(family, flops, bytes, zero_flops, source)
    for name in (names.split() if isinstance(names, str) else names):
        if name in _MODELS:  # one entry per op: which family wins must not depend on import order
            raise ValueError(f"{name} is registered twice ({_MODELS[name].family} and {family})")
        _MODELS[name] = model


def register_prefix(prefix: str, family: str, **formulas: Any) -> None:
    """Register one model for every op whose name starts with ``prefix`` (used when no exact entry exists)."""
    _PREFIXES[prefix] = OpModel(family, **formulas)


def register_suffix(suffix: str, family: str, **formulas: Any) -> None:
    """Register one model for every op whose name ends with ``suffix`` (used when no exact or prefix entry exists;
    the longest matching suffix wins)."""
    _SUFFIXES[suffix] = OpModel(family, **formulas)


# Modules of one library's ops across families (each entry still names its family).
LIBRARIES = ("transformer_engine", "autograd_functions", "attention_functions", "paged_decode", "flash_attn3")


@functools.lru_cache(maxsize=1)
def _load() -> None:
    for module in FAMILIES + LIBRARIES:
        importlib.import_module(f"{__package__}.{module}")


def lookup(op: str) -> Optional[OpModel]:
    """The entry for an op key (``"mm"``, ``"_C::rms_norm"``), trying ``"*::<base>"`` for namespaced ops."""
    _load()
    model = _MODELS.get(op)
    if model is None and "::" in op:
        model = _MODELS.get("*::" + op.rsplit("::", 1)[-1])
    if model is None:
        model = next((m for prefix, m in _PREFIXES.items() if op.startswith(prefix)), None)
    if model is None:
        ends = [suffix for suffix in _SUFFIXES if op.endswith(suffix)]
        model = _SUFFIXES[max(ends, key=len)] if ends else None
    return model


def registered(family: Optional[str] = None) -> dict[str, OpModel]:
    """Every registered name (of one family) and its entry."""
    _load()
    every = {**_MODELS, **{prefix + "*": m for prefix, m in _PREFIXES.items()},
             **{"*" + suffix: m for suffix, m in _SUFFIXES.items()}}
    return {name: m for name, m in every.items() if family is None or m.family == family}


def split_result(result: Any) -> tuple[float, str]:
    """A formula's ``value`` or ``(value, note)`` as ``(float, note)``."""
    value, note = result if isinstance(result, tuple) else (result, "")
    return float(value), note


__all__ = ["OpModel", "register", "register_prefix", "register_suffix", "lookup", "registered", "split_result",
           "FAMILIES", "UnknownEstimate"]
