"""Device datasheet: its rows (``DeviceSpec``), their dtypes, and how they are read and validated.

The datasheet (``devices.json`` beside this module) has one row per device model with DENSE peaks (no 2:4
sparsity) in TFLOP/s per dtype (``fp64 fp32 tf32 bf16 fp16 fp8 int8 fp6 fp4``; int8 in TOPS;
fp6 / fp4 the OCP MX and NVFP4 block-scaled rates), DRAM bandwidth in GB/s
and a cited source. A user file in the same row format (``--devices FILE`` or the ``TB_GPUINSIGHT_DEVICES``
environment variable) adds rows, or overrides the built-in row with the same ``name``: its top-level keys
replace the built-in ones, except ``peak_tflops``, which is merged dtype by dtype, so
``{"name": "NVIDIA H100 SXM5 80GB", "peak_tflops": {"bf16": 800}}`` changes one figure. Rows the user file adds
come before the built-in rows, so they win ties.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tb_gpuinsight.errors import ConfigError

from .formats import peak_key

DTYPES: Tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4")
ENV_VAR = "TB_GPUINSIGHT_DEVICES"
BUILTIN_PATH = Path(__file__).with_name("devices.json")

_ROW_KEYS = {"name", "vendor", "match", "num_sms", "compute_major", "memory_gb", "props_match", "peak_tflops",
             "dram_gbps", "source", "match_note", "interconnect", "cache_mb"}


@dataclass(frozen=True)
class DeviceSpec:
    """One datasheet row: dense peaks per dtype (TFLOP/s, int8 in TOPS) and DRAM bandwidth (GB/s)."""

    name: str
    vendor: str
    peak_tflops: Dict[str, float]
    dram_gbps: Optional[float]
    source: str
    note: str = ""
    match: Tuple[str, ...] = ()
    num_sms: Optional[int] = None
    compute_major: Optional[int] = None
    memory_gb: Optional[float] = None
    props_match: bool = False
    match_note: str = ""
    origin: str = "built-in"
    interconnect: Optional[Dict[str, Any]] = None  # GPU-to-GPU link: see `_interconnect`
    cache_mb: Optional[float] = None  # last-level cache (L2 / Infinity Cache) operands can stay in between kernels

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form of the row."""
        return {"name": self.name, "vendor": self.vendor, "peak_tflops": dict(self.peak_tflops),
                "dram_gbps": self.dram_gbps, "source": self.source, "note": self.note, "origin": self.origin,
                "interconnect": dict(self.interconnect) if self.interconnect else None, "cache_mb": self.cache_mb}


# ---------------------------------------------------------------------------------------------- dtypes

_DTYPE_ALIASES = {
    "float": "fp32", "float32": "fp32", "fp32": "fp32",
    "double": "fp64", "float64": "fp64", "fp64": "fp64",
    "half": "fp16", "float16": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "tf32": "tf32",
    "fp8": "fp8", "float8": "fp8",
    "signed char": "int8", "unsigned char": "int8", "char": "int8", "int8": "int8", "uint8": "int8",
    "int8_t": "int8", "uint8_t": "int8", "qint8": "int8", "quint8": "int8",
}


def normalize_dtype(s: Any) -> Optional[str]:
    """Map a trace dtype string to a datasheet key, or None.

    "float" maps to fp32, not tf32: whether an fp32 matmul ran on TF32 tensor cores is not in the dtype, so
    callers that know TF32 was allowed look up "tf32" themselves.
    """
    if not isinstance(s, str):
        return None
    t = s.strip().lower()
    for prefix in ("c10::", "at::", "torch."):
        if t.startswith(prefix):
            t = t[len(prefix):]
    if t.startswith("float8"):  # Float8_e4m3fn, Float8_e5m2, their fnuz forms, ...
        return "fp8"
    return _DTYPE_ALIASES.get(t) or peak_key(t)  # a block-scaled operand format ("mxfp4xmxfp8") by its widest


# ---------------------------------------------------------------------------------------------- loading

def load_datasheet(extra: "str | os.PathLike[str] | None" = None) -> List[DeviceSpec]:
    """Built-in rows plus a user file: ``extra`` if given, else the file ``TB_GPUINSIGHT_DEVICES`` names.

    Raises ConfigError with a one-line reason when the user file is missing or malformed.
    """
    if extra is not None:
        return _with_user_file(os.fspath(extra), label="devices file")
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return _with_user_file(env, label=f"{ENV_VAR}")
    return list(_builtin_specs())


