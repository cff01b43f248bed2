"""The report as one standalone HTML page: inline CSS, no script, no external resource; every string from a
trace (kernel, run and span names, evidence) goes through `html.escape`, so a hostile name shows as text."""
from __future__ import annotations

from html import escape
from typing import Any, Dict, List

from . import fmt

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
 padding:0 16px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #d0d7de;
 padding-bottom:4px}
.sub{color:#59636e}.src{color:#59636e;font-size:12px;margin-top:4px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;
 min-width:130px}.card b{display:block;font-size:18px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e5e8eb;padding:4px 8px;
 text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
ol.recs li{margin-bottom:10px}.bad{color:#b42318;font-weight:600}.ok{color:#1a7f37}
@media (prefers-color-scheme:dark){body{background:#0d1117;color:#e6edf3}.sub,.src{color:#9198a1}
 th,td{border-color:#30363d}.card,h2{border-color:#30363d}.bad{color:#ff7b72}.ok{color:#3fb950}}
"""


def render(report: Dict[str, Any]) -> str:
    """The whole report as an HTML document."""
    s = report["subject"]
    body = [f"<h1>GPU Insight report: {escape(s['label'])}</h1>",
            f"<p class=sub>{escape(fmt.subject(report))}</p>"]
    for part in SECTIONS:
        body += part(report)
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>GPU Insight report: {escape(s['label'])}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _section(key: str, title: str, inner: List[str]) -> List[str]:
    return [f"<section id={key}><h2>{escape(title)}</h2>", *inner, "</section>"]


def _src(text: str) -> str:
    return f"<div class=src>Source: {escape(text)}</div>"


def _card(label: str, f: Dict[str, Any]) -> str:
    return f"<div class=card title='{escape(f['source'], quote=True)}'>{escape(label)}<b>{escape(fmt.figure(f))}</b></div>"


def _devices(r: Dict[str, Any]) -> List[str]:
    items = [f"<li><b>GPU {d['id']}</b>: {escape(d['trace_name'] or '(no name)')} rated as "
             f"{escape(d['datasheet'] or 'unknown (no datasheet row)')}; FLOPs known for "
             f"{escape(fmt.figure(d['flops_known']))} of compute kernel time, bytes for {escape(fmt.figure(d['bytes_known']))}"
             f"; efficiency {escape(fmt.figure(d['efficiency']))}.<div class=src>{escape(d['how'])}</div></li>"
             for d in r["devices"]]
    inner = [f"<ul>{''.join(items)}</ul>"] if items else ["<p>No GPU in this trace (a CPU-only run).</p>"]
    return _section("devices", "Device and estimate coverage", inner)


def _step(r: Dict[str, Any]) -> List[str]:
    if "step" not in r:
        return _section("step", "Step time", [f"<p>No steps: {escape('; '.join(r['notes']))}</p>"])
    t, u = r["step"]["time"], r["utilization"]
    cards = [_card("step time (mean)", t["mean"]), _card("median", t["median"]), _card("p90", t["p90"]),
             _card("spread", t["spread"])]
    if r["devices"]:  # a CPU-only run has no GPU figures to show
        cards += [_card("GPU busy", u["gpu_busy"]), _card("achieved", u["tflops"]), _card("MFU", u["mfu"]),
                  _card("FLOPs known", u["flops_known"]), _card("Tensor Cores", u["tensor_cores"])]
    phases = [_table(r["step"]["phases"])] if r["step"].get("phases") else []
    return _section("step", "Step time", [f"<div class=cards>{''.join(cards)}</div>", _table(r["step"]["split"]),
                                          *phases, _src(fmt.step_source(r))])


def _recommendations(r: Dict[str, Any]) -> List[str]:
    recs = r.get("recommendations")
    if recs is None:
        return []
    if not recs:
        return _section("recommendations", "Recommendations, by recoverable time",
                        ["<p>No recommendation: no rule's threshold is reached.</p>"])
    items = []
    for rec in recs:
        kernels = "".join(f"<li><code>{escape(i['display_name'])}</code>: {escape(fmt.evidence(i['evidence']))}</li>"
                          for i in rec["items"])
        items.append(f"<li><b>{escape(rec['title'])}</b>: ~{escape(fmt.figure(rec['recoverable']))} "
                     f"({escape(fmt.figure(rec['recoverable_share']))} of the step). {escape(rec['advice'])}"
                     f"<div class=src>Evidence: {escape(fmt.evidence(rec['evidence']))}. "
                     f"Threshold: {escape(rec['threshold'])}</div>{f'<ul>{kernels}</ul>' if kernels else ''}</li>")
    return _section("recommendations", "Recommendations, by recoverable time",
                    [f"<ol class=recs>{''.join(items)}</ol>"])


def _waste(r: Dict[str, Any]) -> List[str]:
    w = r["waste"]
    inner = [_table(w, names=("kernel",))] if w["rows"] else ["<p>No rated kernel.</p>"]
    return _section("waste", "Top kernels by waste", inner + [_src(w["source"])])


def _memory(r: Dict[str, Any]) -> List[str]:
    m = r["memory"]
    if not m["rows"]:
        return _section("memory", "Memory peak", [f"<p>{escape(m.get('note', 'no memory events'))}</p>"])
    return _section("memory", "Memory peak", [_table(m), _src("; ".join([m["source"]] + [
        f"{row['device']}: {row['source']}" for row in m["rows"]]))])


def _distributed(r: Dict[str, Any]) -> List[str]:
    d = r.get("distributed")
    if d is None:
        return []
    s = d["straggler"]
    inner = [f"<p>Step time per rank: min {escape(fmt.figure(d['step_min']))}, median "
             f"{escape(fmt.figure(d['step_median']))}, max {escape(fmt.figure(d['step_max']))}.</p>",
             f"<p class=bad>Straggler: rank {s['rank']} ({escape(s['worker'])}): {escape(s['evidence'])}.</p>" if s
             else "<p>No straggler: no rank arrived last at most collectives.</p>"]
    inner += [f"<p>{escape(p)}</p>" for p in d["problems"]]
    return _section("distributed", f"Distributed: {d['ranks']} ranks (world size {d['world_size'] or '?'})",
                    inner + [_table(d["collectives"]), _src(d["collectives"]["source"])])


def _comparison(r: Dict[str, Any]) -> List[str]:
    c = r.get("comparison")
    if c is None:
        return []
    items = []
    for m in c["metrics"]:
        v = fmt.verdict(m)
        css = {"outside": "bad", "within": "ok"}.get(v, "sub")
        items.append(f"<li>{escape(fmt.change(m))}: <span class={css}>{escape(fmt.VERDICTS[v])}</span></li>")
    title = f"Changes from the baseline {c['baseline']}"
    if not c["kernels"]["rows"]:
        return _section("comparison", title, [f"<ul>{''.join(items)}</ul>", "<p>No GPU kernel on either side.</p>"])
    g = c["gpu_time"]
    items.append(f"<li>GPU activity time: {escape(fmt.figure(g['a']))} \u2192 {escape(fmt.figure(g['b']))} "
                 f"({escape(fmt.figure(g['delta_pct']))})</li>")
    att = c.get("attribution")
    behind = ["<h3>What accounts for the change</h3>", _table(att["classes"]), _table(att["top"], names=("kernel",)),
              _src(att["classes"]["source"])] if att else []
    return _section("comparison", title, [f"<ul>{''.join(items)}</ul>", *behind, _table(c["kernels"], names=("kernel",)),
                                          _src(c["kernels"]["source"])])


def _notes(r: Dict[str, Any]) -> List[str]:
    if not r["notes"]:
        return []
    return _section("notes", "Notes", [f"<ul>{''.join(f'<li>{escape(n)}</li>' for n in r['notes'])}</ul>"])


def _table(t: Dict[str, Any], names=()) -> str:
    head = "".join(f"<th{' class=n' if fmt.numeric(c) else ''}>{escape(fmt.header(c))}</th>" for c in t["columns"])
    rows = []
    for row in t["rows"]:
        cells = []
        for c in t["columns"]:
            if c["key"] in names:
                cells.append(f"<td><code title='{escape(str(row.get('name', '')), quote=True)}'>"
                             f"{escape(str(row[c['key']]))}</code></td>")
            else:
                cells.append(f"<td{' class=n' if fmt.numeric(c) else ''}>{escape(fmt.cell(row, c))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


SECTIONS = (_devices, _step, _recommendations, _waste, _memory, _distributed, _comparison, _notes)
