"""Matching of trace devices to the datasheet (its rows, dtypes and loading: `datasheet.py`).

How ``match_device`` picks a row for a Kineto ``deviceProperties`` entry:

1. By name. Every row lists ``match`` patterns: lowercase substrings of the trace name, or ``re:``-prefixed
   regular expressions searched in the lowercased name. A row matches when any pattern does; its specificity
   is the length of the longest text a pattern matched ("h100 80gb hbm3" beats "h100").
2. Properties then weed and rank. A row whose ``num_sms`` or ``compute_major`` differs from the trace's
   ``numSms``/``computeMajor``, or whose ``memory_gb`` is far (outside 0.75-1.25x) from ``totalGlobalMem`` in
   GiB, is ruled out. If that rules out every name match (a MIG slice, a partitioned GPU), the name matches
   are kept and ``how`` warns.
3. Among the rest the winner has, in order: the highest specificity; the most properties that confirm the
   row (SM count, compute major, memory within 10%); the memory closest to the trace's; the earliest place in
   the datasheet. A tie the properties cannot break says so in ``how``.
4. By properties alone, only when no name pattern matches and the name is a generic one of a known vendor
   ("AMD Radeon Graphics" is how ROCm named MI250 GCDs): rows flagged ``props_match`` of that vendor whose SM
   count, compute major and memory all confirm. ``how`` says the match came from properties.
5. Otherwise, or for an empty name, the spec is None and ``how`` says why and how to add the device.

AMD MI250/MI250X rows are per GCD: ROCm shows each of the card's two dies as its own device, so those rows
hold half the card's datasheet figures.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# The datasheet's rows, dtypes and loading, named here too: callers import them with the matching.
from .datasheet import BUILTIN_PATH, DTYPES, ENV_VAR, DeviceSpec, load_datasheet, normalize_dtype  # noqa: F401

# Reported memory (GiB) / datasheet GB: within CONFIRM it confirms the row, outside CONTRADICT it rules it out.
# The gap between them keeps e.g. an 80 GB H100 (79.6 GiB) from being ruled out of a 94 GB row, while
# still ranking the closer row first.
_MEM_CONFIRM = (0.90, 1.10)
_MEM_CONTRADICT = (0.75, 1.25)

_VENDOR_WORDS = {"nvidia": ("nvidia", "geforce", "tesla", "quadro"), "amd": ("amd", "radeon", "instinct")}
_VENDOR_LABEL = {"nvidia": "NVIDIA", "amd": "AMD"}


@dataclass(frozen=True)
class DeviceMatch:
    """What a trace device was taken to be: ``spec`` None means unknown; ``how`` says why, in one line."""

    trace_name: str
    spec: Optional[DeviceSpec]
    how: str
    method: str = "none"  # "name", "properties" or "none"

    @property
    def matched(self) -> bool:
        """True when a datasheet row was found."""
        return self.spec is not None

    def peak_tflops(self, dtype: str) -> Optional[float]:
        """Dense peak for a datasheet dtype key ("bf16") or a trace dtype string ("c10::BFloat16")."""
        if self.spec is None:
            return None
        key = dtype if dtype in DTYPES else normalize_dtype(dtype)
        return self.spec.peak_tflops.get(key) if key else None

    @property
    def dram_gbps(self) -> Optional[float]:
        """DRAM bandwidth in GB/s, or None when unknown."""
        return self.spec.dram_gbps if self.spec is not None else None

    def ridge_point(self, dtype: str) -> Optional[float]:
        """FLOP per DRAM byte where the compute roof meets the memory roof, or None when either is unknown."""
        peak, bw = self.peak_tflops(dtype), self.dram_gbps
        if not peak or not bw:
            return None
        return peak * 1e12 / (bw * 1e9)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form, with the ridge point of every dtype the device has."""
        spec = self.spec
        out: Dict[str, Any] = {"trace_name": self.trace_name, "matched": spec is not None,
                               "method": self.method, "how": self.how}
        if spec is None:
            out.update(name=None, vendor=None, peak_tflops={}, dram_gbps=None, ridge_points={}, source=None)
            return out
        ridges = {d: self.ridge_point(d) for d in spec.peak_tflops}
        out.update(spec.to_dict())
        out["ridge_points"] = {d: r for d, r in ridges.items() if r is not None}
        return out


# ---------------------------------------------------------------------------------------------- matching

