"""A datasheet row from the name a person types: "B200", "NVIDIA B200", "MI300X", "h100 sxm", "H100 80GB HBM3".

Case, spaces, dashes and vendor words (NVIDIA, AMD, Tesla, GeForce, Instinct) do not count: a name is its words, and
a row is taken when every word of the name is (or, for a word without a digit, begins) a word of exactly one row's
name, or when the name is one a row lists for itself (torch's "NVIDIA H100 80GB HBM3"). A name that fits several
rows ("A100") names none of them: the rows are listed to choose from. For a name that fits none, rows are suggested
by model number ("GB200": B200 and H200, "L40": L40S).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigError
from .datasheet import DeviceSpec

_VENDOR_WORDS = frozenset({"nvidia", "amd", "tesla", "geforce", "instinct", "radeon", "intel"})


@dataclass(frozen=True)
class Resolved:
    """The row a name means (None when it means no single row), the rows it fits (several: ambiguous) and rows to
    suggest when it fits none."""
    spec: Optional[DeviceSpec]
    fits: Tuple[str, ...] = ()
    suggestions: Tuple[str, ...] = field(default=())

    def refusal(self, name: str) -> str:
        """One line: why `name` names no row, and which rows to try."""
        if len(self.fits) > 1:
            return f"{name!r} fits {len(self.fits)} datasheet rows: {', '.join(map(repr, self.fits))}; name one"
        hint = f"; did you mean {', '.join(map(repr, self.suggestions))}?" if self.suggestions else ""
        return f"{name!r} is not a datasheet row{hint}"


def words(name: str) -> Tuple[str, ...]:
    """A device name as its words: lower case, split at spaces and punctuation, vendor words left out."""
    return tuple(w for w in re.split(r"[^a-z0-9.]+", name.lower()) if w and w not in _VENDOR_WORDS)


def resolve_device(name: str, rows: Sequence[DeviceSpec]) -> Resolved:
    """The datasheet row `name` means (see the module docstring)."""
    exact = [r for r in rows if r.name == name] or [r for r in rows if r.name.lower() == name.strip().lower()]
    if exact:
        return Resolved(exact[0], (exact[0].name,))
    wanted = words(name)
    if not wanted:
        return Resolved(None)
    fits = [r for r in rows if all(any(_fits(q, w) for w in words(r.name)) for q in wanted)]
    if len(fits) == 1:
        return Resolved(fits[0], (fits[0].name,))
    if len(fits) > 1:
        return Resolved(None, tuple(r.name for r in fits))
    spelled = [r for r in rows if any(not m.startswith("re:") and words(m) == wanted for m in r.match)]
    if len(spelled) == 1:  # a name the row lists for itself, as torch reports it ("NVIDIA H100 80GB HBM3")
        return Resolved(spelled[0], (spelled[0].name,))
    return Resolved(None, tuple(r.name for r in spelled), tuple(_by_model_number(wanted, rows)))


def datasheet_rows(name: Optional[str] = None, devices_file: Optional[str] = None) -> List[Dict[str, Any]]:
    """The datasheet's rows as JSON-ready dicts (the built-in ones and a user file's); with `name`, the rows it fits
    (one, or several for "H100"). A name fitting none raises ConfigError naming rows to try."""
    from .devices import describe_all, load_datasheet

    rows = load_datasheet(devices_file)
    if name:
        found = resolve_device(name, rows)
        if not found.fits:
            raise ConfigError(found.refusal(name))
        rows = [r for r in rows if r.name in found.fits]
    return describe_all(rows)


def _fits(typed: str, word: str) -> bool:
    """A typed word fits a row's word when equal; a word without a digit also when it begins it ("sxm": "sxm5"), a
    model never ("l40" is not the L40S, "a10" not the A100)."""
    return typed == word or (not any(c.isdigit() for c in typed) and word.startswith(typed))


def _model(ws: Sequence[str]) -> str:
    """The model word of a name: its first word holding a digit ("b200", "mi300x", "4090")."""
    return next((w for w in ws if any(c.isdigit() for c in w)), "")


def _by_model_number(wanted: Sequence[str], rows: Sequence[DeviceSpec], most: int = 4) -> List[str]:
    """Rows to suggest, one per model, nearest first: a model that begins with the typed one ("l40": L40S), then one
    of the same letters ("b100": B200), of the same number ("gb200": B200, H200), then the closest spelled."""
    typed = _model(wanted)
    if not typed:
        return []
    letters, number = re.sub(r"\d", "", typed), re.sub(r"\D", "", typed)
    scored = []
    for i, row in enumerate(rows):
        model = _model(words(row.name))
        same = (re.sub(r"\d", "", model) == letters, re.sub(r"\D", "", model) == number)
        score = (model.startswith(typed), same[0], same[1], difflib.SequenceMatcher(None, typed, model).ratio())
        if score[0] or score[1] or score[2] or score[3] >= 0.6:
            scored.append((score, -i, model, row.name))
    found, models = [], set()
    for _, _, model, name in sorted(scored, reverse=True):
        if model not in models:
            models.add(model)
            found.append(name)
    return found[:most]
