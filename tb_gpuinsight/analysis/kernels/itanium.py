"""Demangling Itanium names, with a fallback so that no `_Z…` name reaches a table raw.

Clang 18+ (so current hipcc) mangles a *template parameter declaration* before some template arguments, the 2023
ABI addition `<template-arg> ::= <template-param-decl> <template-arg>`:
`_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i`
(`TnPFT_RKS3_E` declares the function-pointer parameter that `&silu<...>` fills). The gimli-rs demangler
(cpp_demangle 0.1.3) and binutils' c++filt 2.40 reject such a name whole; LLVM's demangler (pycxxfilt, LLVM 23)
reads it. The declared types feed the substitution table (`S3_` above is the declared `T`), so they cannot simply
be cut out. Hence three steps: cpp_demangle, then LLVM's demangler where its wheel exists (Python 3.11+), then the
qualified name read from the mangled prefix (`sgl_hip::activation::act_and_mul_kernel<…>`).
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional

_LENGTH = re.compile(r"\d+")
# Letters that open a construct closed by `E` (nested name, template args, function type, literal, expression,
# pack, local name); identifiers are skipped by their length and substitutions / parameters by their `_`.
_OPENERS = frozenset("NIFLXJZ")
_SKIP = re.compile(r"S[0-9A-Z]*_|S[tabsiod]|T\d*_|D[FBUv]\d+[_b]")


def _load(module: str, attr: str) -> Optional[Callable[[str], str]]:
    try:
        return getattr(__import__(module), attr)
    except (ImportError, AttributeError):  # pragma: no cover - depends on the platform's wheels
        return None


# cpp_demangle first (its text is what every stored display name was made from), then LLVM's for the names it rejects.
DEMANGLERS = tuple((name, impl) for name, impl in (("cpp_demangle", _load("cpp_demangle", "demangle")),
                                                   ("llvm", _load("pycxxfilt", "itanium_demangle"))) if impl)


def demangled(name: str) -> Optional[str]:
    """The first demangler's text that reads `name`, or None."""
    for _, impl in DEMANGLERS:
        try:
            text = impl(name)
        except Exception:  # noqa: BLE001 - a malformed symbol: try the next one
            continue
        if text and text != name:
            return text
    return None


def _template_args_end(name: str, i: int) -> Optional[int]:
    """The index after the `E` that closes the `I` at name[i], or None when the nesting does not close."""
    depth = 0
    while i < len(name):
        ch = name[i]
        if ch.isdigit():
            m = _LENGTH.match(name, i)
            i = m.end() + int(m.group())
            continue
        m = _SKIP.match(name, i)
        if m:
            i = m.end()
            continue
        if ch in _OPENERS:
            depth += 1
        elif ch == "E":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def qualified_name(name: str) -> Optional[str]:
    """The qualified name read from an Itanium name's prefix (`_ZN7sgl_hip10activation18act_and_mul_kernelI…`
    -> `sgl_hip::activation::act_and_mul_kernel<…>`), for names no demangler here reads; None when the prefix is
    not a plain (possibly nested) name."""
    if not name.startswith("_Z"):
        return None
    i = 3 if name.startswith("_ZL") else 2
    nested = name[i:i + 1] == "N"
    i += 1 if nested else 0
    while nested and name[i:i + 1] in ("r", "V", "K"):
        i += 1
    parts: List[str] = []
    while i < len(name) and name[i].isdigit():
        m = _LENGTH.match(name, i)
        end = m.end() + int(m.group())
        if end > len(name):
            return None
        parts.append(name[m.end():end])
        i = end
        if name[i:i + 1] == "I":
            parts[-1] += "<…>"
            i = _template_args_end(name, i) or len(name)
        if not nested:
            break
    return "::".join(parts) if parts else None