@dataclass(frozen=True)
class _Facts:
    """The properties of a trace device that can confirm or rule out a row."""

    num_sms: Optional[int]
    compute_major: Optional[int]
    mem_gib: Optional[float]

    @staticmethod
    def of(props: Mapping[str, Any]) -> "_Facts":
        mem = _number(props.get("totalGlobalMem"))
        return _Facts(num_sms=_whole(props.get("numSms")), compute_major=_whole(props.get("computeMajor")),
                      mem_gib=mem / 2**30 if mem and mem > 0 else None)


@dataclass
class _Check:
    """How one row fares against the trace's properties."""

    confirmed: List[str] = field(default_factory=list)
    contradicted: List[str] = field(default_factory=list)
    mem_distance: float = 0.0


@dataclass
class _Candidate:
    spec: DeviceSpec
    order: int
    pattern: str
    text: str
    check: _Check

    @property
    def specificity(self) -> int:
        return len(self.text)

    def rank(self) -> Tuple[int, int, float, int]:
        return (-self.specificity, -len(self.check.confirmed), self.check.mem_distance, self.order)


MAX_NAME = 256  # characters of a trace's device name that matching looks at (real names are under 100)


def match_device(props: Mapping[str, Any], datasheet: Optional[Sequence[DeviceSpec]] = None) -> DeviceMatch:
    """Match a Kineto ``deviceProperties`` entry to a datasheet row (see the module docstring for the rule)."""
    props = props if isinstance(props, Mapping) else {}
    raw_name = props.get("name")
    # Capped before any regex: a corrupt trace's 10-MB name must not make every re-rating slow.
    trace_name = raw_name[:MAX_NAME].replace("\x00", "").strip() if isinstance(raw_name, str) else ""
    rows = load_datasheet() if datasheet is None else datasheet
    if not trace_name:
        return DeviceMatch("", None, "unknown: the trace gives no device name, so no datasheet row can be "
                                     f"chosen; add one with --devices FILE or {ENV_VAR}")
    facts = _Facts.of(props)
    # Memoised per (name, properties, datasheet): every re-rating (a dtype change in the UI, "all spans") asks again.
    key = (trace_name, facts, id(rows))
    hit = _MATCHES.get(key)
    if hit is not None and hit[0] is rows:
        return hit[1]
    name = " ".join(trace_name.lower().split())
    candidates = _name_candidates(name, rows, facts)
    match = _pick_by_name(trace_name, name, candidates, facts) if candidates else \
        _match_by_props(trace_name, name, rows, facts)
    if len(_MATCHES) >= 256:
        _MATCHES.clear()
    _MATCHES[key] = (rows, match)  # the rows object is kept so that a reused id() can never alias another sheet
    return match


_MATCHES: Dict[Tuple[str, "_Facts", int], Tuple[Sequence[DeviceSpec], DeviceMatch]] = {}


def _name_candidates(name: str, rows: Sequence[DeviceSpec], facts: _Facts) -> List[_Candidate]:
    """Rows with a pattern matching the name, each with its most specific match."""
    out = []
    for order, spec in enumerate(rows):
        best: Optional[Tuple[str, str]] = None
        for pattern in spec.match:
            text = _search(pattern, name)
            if text is not None and (best is None or len(text) > len(best[1])):
                best = (pattern, text)
        if best is not None:
            out.append(_Candidate(spec, order, best[0], best[1], _check(spec, facts)))
    return out


def _search(pattern: str, name: str) -> Optional[str]:
    """The text of ``name`` that ``pattern`` matches, or None."""
    if pattern.startswith("re:"):
        m = _compiled(pattern[3:]).search(name)
        return m.group(0) if m else None
    return pattern if pattern in name else None


@lru_cache(maxsize=512)
def _compiled(expr: str) -> "re.Pattern[str]":
    return re.compile(expr)


def _check(spec: DeviceSpec, facts: _Facts) -> _Check:
    """Which of the row's disambiguators the trace's properties confirm or contradict."""
    c = _Check()
    unit = "CUs" if spec.vendor == "amd" else "SMs"
    if spec.num_sms is not None and facts.num_sms is not None:
        if spec.num_sms == facts.num_sms:
            c.confirmed.append(f"{facts.num_sms} {unit}")
        else:
            c.contradicted.append(f"trace has {facts.num_sms} {unit}, row has {spec.num_sms}")
    if spec.compute_major is not None and facts.compute_major is not None:
        if spec.compute_major == facts.compute_major:
            c.confirmed.append(f"computeMajor {facts.compute_major}")
        else:
            c.contradicted.append(f"trace has computeMajor {facts.compute_major}, row has {spec.compute_major}")
    if spec.memory_gb is not None and facts.mem_gib is not None:
        ratio = facts.mem_gib / spec.memory_gb
        c.mem_distance = abs(math.log(ratio))
        if _MEM_CONFIRM[0] <= ratio <= _MEM_CONFIRM[1]:
            c.confirmed.append(f"{facts.mem_gib:.1f} GiB")
        elif not _MEM_CONTRADICT[0] <= ratio <= _MEM_CONTRADICT[1]:
            c.contradicted.append(f"trace has {facts.mem_gib:.1f} GiB, row has {spec.memory_gb:g} GB")
    return c


