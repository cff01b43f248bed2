"""The report as Markdown (GitHub-flavoured tables): the same sections, in the same order, as the HTML page."""
from __future__ import annotations

from typing import Any, Dict, List

from ..analysis.kernels import coverage
from . import fmt


def md(text: Any) -> str:
    """Text from a trace (names, labels) made inert: no emphasis, links, HTML or table breaks."""
    out = str(text).replace("\r", " ").replace("\n", " ")
    for ch in "\\`*_[]|#":
        out = out.replace(ch, "\\" + ch)
    return out.replace("<", "&lt;").replace(">", "&gt;")


def code(text: Any) -> str:
    """A name as a code span (no Markdown inside; a table's pipe still needs its escape)."""
    return "`" + str(text).replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def render(report: Dict[str, Any]) -> str:
    """The whole report as Markdown text."""
    lines: List[str] = _title(report)
    for part in SECTIONS:
        lines += part(report)
    return "\n".join(lines).rstrip() + "\n"


def _title(r: Dict[str, Any]) -> List[str]:
    return [f"# GPU Insight report: {md(r['subject']['label'])}", "", md(fmt.subject(r)), ""]


def _source(text: str) -> List[str]:
    return [f"<sub>Source: {md(text)}</sub>", ""]


def _devices(r: Dict[str, Any]) -> List[str]:
    out = ["## Device and estimate coverage", ""]
    if not r["devices"]:
        out += ["No GPU in this trace (a CPU-only run): no device figures.", ""]
    for d in r["devices"]:
        out.append(f"- **GPU {d['id']}**: {md(d['trace_name'] or '(no name)')} rated as "
                   f"{md(d['datasheet'] or 'unknown (no datasheet row)')}; FLOPs known for "
                   f"{fmt.figure(d['flops_known'])} of compute kernel time, bytes for {fmt.figure(d['bytes_known'])}; "
                   f"efficiency {fmt.figure(d['efficiency'])}. <sub>{md(d['how'])}</sub>")
    return out + [""] if r["devices"] else out


def _step(r: Dict[str, Any]) -> List[str]:
    if "step" not in r:
        return ["## Step time", "", "No steps: " + md("; ".join(r["notes"]) or "nothing to measure"), ""]
    t, u = r["step"]["time"], r["utilization"]
    tflops = fmt.figure(u["tflops"]) if u["tflops"]["value"] is not None else "TFLOP/s unknown"
    gpu = (f" GPU busy **{fmt.figure(u['gpu_busy'])}**, {tflops}, MFU **{fmt.figure(u['mfu'])}** "
           f"({coverage.label(fmt.figure(u['flops_known']))}), Tensor Cores "
           f"{fmt.figure(u['tensor_cores'])}." if r["devices"] else " No GPU: no utilisation figures.")
    out = ["## Step time", "",
           f"**{fmt.figure(t['mean'])}** per step (median {fmt.figure(t['median'])}, p90 {fmt.figure(t['p90'])}, "
           f"spread {fmt.figure(t['spread'])}).{gpu}", ""]
    out += _table(r["step"]["split"])
    if r["step"].get("phases"):
        out += _table(r["step"]["phases"])
    return out + _source(fmt.step_source(r))


def _recommendations(r: Dict[str, Any]) -> List[str]:
    recs = r.get("recommendations")
    if recs is None:
        return []
    out = ["## Recommendations, by recoverable time", ""]
    if not recs:
        return out + ["No recommendation: no rule's threshold is reached.", ""]
    for rec in recs:
        out.append(f"{rec['rank']}. **{md(rec['title'])}**: ~{fmt.figure(rec['recoverable'])} "
                   f"({fmt.figure(rec['recoverable_share'])} of the step). {md(rec['advice'])}")
        out.append(f"   - Evidence: {md(fmt.evidence(rec['evidence']))}")
        for item in rec["items"]:
            out.append(f"   - {code(item['display_name'])}: {md(fmt.evidence(item['evidence']))}")
    return out + [""]


def _waste(r: Dict[str, Any]) -> List[str]:
    out = ["## Top kernels by waste", ""]
    return out + (_table(r["waste"], names=("kernel",)) if r["waste"]["rows"] else ["No rated kernel.", ""]) + \
        _source(r["waste"]["source"])


def _memory(r: Dict[str, Any]) -> List[str]:
    m = r["memory"]
    out = ["## Memory peak", ""]
    if not m["rows"]:
        return out + [md(m.get("note", "no memory events")), ""]
    return out + _table(m) + _source("; ".join([m["source"]] + [f"{row['device']}: {row['source']}"
                                                                for row in m["rows"]]))


def _distributed(r: Dict[str, Any]) -> List[str]:
    d = r.get("distributed")
    if d is None:
        return []
    out = [f"## Distributed: {d['ranks']} ranks (world size {d['world_size'] or '?'})", "",
           f"Step time per rank: min {fmt.figure(d['step_min'])}, median {fmt.figure(d['step_median'])}, "
           f"max {fmt.figure(d['step_max'])}.", ""]
    s = d["straggler"]
    out += [f"**Straggler: rank {s['rank']}** ({md(s['worker'])}): {md(s['evidence'])}.", ""] if s else \
        ["No straggler: no rank arrived last at most collectives.", ""]
    out += [f"- {md(p)}" for p in d["problems"]] + ([""] if d["problems"] else [])
    return out + _table(d["collectives"]) + _source(d["collectives"]["source"])


def _comparison(r: Dict[str, Any]) -> List[str]:
    c = r.get("comparison")
    if c is None:
        return []
    out = [f"## Changes from the baseline {md(c['baseline'])}", ""]
    out += [f"- {_metric_line(m)}" for m in c["metrics"]]
    if not c["kernels"]["rows"]:
        return out + ["", "No GPU kernel on either side.", ""]
    g = c["gpu_time"]
    out += [f"- GPU activity time: {fmt.figure(g['a'])} \u2192 {fmt.figure(g['b'])} ({fmt.figure(g['delta_pct'])})", ""]
    att = c.get("attribution")
    if att:
        out += ["### What accounts for the change", ""] + _table(att["classes"]) + \
            _table(att["top"], names=("kernel",)) + _source(att["classes"]["source"])
    return out + _table(c["kernels"], names=("kernel",)) + _source(c["kernels"]["source"])


def _metric_line(m: Dict[str, Any]) -> str:
    """One headline metric against the baseline, with the noise band and the verdict (outside in bold)."""
    v = fmt.verdict(m)
    text = fmt.VERDICTS[v]
    return f"{md(fmt.change(m))}: " + (f"**{text}**" if v == "outside" else text)


def _notes(r: Dict[str, Any]) -> List[str]:
    return (["## Notes", ""] + [f"- {md(n)}" for n in r["notes"]] + [""]) if r["notes"] else []


def _table(t: Dict[str, Any], names=()) -> List[str]:
    cols = t["columns"]
    out = ["| " + " | ".join(md(fmt.header(c)) for c in cols) + " |",
           "|" + "|".join("---:" if fmt.numeric(c) else "---" for c in cols) + "|"]
    for row in t["rows"]:
        out.append("| " + " | ".join(code(row[c["key"]]) if c["key"] in names else md(fmt.cell(row, c))
                                     for c in cols) + " |")
    return out + [""]


SECTIONS = (_devices, _step, _recommendations, _waste, _memory, _distributed, _comparison, _notes)
