"""Field-by-field decoding of the trace events that do not fit the typed schema.

The fast path decodes a chunk of events at once; one value of the wrong JSON type (ROCm's `"bytes": "1"` on
`hipMemcpy*` events, say) fails the whole chunk. Then each event of the chunk is decoded alone, and only an event that
still fails comes here: each of its fields is decoded on its own, a number written as a string is read as a number
(counted as coerced), and a value that cannot be read is dropped (counted with its reason). Every other field of the
event, and every other event, keeps its value.
"""
from __future__ import annotations

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


class EventRepairer:
    """Decodes one event that failed the typed schema, field by field (see the module docstring)."""

    def __init__(self, event_type: type, args_type: type, log: FieldLog) -> None:
        self.event_type, self.args_type, self.log = event_type, args_type, log
        self.strict = msgspec.json.Decoder(event_type)
        self.loose = msgspec.json.Decoder(Dict[str, msgspec.Raw])
        self.event_fields = _fields(event_type)
        self.arg_fields = _fields(args_type)
        self._decoders: Dict[Tuple[Any, bool], msgspec.json.Decoder] = {}

    def decode(self, raw: bytes) -> Optional[Any]:
        """The event, or None when it is not a JSON object at all."""
        data = bytes(raw)
        try:
            return self.strict.decode(data)
        except UnicodeDecodeError:
            data = data.decode("utf-8", "replace").encode("utf-8")  # a cut-off name: U+FFFD, not a lost event
            self.log.coerce("text", "invalid UTF-8 replaced by U+FFFD")
            try:
                return self.strict.decode(data)
            except msgspec.ValidationError:
                pass
        except msgspec.ValidationError:
            pass
        try:
            top = self.loose.decode(data)
        except msgspec.ValidationError:
            return None
        values = self._values(top, self.event_fields, "event")
        event = self.event_type(**{k: v for k, v in values.items() if k != "args"})
        args = top.get("args")
        if args is not None and bytes(args) != b"null":
            event.args = self._args(bytes(args))
        return event

    def _args(self, raw: bytes) -> Optional[Any]:
        try:
            fields = self.loose.decode(raw)
        except msgspec.ValidationError:
            self.log.drop("args", f"{_kind(raw)}, not an object")
            return None
        return self.args_type(**self._values(fields, self.arg_fields, "arg"))

    def _values(self, raws: Dict[str, msgspec.Raw], fields: Dict[str, Tuple[str, Any]], what: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, raw in raws.items():
            spec = fields.get(key)
            if spec is None or key == "args" and what == "event":
                continue
            attr, typ = spec
            value = raw if typ is msgspec.Raw else self._value(f"{what} {key!r}", bytes(raw), typ)
            if value is not _DROP:
                out[attr] = value
        return out

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
        key = (typ, strict)
        dec = self._decoders.get(key)
        if dec is None:
            dec = self._decoders[key] = msgspec.json.Decoder(typ, strict=strict)
        return dec


def _fields(struct_type: type) -> Dict[str, Tuple[str, Any]]:
    """JSON key -> (attribute, type) of a msgspec struct."""
    return {f.encode_name: (f.name, f.type) for f in msgspec.structs.fields(struct_type)}


def _reason(exc: msgspec.ValidationError, kind: str) -> str:
    msg = str(exc).split(" - at ")[0]
    if msg.startswith("Expected"):
        return f"{kind} where {msg[len('Expected '):].split(',')[0].strip('`')} was expected"
    return msg[:80].lower()