def _pick_by_name(trace_name: str, name: str, cands: List[_Candidate], facts: _Facts) -> DeviceMatch:
    """Best name match after properties weed and rank; ``how`` tells what decided it."""
    fitting = [c for c in cands if not c.check.contradicted]
    pool = fitting or cands
    best = min(pool, key=_Candidate.rank)
    how = [_by_name_text(trace_name, best)]
    if best.check.confirmed:
        verb = "confirms" if len(best.check.confirmed) == 1 else "confirm"
        how.append(f"{', '.join(best.check.confirmed)} {verb}")
    ruled_out = [c for c in cands if c.check.contradicted and c.specificity >= best.specificity and fitting]
    if ruled_out:
        how.append("ruled out " + "; ".join(f"{c.spec.name} ({c.check.contradicted[0]})" for c in ruled_out))
    tied = [c for c in pool if c is not best and c.rank()[:3] == best.rank()[:3]]
    if tied:
        verb = "matches" if len(tied) == 1 else "match"
        how.append(f"{', '.join(c.spec.name for c in tied)} {verb} equally and the trace's properties cannot "
                   "tell them apart, so the first datasheet row was used")
    if not fitting:
        why = "a MIG slice" if re.search(r"\bmig\b", name) else "a MIG slice or a partitioned GPU?"
        how.append(f"warning: the trace's properties disagree with every matching row "
                   f"({best.check.contradicted[0]}; {why}); peaks are the whole device's")
    if best.spec.match_note:
        how.append(best.spec.match_note)
    return DeviceMatch(trace_name, best.spec, "; ".join(how), method="name")


def _by_name_text(trace_name: str, c: _Candidate) -> str:
    if c.pattern.startswith("re:"):
        kind = f"pattern {c.pattern[3:]!r} (matched {c.text!r})"
    else:
        kind = f"substring {c.pattern!r}"
    return f"name {trace_name!r} matched {c.spec.name} by {kind}"


def _match_by_props(trace_name: str, name: str, rows: Sequence[DeviceSpec], facts: _Facts) -> DeviceMatch:
    """Generic vendor names only: a props_match row of that vendor whose SMs, compute major and memory confirm."""
    vendor = _vendor_hint(name)
    fits = []
    if vendor is not None:
        for order, spec in enumerate(rows):
            if spec.props_match and spec.vendor == vendor and None not in (spec.num_sms, spec.compute_major,
                                                                           spec.memory_gb):
                check = _check(spec, facts)
                if len(check.confirmed) == 3:
                    fits.append((check.mem_distance, order, spec, check))
    if not fits:
        return DeviceMatch(trace_name, None, _unknown_text(trace_name, vendor, facts))
    fits.sort(key=lambda t: (t[0], t[1]))
    _, _, spec, check = fits[0]
    how = [f"name {trace_name!r} is a generic {_VENDOR_LABEL[vendor]} name; "
           f"matched {spec.name} by properties ({', '.join(check.confirmed)})"]
    if len(fits) > 1:
        how.append(f"{', '.join(f[2].name for f in fits[1:])} also fit; the closest memory size won")
    if spec.match_note:
        how.append(spec.match_note)
    return DeviceMatch(trace_name, spec, "; ".join(how), method="properties")


def _vendor_hint(name: str) -> Optional[str]:
    """The vendor a device name names, if any (whole words only)."""
    words = set(re.findall(r"[a-z0-9]+", name))
    for vendor, keys in _VENDOR_WORDS.items():
        if words.intersection(keys):
            return vendor
    return None


def _unknown_text(trace_name: str, vendor: Optional[str], facts: _Facts) -> str:
    seen = _describe(facts)
    tail = f" (and its properties, {seen}, fit no row either)" if vendor and seen else ""
    return (f"unknown: no datasheet row matches {trace_name!r}{tail}; add it with --devices FILE or "
            f"{ENV_VAR}")


