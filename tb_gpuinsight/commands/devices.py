"""`tb-gpuinsight devices [NAME] [--format table|json] [--devices FILE]`: the datasheet's rows (the names `--device`
and the Device picker take), each with its dense peaks per dtype, memory bandwidth, GPU-to-GPU link and source;
NAME (a common name: "B200", "h100 sxm") shows the rows it fits."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence

from ..trace.text import safe_text


def register(sub) -> None:
    """Add the `devices` subcommand."""
    p = sub.add_parser("devices", help="list the device datasheet: peaks per dtype, memory bandwidth, links, source")
    p.add_argument("name", nargs="?", metavar="NAME", help="only the rows this name fits ('B200', 'h100 sxm')")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--devices", metavar="FILE", help="JSON file adding or overriding datasheet rows "
                                                     "(also read from $TB_GPUINSIGHT_DEVICES)")
    p.set_defaults(func=_cmd_devices)


def _cmd_devices(args) -> int:
    from ..estimate.datasheet import DTYPES
    from ..estimate.device_names import datasheet_rows

    described = datasheet_rows(args.name, args.devices)
    if args.format == "json":
        print(json.dumps({"devices": described}, indent=1, ensure_ascii=True))
        return 0
    for line in table_lines(described, _dtypes(described, DTYPES)):
        print(line)
    return 0


def _dtypes(rows: Sequence[Dict[str, Any]], known: Sequence[str]) -> List[str]:
    """The datasheet's dtypes in its order, then any other a row gives a peak for."""
    extra = sorted({d for r in rows for d in r["peak_tflops"]} - set(known))
    return list(known) + extra


def table_lines(rows: Sequence[Dict[str, Any]], dtypes: Sequence[str]) -> List[str]:
    """One line per row: name, dense peaks (TFLOP/s; int8 TOPS; '-' where the datasheet gives none), DRAM GB/s,
    the link (and its GB/s as the datasheet counts it), the source."""
    width = max([len("device")] + [len(safe_text(r["name"])) for r in rows])
    head = f"{'device':<{width}}  " + " ".join(f"{d:>7}" for d in dtypes) + f"  {'DRAM GB/s':>9}  {'link':<28}  source"
    lines = [head, "-" * len(head)]
    for r in rows:
        peaks = " ".join(f"{_num(r['peak_tflops'].get(d)):>7}" for d in dtypes)
        link = r.get("interconnect") or {}
        link_text = f"{link.get('link', '')} {_num(link.get('gbps'))} GB/s" if link else "-"
        lines.append(f"{safe_text(r['name']):<{width}}  {peaks}  {_num(r.get('dram_gbps')):>9}  "
                     f"{safe_text(link_text)[:28]:<28}  {safe_text(r.get('source') or '-')}")
    lines.append(f"{len(rows)} row(s); peaks are dense TFLOP/s (int8: TOPS); `--format json` adds each figure's note")
    return lines


def _num(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:g}"
