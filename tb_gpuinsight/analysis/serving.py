"""Steps of a serving engine: the annotations vLLM and SGLang write around each scheduler step, with the step's
phase (prefill / extend / decode / mixed), its batch and its tokens.

- SGLang: `step[DECODE bs=32]`, `step[EXTEND bs=15 toks=15360]`, `step[MIXED bs=2]` (mode, requests, new tokens).
- vLLM (v1 worker): `execute_<n>_context_<c>(sq..sk..sqsq..sqsk..)_generation_<g>(sq..sk..sqsq..sqsk..)`: c
  prefill and g decode requests, each group's query tokens (sq), KV tokens (sk) and the sum of query x KV tokens
  over its requests (sqsk: the (query, key) pairs attention computes without a mask); older builds write
  `execute_context_<c>(<tokens>)_generation_<g>(<tokens>)`.

A trace with such annotations has one step per annotation (CPU side), tiled like ProfilerStep windows.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..trace.table import Table

_SGLANG = re.compile(r"^step\[(?P<mode>[A-Z_]+)(?P<fields>(?:\s+[a-z_]+=\d+)*)\s*\]$")
_VLLM = re.compile(r"^execute_(?:\d+_)?context_(?P<ctx>\d+)\((?P<ctx_f>[^)]*)\)_generation_(?P<gen>\d+)"
                   r"\((?P<gen_f>[^)]*)\)")
_VLLM_FIELD = re.compile(r"(sqsq|sqsk|sq|sk)(\d+)")
_PHASES = {"DECODE": "decode", "EXTEND": "extend", "PREFILL": "prefill", "MIXED": "mixed", "IDLE": "idle"}


def parse(name: str) -> Optional[Dict[str, Any]]:
    """The phase, batch (requests), tokens (query tokens of the step) and, where the name gives them, the KV
    tokens and attended (query, key) pairs of one serving-step annotation; None for another name."""
    found = _SGLANG.match(name)
    if found:
        fields = dict((k, int(v)) for k, v in (f.split("=") for f in found.group("fields").split()))
        mode = found.group("mode")
        batch = fields.get("bs")
        tokens = fields.get("toks", batch if mode == "DECODE" else None)
        return _meta(_PHASES.get(mode, mode.lower()), batch, tokens)
    found = _VLLM.match(name)
    if not found:
        return None
    ctx, gen = int(found.group("ctx")), int(found.group("gen"))
    c, g = _vllm_fields(found.group("ctx_f")), _vllm_fields(found.group("gen_f"))
    phase = "mixed" if ctx and gen else "prefill" if ctx else "decode" if gen else "idle"
    total = {k: c.get(k, 0) + g.get(k, 0) for k in ("sq", "sk", "sqsq", "sqsk") if k in c or k in g}
    meta = _meta(phase, ctx + gen, total.get("sq"), total.get("sk"), total.get("sqsk"))
    if "sqsq" in total:
        meta["sqsq"] = total["sqsq"]
    return meta


def _vllm_fields(text: str) -> Dict[str, int]:
    """`sq32sk55086sqsq32sqsk55086` -> {"sq": 32, ...}; a bare number (older builds) is the tokens."""
    if text.isdigit():
        return {"sq": int(text)}
    return {k: int(v) for k, v in _VLLM_FIELD.findall(text)}


def _meta(phase: str, batch: Optional[int], tokens: Optional[int], kv_tokens: Optional[int] = None,
          pairs: Optional[int] = None) -> Dict[str, Any]:
    return {"phase": phase, "batch": batch, "tokens": tokens, "kv_tokens": kv_tokens, "attended_pairs": pairs}


def serving_annotations(table: Table) -> Tuple[np.ndarray, np.ndarray, List[Dict[str, Any]], List[str]]:
    """(start, end, meta, name) of the CPU-side serving-step annotations of an annotations table, by start."""
    names = table.strings.get("name", [])
    parsed = [parse(n) for n in names]
    if not len(table) or not any(parsed):
        return np.empty(0), np.empty(0), [], []
    codes = np.flatnonzero(np.fromiter((p is not None for p in parsed), bool, count=len(parsed)))
    mask = np.isin(table["name"], codes)
    if "kind" in table:
        kinds = table.strings.get("kind", [])
        mask &= np.array([kinds[k] == "cpu" for k in table["kind"]], dtype=bool)
    rows = np.flatnonzero(mask)
    rows = rows[np.argsort(table["ts"][rows], kind="stable")]
    start, end = table["ts"][rows], table["ts"][rows] + table["dur"][rows]
    return start, end, [dict(parsed[c]) for c in table["name"][rows].tolist()], \
        [names[c] for c in table["name"][rows].tolist()]


def label(index: int, meta: Dict[str, Any]) -> str:
    """A step's label: `step 3 decode bs=32 toks=32`."""
    parts = [f"step {index}", meta["phase"]]
    if meta.get("batch") is not None:
        parts.append(f"bs={meta['batch']}")
    if meta.get("tokens") is not None:
        parts.append(f"toks={meta['tokens']}")
    return " ".join(parts)


__all__ = ["parse", "serving_annotations", "label"]
