"""The trace's own description (deviceProperties, baseTimeNanoseconds, distributedInfo), checked once at read time.

A number outside its sane range (a 401-digit SM count, a base time past year 2100, a rank of 2**70) is no
property of a real machine or run: it is dropped here, with its reason in the trace's field log, so that no
analysis ever sees it. Numbers written as strings are read as numbers (and counted).
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

import msgspec

from .repair import FieldLog

Range = Tuple[float, float]

_TIB = 2 ** 40
# deviceProperties keys with the range a real GPU's value lies in (generously); other numeric keys get _ANY_NUMBER.
DEVICE_RANGES: Dict[str, Range] = {
    "numSms": (1, 100_000), "totalGlobalMem": (1, 64 * _TIB), "computeMajor": (0, 100), "computeMinor": (0, 100),
    "major": (0, 100), "minor": (0, 100),
    "maxThreadsPerBlock": (1, 1 << 20), "maxThreadsPerMultiprocessor": (1, 1 << 20), "regsPerBlock": (1, 1 << 30),
    "regsPerMultiprocessor": (1, 1 << 30), "warpSize": (1, 1024), "sharedMemPerBlock": (0, _TIB),
    "sharedMemPerMultiprocessor": (0, _TIB), "sharedMemPerBlockOptin": (0, _TIB), "l2CacheSize": (0, _TIB),
    "clockRate": (0, 1e9), "memoryClockRate": (0, 1e9), "memoryBusWidth": (0, 1 << 20),
}
_ANY_NUMBER: Range = (-2.0 ** 53, 2.0 ** 53)  # integers exact in a float: any count or size of a real machine
# Base time: ns since the epoch, up to 2100-01-01 (4.1e18 ns) - past it, a corrupt value.
BASE_TIME_RANGE: Range = (0, 4_102_444_800 * 10 ** 9)
# distributedInfo: ranks and sizes of a job (a million processes is beyond any job to date).
DISTRIBUTED_RANGES: Dict[str, Range] = {"rank": (0, 1 << 24), "world_size": (1, 1 << 24), "local_rank": (0, 1 << 24),
                                        "local_world_size": (1, 1 << 24), "pg_count": (0, 1 << 24)}


def decode_header_value(raw: msgspec.Raw, key: str, log: FieldLog) -> Any:
    """One top-level value of the trace, None when absent. Numbers beyond a float (1e999) become infinities, to be
    dropped by the range checks below, rather than failing the whole trace; invalid UTF-8 becomes U+FFFD."""
    data = bytes(raw)
    if not data:
        return None
    try:
        return msgspec.json.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    try:
        return json.loads(data.decode("utf-8", "replace"), parse_int=_int_or_infinite)
    except (ValueError, RecursionError) as exc:
        log.drop(key, f"unreadable ({str(exc)[:60]})")
        return None


def _int_or_infinite(text: str) -> float:
    """A JSON integer; one of hundreds of digits (past any range below, and past Python's int parsing limit) as
    an infinity of its sign."""
    if len(text) > 400:
        return float("-inf") if text.startswith("-") else float("inf")
    return int(text)


def sane_number(value: Any, limits: Range, label: str, log: FieldLog) -> Optional[float]:
    """`value` as an int or float within `limits`, or None (logged) when it is none or outside. Strings holding a
    number are read as that number (logged as coerced)."""
    if isinstance(value, bool) or value is None:
        return None if value is None else _dropped(label, "a boolean, not a number", log)
    if isinstance(value, str):
        number = _parse(value)
        if number is None:
            return _dropped(label, "text that is not a number", log)
        log.coerce(label, "string read as number")
        value = number
    if not isinstance(value, (int, float)):
        return _dropped(label, f"a {type(value).__name__}, not a number", log)
    lo, hi = limits
    try:
        inside = lo <= value <= hi  # compares big ints exactly, no float conversion
    except OverflowError:
        inside = False
    if not inside or (isinstance(value, float) and not math.isfinite(value)):
        return _dropped(label, f"outside {lo:,.0f}..{hi:,.0f}", log)
    return value


def _parse(text: str) -> Optional[float]:
    text = text.strip()
    if len(text) > 40:
        return None
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if number.is_integer() and abs(number) < 2 ** 63 else number


def _dropped(label: str, why: str, log: FieldLog) -> None:
    log.drop(label, why)
    return None


def _label(where: str, key: str, known: Dict[str, Range]) -> str:
    """A log label: known keys by name; any other under one label, so that a file cannot grow the log per key."""
    return f"{where} {key}" if key in known else f"{where} (another numeric key)"


def sane_devices(props: Any, log: FieldLog) -> List[Dict[str, Any]]:
    """deviceProperties (or 2021's computeProperties) normalised to one key set, every number in its range."""
    if not isinstance(props, list):
        return []
    out = []
    for i, p in enumerate(props):
        if not isinstance(p, dict):
            continue
        d = {}
        for key, value in p.items():
            if isinstance(value, (int, float, str)) and key in DEVICE_RANGES or \
                    isinstance(value, (int, float)) and not isinstance(value, bool):
                value = sane_number(value, DEVICE_RANGES.get(key, _ANY_NUMBER), _label("deviceProperties", key,
                                                                                       DEVICE_RANGES), log)
                if value is None:
                    continue
            d[key] = value
        d["id"] = d["id"] if isinstance(d.get("id"), int) and 0 <= d["id"] < 1 << 31 else i  # else: the position
        d["name"] = d["name"][:1000] if isinstance(d.get("name"), str) else ""
        if "computeMajor" not in d and "major" in d:
            d["computeMajor"], d["computeMinor"] = d.get("major"), d.get("minor")
        out.append(d)
    return out


def sane_base_time(value: Any, log: FieldLog) -> Optional[int]:
    """baseTimeNanoseconds as an int in BASE_TIME_RANGE, or None."""
    number = sane_number(value, BASE_TIME_RANGE, "baseTimeNanoseconds", log)
    return None if number is None else int(number)


def sane_distributed(info: Any, log: FieldLog) -> Optional[Dict[str, Any]]:
    """distributedInfo with ranks and sizes in range (read from strings where written so); other numbers in
    _ANY_NUMBER."""
    if not isinstance(info, dict):
        return None
    out = {}
    for key, value in info.items():
        if key in DISTRIBUTED_RANGES or isinstance(value, (int, float)) and not isinstance(value, bool):
            value = sane_number(value, DISTRIBUTED_RANGES.get(key, _ANY_NUMBER),
                                _label("distributedInfo", key, DISTRIBUTED_RANGES), log)
            if value is None:
                continue
            if key in DISTRIBUTED_RANGES:
                if not float(value).is_integer():
                    log.drop(f"distributedInfo {key}", "not a whole number")
                    continue
                value = int(value)
        out[key] = value
    return out
