"""Text from a trace or a file name, made safe for every output (terminal, JSON, CSV, Parquet)."""
from __future__ import annotations


def safe_text(text: str) -> str:
    """`text` with what UTF-8 cannot encode (the lone surrogates Python makes of a file name's invalid bytes)
    replaced by U+FFFD; valid text is returned as is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
