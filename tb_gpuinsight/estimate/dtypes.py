"""Element sizes and torch dtypes for the dtype strings found in profiler traces.

Kineto's ``Input type`` holds, per argument, either the C++ type name of a tensor's dtype
(``caffe2::TypeMeta::name()``, e.g. ``"float"``, ``"c10::BFloat16"``, ``"long int"``) or a tag
for a non-tensor argument (``"Scalar"``, ``"ScalarList"``, ``"GenericList"``, ``"TensorList"``,
``""`` for None; 2021 files also write ``"Int"``, ``"Bool"``, ``"Double"`` for scalars).
Execution traces wrap the dtype: ``"Tensor(float)"``. c10 ``ScalarType`` names (``"Float"``,
``"Half"``, ``"Long"``, ``"Byte"``...) are understood by :func:`itemsize` as well.

The tensor spellings below were checked against torch 2.13 by profiling one tensor of every
dtype; older spellings (``"long"``, ``"c10::qint8"``) come from real traces.
"""
from __future__ import annotations

import functools
import re
from typing import Any

from .lazy_torch import torch_module

# C++ TypeMeta names -> (itemsize, torch dtype attribute name). Bit-packed types report the
# byte size of their storage element, which is what moves through memory.
_TENSOR_TYPES: dict[str, tuple[int, str]] = {
    "float": (4, "float32"),
    "double": (8, "float64"),
    "c10::Half": (2, "float16"),
    "c10::BFloat16": (2, "bfloat16"),
    "c10::Float8_e4m3fn": (1, "float8_e4m3fn"),
    "c10::Float8_e5m2": (1, "float8_e5m2"),
    "c10::Float8_e4m3fnuz": (1, "float8_e4m3fnuz"),
    "c10::Float8_e5m2fnuz": (1, "float8_e5m2fnuz"),
    "c10::Float8_e8m0fnu": (1, "float8_e8m0fnu"),
    "c10::Float4_e2m1fn_x2": (1, "float4_e2m1fn_x2"),
    "c10::complex<c10::Half>": (4, "complex32"),
    "c10::complex<float>": (8, "complex64"),
    "c10::complex<double>": (16, "complex128"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "uint8"),
    "short int": (2, "int16"),
    "short": (2, "int16"),
    "int": (4, "int32"),
    "long int": (8, "int64"),
    "long": (8, "int64"),
    "long long": (8, "int64"),
    "long long int": (8, "int64"),
    "__int64": (8, "int64"),
    "short unsigned int": (2, "uint16"),
    "unsigned short": (2, "uint16"),
    "unsigned int": (4, "uint32"),
    "long unsigned int": (8, "uint64"),
    "unsigned long": (8, "uint64"),
    "bool": (1, "bool"),
    "c10::qint8": (1, "qint8"),
    "c10::quint8": (1, "quint8"),
    "c10::qint32": (4, "qint32"),
    "c10::quint4x2": (1, "quint4x2"),
    "c10::quint2x4": (1, "quint2x4"),
    "c10::bits1x8": (1, "bits1x8"),
    "c10::bits2x4": (1, "bits2x4"),
    "c10::bits4x2": (1, "bits4x2"),
    "c10::bits8": (1, "bits8"),
    "c10::bits16": (2, "bits16"),
}

# c10::ScalarType names (torch.*Tensor style). "Int", "Bool" and "Double" double as Kineto's
# tags for scalar arguments, so they are sizes here but never tensors in is_tensor_type().
_SCALAR_TYPE_NAMES: dict[str, tuple[int, str]] = {
    "Byte": (1, "uint8"),
    "Char": (1, "int8"),
    "Short": (2, "int16"),
    "Int": (4, "int32"),
    "Long": (8, "int64"),
    "Half": (2, "float16"),
    "Float": (4, "float32"),
    "Double": (8, "float64"),
    "ComplexHalf": (4, "complex32"),
    "ComplexFloat": (8, "complex64"),
    "ComplexDouble": (16, "complex128"),
    "Bool": (1, "bool"),
    "BFloat16": (2, "bfloat16"),
    "Float8_e4m3fn": (1, "float8_e4m3fn"),
    "Float8_e5m2": (1, "float8_e5m2"),
    "Float8_e4m3fnuz": (1, "float8_e4m3fnuz"),
    "Float8_e5m2fnuz": (1, "float8_e5m2fnuz"),
    "Float8_e8m0fnu": (1, "float8_e8m0fnu"),
    "UInt16": (2, "uint16"),
    "UInt32": (4, "uint32"),
    "UInt64": (8, "uint64"),
    "QInt8": (1, "qint8"),
    "QUInt8": (1, "quint8"),
    "QInt32": (4, "qint32"),
}

# Kineto/ET tags for arguments that are not a single tensor.
_NON_TENSOR_TAGS = frozenset({
    "", "Scalar", "ScalarList", "GenericList", "TensorList", "Int", "Bool", "Double", "String",
    "Device", "None", "Layout", "ScalarType", "MemoryFormat", "Generator", "Object", "Storage",
    "Stream", "Tuple", "Dict", "SymInt", "SymFloat", "SymBool", "Uninitialized",
})

_FLOATING = frozenset({
    "float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "complex32", "complex64", "complex128",
})

