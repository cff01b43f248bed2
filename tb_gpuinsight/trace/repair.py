"""Field-by-field decoding of the trace events that do not fit the typed schema.

The fast path decodes a chunk of events at once; one value of the wrong JSON type (ROCm's `"bytes": "1"` on
`hipMemcpy*` events, say) fails the whole chunk. Then each event of the chunk is decoded alone, and only an event that
still fails comes here: each of its fields is decoded on its own, a number written as a string is read as a number
(counted as coerced), and a value that cannot be read is dropped (counted with its reason). Every other field of the
event, and every other event, keeps its value.
"""
from __future__ import annotations

import functools

from collections import Counter
from typing import Any, Dict, Optional, Tuple

import msgspec

_DROP = object()
_JSON_KIND = {ord('"'): "string", ord("["): "array", ord("{"): "object", ord("t"): "boolean", ord("f"): "boolean",
              ord("n"): "null"}


class FieldLog:
    """What reading changed: fields coerced to their type and fields dropped, counted per arg and reason."""

    def __init__(self) -> None:
        self.coerced: Counter = Counter()
        self.dropped: Counter = Counter()

    def coerce(self, field: str, how: str, count: int = 1) -> None:
        """`count` values of `field` were read after a conversion (`how`)."""
        self.coerced[f"{field}: {how}"] += count

    def drop(self, field: str, why: str, count: int = 1) -> None:
        """`count` values of `field` were left out (absent for every analysis) because `why`."""
        self.dropped[f"{field}: {why}"] += count


def _kind(raw: bytes) -> str:
    return _JSON_KIND.get(raw[0], "number") if raw else "nothing"


def _type_label(typ: Any) -> str:
    args = getattr(typ, "__args__", (typ,))
    if any(a in (int, float) for a in args):
        return "number"
    return "text" if str in args else getattr(typ, "__name__", str(typ))


class StructRepairer:
    """Decodes one JSON object that failed its typed schema, field by field (see the module docstring). `nested`
    repairs struct-typed fields (an event's args) the same way; `what` labels its fields in the log."""

    def __init__(self, struct_type: type, log: FieldLog, what: str,
                 nested: Optional[Dict[str, "StructRepairer"]] = None) -> None:
        self.struct_type, self.log, self.what = struct_type, log, what
        self.nested = nested or {}
        self.strict = typed_decoder(struct_type)
        self.loose = typed_decoder(Dict[str, msgspec.Raw])
        self.fields = _fields(struct_type)

    def decode(self, raw: bytes) -> Optional[Any]:
        """The struct, or None when `raw` is no JSON object or lacks a required field."""
        data = bytes(raw)
        try:
            return self.strict.decode(data)
        except (msgspec.ValidationError, UnicodeDecodeError):
            pass
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:  # a cut-off name, say: U+FFFD, not a lost event
            data = data.decode("utf-8", "replace").encode("utf-8")
            self.log.coerce(f"{self.what} text", "invalid UTF-8 replaced by U+FFFD")
            try:
                return self.strict.decode(data)
            except msgspec.ValidationError:
                pass
        try:
            raws = self.loose.decode(data)
        except msgspec.ValidationError:
            return None
        try:
            return self.struct_type(**self._values(raws))
        except TypeError:  # a required field is missing or was dropped
            return None

    def _values(self, raws: Dict[str, msgspec.Raw]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, raw in raws.items():
            spec = self.fields.get(key)
            if spec is None:
                continue
            attr, typ = spec
            raw = bytes(raw)
            if key in self.nested:
                value = self._nested(key, raw)
            else:
                value = msgspec.Raw(raw) if typ is msgspec.Raw else self._value(f"{self.what} {key!r}", raw, typ)
            if value is not _DROP:
                out[attr] = value
        return out

    def _nested(self, key: str, raw: bytes) -> Any:
        if raw == b"null":
            return None
        value = self.nested[key].decode(raw)
        if value is None:
            self.log.drop(f"{self.what} {key!r}", f"{_kind(raw)}, not an object")
            return _DROP
        return value

    def _value(self, label: str, raw: bytes, typ: Any) -> Any:
        try:
            return self._decoder(typ, True).decode(raw)
        except msgspec.ValidationError:
            pass
        kind = _kind(raw)
        if kind == "number" and _type_label(typ) == "text":
            self.log.coerce(label, "number read as text")
            return raw.decode("ascii", "replace")
        try:
            value = self._decoder(typ, False).decode(raw)
        except msgspec.ValidationError as exc:
            self.log.drop(label, _reason(exc, kind))
            return _DROP
        if isinstance(value, float) and value != value:  # "nan": no measurement
            self.log.drop(label, "not a number")
            return _DROP
        self.log.coerce(label, f"{kind} read as {_type_label(typ)}")
        return value

    def _decoder(self, typ: Any, strict: bool) -> msgspec.json.Decoder:
        return typed_decoder(typ, strict)


@functools.lru_cache(maxsize=256)
def typed_decoder(typ: Any, strict: bool = True) -> msgspec.json.Decoder:
    """One JSON decoder per type, made once per process: making one inspects the type (annotations, fields),
    which cost more than decoding a small trace; a decoder holds no state between calls."""
    return msgspec.json.Decoder(typ, strict=strict)


@functools.lru_cache(maxsize=64)
def _fields(struct_type: type) -> Dict[str, Tuple[str, Any]]:
    """JSON key -> (attribute, type) of a msgspec struct (read-only: shared by every repairer of the type)."""
    return {f.encode_name: (f.name, f.type) for f in msgspec.structs.fields(struct_type)}


def _reason(exc: msgspec.ValidationError, kind: str) -> str:
    msg = str(exc).split(" - at ")[0]
    if msg.startswith("Expected"):
        return f"{kind} where {msg[len('Expected '):].split(',')[0].strip('`')} was expected"
    return msg[:80].lower()