def _describe(facts: _Facts) -> str:
    parts = []
    if facts.num_sms is not None:
        parts.append(f"{facts.num_sms} SMs/CUs")
    if facts.compute_major is not None:
        parts.append(f"computeMajor {facts.compute_major}")
    if facts.mem_gib is not None:
        parts.append(f"{facts.mem_gib:.1f} GiB")
    return ", ".join(parts)


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, str):
        try:
            f = float(v.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _whole(v: Any) -> Optional[int]:
    f = _number(v)
    return int(f) if f is not None and f == int(f) and f >= 0 else None


def describe_all(rows: Iterable[DeviceSpec]) -> List[Dict[str, Any]]:
    """JSON-ready list of datasheet rows (for a "devices" listing in the UI or CLI)."""
    return [r.to_dict() for r in rows]


# Kernel-name prefixes that give away the GPU architecture a trace ran on, newest first: a GPU runs kernels built
# for older architectures (an H100 runs `cutlass_80_*`), never newer ones, so the newest architecture seen wins.
# Each suggests the architecture's most common datasheet row; the user confirms or picks another in the UI.
_ARCH_HINTS: Tuple[Tuple["re.Pattern[str]", str, str], ...] = (
    (re.compile(r"^sm100_|_sm100_|cutlass_100_"), "NVIDIA B200 (HGX, 1000 W)", "Blackwell (sm100) kernel names"),
    (re.compile(r"^sm90_|_sm90_|cutlass_90_|wgmma|warpgroup"), "NVIDIA H100 SXM5 80GB", "Hopper (sm90) kernel names"),
    (re.compile(r"^sm89_|cutlass_89_"), "NVIDIA L40S", "Ada (sm89) kernel names"),
    (re.compile(r"^sm86_|cutlass_86_"), "NVIDIA A10", "Ampere (sm86) kernel names"),
    (re.compile(r"^sm80_|^ampere_|_ampere_|cutlass_80_|cudnn_ampere"), "NVIDIA A100 SXM4 80GB",
     "Ampere (sm80) kernel names (ampere_*, sm80_*)"),
    (re.compile(r"^sm75_|^turing_|_turing_|cutlass_75_"), "NVIDIA T4", "Turing (sm75) kernel names"),
    (re.compile(r"^sm70_|^volta_|_volta_|cutlass_70_"), "NVIDIA Tesla V100 SXM2 32GB", "Volta (sm70) kernel names (volta_*)"),
    (re.compile(r"ISA950|gfx950"), "AMD Instinct MI355X", "gfx950 (CDNA4) Tensile kernel names"),
    (re.compile(r"ISA942|gfx942"), "AMD Instinct MI300X", "gfx942 (CDNA3) Tensile kernel names"),
    (re.compile(r"ISA90a|gfx90a"), "AMD Instinct MI250X (one GCD)",
     "gfx90a (CDNA2: MI210 / MI250 / MI250X) Tensile kernel names"),
)


# Datasheet rows of each hinted architecture (by the hint's row): a row already matched from the trace's properties
# that is of the architecture the kernel names give away is kept as the pick (an MI250 stays an MI250).
_ARCH_ROWS = {"NVIDIA B200 (HGX, 1000 W)": r"\bB200\b|\bGB200\b", "NVIDIA H100 SXM5 80GB": r"\bH100\b|\bH800\b|\bH200\b",
              "NVIDIA L40S": r"\bL40S?\b|\bL4\b|RTX 4090", "NVIDIA A10": r"\bA10G?\b|RTX 3090",
              "NVIDIA A100 SXM4 80GB": r"\bA100\b|\bA800\b", "NVIDIA T4": r"\bT4\b|RTX 2080",
              "NVIDIA Tesla V100 SXM2 32GB": r"\bV100S?\b", "AMD Instinct MI355X": r"MI35\dX",
              "AMD Instinct MI300X": r"MI30\dX|MI325X", "AMD Instinct MI250X (one GCD)": r"MI210|MI250X?\b"}


def device_hint(kernel_names: Iterable[str], datasheet: Optional[Sequence[DeviceSpec]] = None,
                short_name: Callable[[str], str] = lambda n: n,
                matched: Iterable[str] = ()) -> Optional[Dict[str, str]]:
    """The datasheet row a trace's kernel names point to ({"name", "why", "example"}), or None: for a device the
    trace does not name (2021 traces, down-sampled traces) or names ambiguously. `matched`: rows the trace's
    devices were already matched to (from their properties); one of the hinted architecture is the hint itself."""
    names = list(kernel_names)
    known = {r.name for r in (datasheet if datasheet is not None else load_datasheet())}
    for pattern, row, why in _ARCH_HINTS:
        hit = next((n for n in names if pattern.search(n)), None)
        if hit is not None and row in known:
            same_arch = [m for m in matched if m in known and re.search(_ARCH_ROWS.get(row, "$^"), m)]
            return {"name": same_arch[0] if same_arch else row, "why": why, "example": short_name(hit)[:100]}
    return None