@lru_cache(maxsize=1)
def _builtin_raw() -> Tuple[Dict[str, Any], ...]:
    """The packaged rows as raw dicts (parsed once)."""
    with open(BUILTIN_PATH, encoding="utf-8") as f:
        rows = json.load(f)["devices"]
    return tuple(rows)


@lru_cache(maxsize=1)
def _builtin_specs() -> Tuple[DeviceSpec, ...]:
    return tuple(_parse_row(r, f"built-in datasheet row {i}", "built-in") for i, r in enumerate(_builtin_raw()))


def _with_user_file(path: str, label: str) -> List[DeviceSpec]:
    """Merge a user file into the built-in rows: new rows first (they win ties), overrides in place."""
    user = _read_user_rows(path, label)
    where = f"{label} {path}"
    by_key = {_key(r["name"]): (i, r) for i, r in enumerate(user)}
    merged: List[DeviceSpec] = []
    for i, raw in enumerate(_builtin_raw()):
        hit = by_key.pop(_key(raw["name"]), None)
        if hit is None:
            merged.append(_builtin_specs()[i])
        else:
            merged.append(_parse_row(_overlay(raw, hit[1]), f"{where}: row {hit[0]} ({hit[1]['name']!r})", path))
    added = [_parse_row(r, f"{where}: row {i} ({r['name']!r})", path) for i, r in sorted(by_key.values(),
                                                                                       key=lambda t: t[0])]
    return added + merged


def _read_user_rows(path: str, label: str) -> List[Dict[str, Any]]:
    """Rows of a user file: a JSON list of rows or an object with a "devices" list; each row needs a name."""
    where = f"{label} {path}"
    try:
        data = json.loads(_read_small_file(path, where))
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ConfigError(f"{where}: the JSON nests too deeply") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{where}: cannot read: {e.strerror if isinstance(e, OSError) else e}") from None
    rows = data.get("devices") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ConfigError(f"{where}: expected a JSON list of device rows or an object with a \"devices\" list")
    seen = set()
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not r["name"].strip():
            raise ConfigError(f"{where}: row {i} must be an object with a non-empty \"name\"")
        if _key(r["name"]) in seen:
            raise ConfigError(f"{where}: row {i}: name {r['name']!r} appears twice")
        seen.add(_key(r["name"]))
    return rows


MAX_USER_FILE_BYTES = 16 << 20  # a datasheet of thousands of rows is well under a MiB


