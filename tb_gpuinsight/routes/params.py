"""Validation of route parameters: every value is checked (type, range, allowed set, length) before use, and
runs / workers / spans are names looked up among discovered ones, never paths."""
from __future__ import annotations

import hashlib
import re
from typing import Iterable, Optional, Tuple

from ..errors import GpuInsightError

MAX_TEXT = 500
ALL_SPANS = "all"


class BadRequest(GpuInsightError):
    """A route parameter that is missing or malformed (HTTP 400)."""


def text(request, name: str, default: Optional[str] = None, required: bool = False) -> str:
    """A string parameter, at most MAX_TEXT characters, no NUL."""
    value = request.args.get(name)
    if value is None or value == "":
        if required:
            raise BadRequest(f"missing parameter {name!r}")
        return default if default is not None else ""
    if len(value) > MAX_TEXT or "\x00" in value:
        raise BadRequest(f"parameter {name!r} is too long or malformed")
    return value


_KEY = re.compile(r"^[0-9a-f]{16}$")


def name_key(name: str) -> str:
    """A short, stable key for a name of any length (kernel names reach tens of kilobytes): what rows carry and
    routes take back instead of the name."""
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def key(request, name: str) -> str:
    """An optional `name_key` value: 16 lower-case hex characters, or ""."""
    value = request.args.get(name) or ""
    if value and not _KEY.match(value):
        raise BadRequest(f"parameter {name!r} must be a key from the table (16 hex characters)")
    return value


def choice(request, name: str, allowed: Iterable[str], default: str) -> str:
    """One of `allowed`."""
    allowed = tuple(allowed)
    value = text(request, name, default=default)
    if value not in allowed:
        raise BadRequest(f"parameter {name!r} must be one of {', '.join(allowed)}")
    return value


def integer(request, name: str, default: int, lo: int, hi: int) -> int:
    """An integer in [lo, hi]."""
    value = text(request, name, default=str(default))
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer") from None
    if not lo <= number <= hi:
        raise BadRequest(f"parameter {name!r} must be between {lo} and {hi}")
    return number


def device(request) -> Optional[int]:
    """An optional GPU device id."""
    if not request.args.get("device"):
        return None
    return integer(request, "device", 0, 0, 1 << 16)


def device_name(request, datasheet, prefix: str = "") -> Optional[str]:
    """Optional `device_name`: a datasheet row's exact name, to rate the selection as that device."""
    name = text(request, prefix + "device_name")
    if not name:
        return None
    if name not in {spec.name for spec in datasheet}:
        raise BadRequest(f"parameter {prefix}device_name: {name!r} is not a datasheet device")
    return name


def selection(request, prefix: str = "") -> Tuple[str, str, str]:
    """(run, worker, span) from `run`, `worker`, `span` (span defaults to "all"); with a prefix, e.g. `a_run`."""
    return (text(request, prefix + "run", required=True), text(request, prefix + "worker", required=True),
            text(request, prefix + "span", default=ALL_SPANS))