# c10 sub-byte integer placeholders, e.g. "c10::dummy_uint1_7_t<4>" (torch.uint4): 1-byte storage.
_SUB_BYTE = re.compile(r"^c10::dummy_u?int1_7_t<(\d)>$")
_ET_WRAPPER = re.compile(r"^Tensor\((.*)\)$")


def _unwrap(type_str: Any) -> str | None:
    """Return the bare dtype spelling (ET's ``Tensor(x)`` -> ``x``), or None for non-strings."""
    if not isinstance(type_str, str):
        return None
    text = type_str.strip()
    match = _ET_WRAPPER.match(text)
    return match.group(1).strip() if match else text


@functools.lru_cache(maxsize=512)
def _lookup(type_str: str) -> tuple[int, str] | None:
    """(itemsize, torch dtype name) for any known spelling, or None."""
    bare = _unwrap(type_str)
    if bare is None:
        return None
    if bare in _TENSOR_TYPES:
        return _TENSOR_TYPES[bare]
    if bare in _SCALAR_TYPE_NAMES:
        return _SCALAR_TYPE_NAMES[bare]
    match = _SUB_BYTE.match(bare)
    if match:
        prefix = "uint" if "uint" in bare else "int"
        return 1, f"{prefix}{match.group(1)}"
    return None


def itemsize(type_str: Any) -> int | None:
    """Bytes per element for a trace dtype string, or None if unknown or not a dtype."""
    try:
        found = _lookup(type_str) if isinstance(type_str, str) else None
    except Exception:  # never let a strange string escape as an error
        return None
    return found[0] if found else None


def is_tensor_type(type_str: Any) -> bool:
    """True when ``Input type`` names a tensor dtype (not a scalar/list/None tag)."""
    bare = _unwrap(type_str)
    if bare is None or bare in _NON_TENSOR_TAGS or bare.startswith(("GenericList", "Tuple")):
        return False
    return itemsize(type_str) is not None


def is_floating_type(type_str: Any) -> bool:
    """True for floating point and complex tensor dtypes (the ones that carry FLOPs)."""
    if not is_tensor_type(type_str):
        return False
    found = _lookup(type_str)
    return bool(found) and found[1] in _FLOATING


def torch_dtype(type_str: Any) -> Any:
    """The ``torch.dtype`` for a trace dtype string, or None (also None without torch)."""
    found = _lookup(type_str) if isinstance(type_str, str) else None
    if not found:
        return None
    torch = torch_module()  # lazy: torch is an optional dependency
    return None if torch is None else getattr(torch, found[1], None)


# --------------------------------------------------------------------------- type promotion

_CATEGORY = {"bool": 0}
_CATEGORY.update({name: 1 for name in ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")})
_CATEGORY.update({name: 2 for name in _FLOATING if not name.startswith("complex")})
_CATEGORY.update({"complex32": 3, "complex64": 3, "complex128": 3})
_DEFAULT_FOR_CATEGORY = {0: "bool", 1: "int64", 2: "float32", 3: "complex64"}
_SIZE_OF_NAME = {name: size for size, name in list(_TENSOR_TYPES.values()) + list(_SCALAR_TYPE_NAMES.values())}


def dtype_name(type_str: Any) -> str | None:
    """torch dtype name (``"bfloat16"``) of a trace dtype string, or None."""
    found = _lookup(type_str) if isinstance(type_str, str) else None
    return found[1] if found else None


def size_of_dtype_name(name: str) -> int | None:
    """Item size of a torch dtype name (``"float32"`` -> 4)."""
    return _SIZE_OF_NAME.get(name)


def promote_pair(a: str, b: str) -> str:
    """torch.promote_types for two dtype names (the cases that occur between real tensors)."""
    if a == b:
        return a
    ca, cb = _CATEGORY.get(a, -1), _CATEGORY.get(b, -1)
    if ca != cb:
        return a if ca > cb else b
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    if {a, b} == {"uint8", "int8"}:
        return "int16"
    return a if (_SIZE_OF_NAME.get(a, 0), a) >= (_SIZE_OF_NAME.get(b, 0), b) else b


def result_dtype(tensors: list[tuple[str, int]], scalar_category: int | None = None) -> str | None:
    """torch.result_type of an elementwise op: ``tensors`` are (dtype name, ndim) of its tensor
    arguments; ``scalar_category`` the highest category of its Python scalars (0 bool, 1 int, 2 float,
    3 complex), when recorded.

    As in torch: dimensioned tensors decide; a 0-dim tensor only matters when it is of a higher
    category (int < float < complex) than all of them; a scalar likewise, giving that category's
    default dtype (float32, int64, complex64).
    """
    dims = [name for name, ndim in tensors if ndim > 0]
    zero = [name for name, ndim in tensors if ndim == 0]
    result = _fold(dims)
    zero_result = _fold(zero)
    if zero_result is not None and (result is None or _CATEGORY.get(zero_result, -1) > _CATEGORY.get(result, -1)):
        result = zero_result  # a 0-dim tensor of a higher category keeps its own dtype (int + 0-dim double: double)
    if scalar_category is not None and (result is None or scalar_category > _CATEGORY.get(result, -1)):
        result = _DEFAULT_FOR_CATEGORY[scalar_category]
    return result


def _fold(names: list[str]) -> str | None:
    result = None
    for name in names:
        result = name if result is None else promote_pair(result, name)
    return result