def _read_small_file(path: str, where: str) -> str:
    """The text of a regular file of at most MAX_USER_FILE_BYTES: a device (/dev/zero, /dev/stdin), a FIFO or a
    huge file is refused before it is read (reading one would block or grow without end)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{where}: not a regular file (a device, FIFO or folder); give a JSON file")
    if st.st_size > MAX_USER_FILE_BYTES:
        raise ConfigError(f"{where}: {st.st_size:,} bytes, over the {MAX_USER_FILE_BYTES >> 20} MiB a devices file "
                          "may hold")
    with open(path, "rb") as f:
        data = f.read(MAX_USER_FILE_BYTES + 1)
    if len(data) > MAX_USER_FILE_BYTES:
        raise ConfigError(f"{where}: over the {MAX_USER_FILE_BYTES >> 20} MiB a devices file may hold")
    return data.decode("utf-8")


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _overlay(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """User override on a built-in row: keys replace, peak_tflops merges per dtype."""
    out = dict(base)
    out.update(over)
    if isinstance(over.get("peak_tflops"), dict) and isinstance(base.get("peak_tflops"), dict):
        out["peak_tflops"] = {**base["peak_tflops"], **over["peak_tflops"]}
    return out


def _parse_row(raw: Mapping[str, Any], where: str, origin: str) -> DeviceSpec:
    """Validate one raw row into a DeviceSpec; ConfigError names the row and the field."""
    unknown = sorted(k for k in set(raw) - _ROW_KEYS if not k.startswith("_"))  # "_comment" keys are allowed
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(_ROW_KEYS))})")
    name = _text(raw.get("name"), where, "name")
    vendor = _text(raw.get("vendor"), where, "vendor").lower()
    url, note = _source(raw.get("source"), where, origin)
    return DeviceSpec(
        name=name, vendor=vendor, peak_tflops=_peaks(raw.get("peak_tflops"), where),
        dram_gbps=_positive(raw.get("dram_gbps"), where, "dram_gbps", optional=True),
        source=url, note=note, match=_patterns(raw.get("match", []), where),
        num_sms=_int_field(raw.get("num_sms"), where, "num_sms"),
        compute_major=_int_field(raw.get("compute_major"), where, "compute_major"),
        memory_gb=_positive(raw.get("memory_gb"), where, "memory_gb", optional=True),
        props_match=_bool(raw.get("props_match", False), where),
        match_note=_text(raw.get("match_note", ""), where, "match_note", allow_empty=True),
        origin=origin,
        interconnect=_interconnect(raw.get("interconnect"), where, origin),
        cache_mb=_positive(raw.get("cache_mb"), where, "cache_mb", optional=True),
    )


def _interconnect(v: Any, where: str, origin: str) -> Optional[Dict[str, Any]]:
    """{"link": "NVLink 2.0", "gbps": 300, "bidirectional": true, "source": ...}: the datasheet's GPU-to-GPU figure.
    Vendors quote NVLink / Infinity Fabric / PCIe as the sum of both directions; collectives move data one way per
    link, so bus bandwidth is rated against `per_direction_gbps` (half of a bidirectional figure)."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: interconnect must be an object with link, gbps and bidirectional")
    link = _text(v.get("link"), where, "interconnect.link")
    gbps = _positive(v.get("gbps"), where, "interconnect.gbps")
    both = v.get("bidirectional", True)
    if not isinstance(both, bool):
        raise ConfigError(f"{where}: interconnect.bidirectional must be true or false, got {both!r}")
    url, note = _source(v.get("source"), where, origin)
    return {"link": link, "gbps": gbps, "bidirectional": both, "per_direction_gbps": gbps / 2 if both else gbps,
            "as": "both directions" if both else "one direction", "source": url, "note": note}


def _text(v: Any, where: str, field_name: str, allow_empty: bool = False) -> str:
    if not isinstance(v, str) or (not allow_empty and not v.strip()):
        raise ConfigError(f"{where}: {field_name} must be a non-empty string")
    return v.strip()


def _positive(v: Any, where: str, field_name: str, optional: bool = False) -> Optional[float]:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{where}: {field_name} must be a positive number, got {v!r}")
    return float(v)


def _int_field(v: Any, where: str, field_name: str) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError(f"{where}: {field_name} must be a non-negative integer, got {v!r}")
    return v


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{where}: props_match must be true or false, got {v!r}")
    return v


def _peaks(v: Any, where: str) -> Dict[str, float]:
    if not isinstance(v, dict) or not v:
        raise ConfigError(f"{where}: peak_tflops must be an object such as {{\"bf16\": 312}}")
    out = {}
    for dtype, value in v.items():
        if dtype not in DTYPES:
            raise ConfigError(f"{where}: peak_tflops has unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
        out[dtype] = _positive(value, where, f"peak_tflops.{dtype}")
    return out


def _patterns(v: Any, where: str) -> Tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(p, str) and p.strip() for p in v):
        raise ConfigError(f"{where}: match must be a list of non-empty strings")
    for p in v:
        if p.startswith("re:"):
            try:
                re.compile(p[3:])
            except re.error as e:
                raise ConfigError(f"{where}: match pattern {p!r} is not a valid regular expression: {e}") from None
    # Names are compared lowercased, so substrings are lowercased too; regexes are kept as written.
    return tuple(p if p.startswith("re:") else " ".join(p.lower().split()) for p in v)


def _source(v: Any, where: str, origin: str) -> Tuple[str, str]:
    """(url, note) from a {"url", "note"} object or a plain string; user rows may leave it out."""
    if v is None and origin != "built-in":
        return f"user file {origin}", ""
    if isinstance(v, str) and v.strip():
        return v.strip(), ""
    if isinstance(v, dict) and isinstance(v.get("url"), str) and v["url"].strip():
        note = v.get("note", "")
        return v["url"].strip(), note.strip() if isinstance(note, str) else ""
    raise ConfigError(f"{where}: source must be a URL string or an object with a \"url\"")
