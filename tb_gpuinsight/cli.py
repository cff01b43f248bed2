"""`tb-gpuinsight` command line: inspect traces and logdirs, analyse kernel efficiency, augment and diff traces.

Every failure the user can cause ends with one line on stderr and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import logdir as logdir_mod
from .errors import GpuInsightError
from .progress import terminal_progress
from .trace.source import set_max_trace_gb
from .trace.stages import stage
from .trace.text import safe_text

EXIT_BAD_INPUT = 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script; returns the exit status."""
    _tolerant_output()
    parser = _parser(_command_name(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        set_max_trace_gb(getattr(args, "max_trace_gb", None))
        return args.func(args) or 0
    except GpuInsightError as exc:
        print(f"tb-gpuinsight: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("tb-gpuinsight: error: out of memory; lower --max-trace-gb or free memory", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RecursionError:
        print("tb-gpuinsight: error: the input nests too deeply to process", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into `head`
        return 0
    except KeyboardInterrupt:
        return 130


def _tolerant_output() -> None:
    """Text that UTF-8 cannot encode (a file name's invalid bytes, kept by Python as lone surrogates) is written as
    a backslash escape rather than failing the command; in JSON output that escape is valid JSON."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


def _command_name(argv: Sequence[str]) -> Optional[str]:
    """The command word of a command line (None when there is none)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser; for a command of this module's own, the command modules (and their analyses) are not imported."""
    parser = argparse.ArgumentParser(prog="tb-gpuinsight", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(title="commands")
    for register in COMMANDS:
        register(sub)
    if command not in sub.choices:
        for module_name in COMMAND_MODULES:
            importlib.import_module(module_name).register(sub)
    for command in sub.choices.values():  # every command reads traces: each takes the size cap
        command.add_argument("--max-trace-gb", type=_positive_gb, default=None, metavar="GB",
                             help="refuse traces whose uncompressed size passes this many GB "
                                  "(default: available memory / 3)")
    return parser


def _positive_gb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of GB") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError("must be a positive number of GB")
    return value


# ------------------------------------------------------------------------------------------------------- info

def _register_info(sub) -> None:
    p = sub.add_parser("info", help="what a trace file is: kind, era, devices, event counts, time span")
    p.add_argument("path")
    p.add_argument("--extra-arg", action="append", default=[], metavar="NAME",
                   help="also decode this event arg (repeatable), reported as present/absent")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args) -> int:
    from . import load

    sniffed = logdir_mod.sniff(args.path)
    if sniffed.kind == logdir_mod.UNREADABLE:
        raise GpuInsightError(f"{args.path}: {sniffed.reason}")
    if sniffed.kind != logdir_mod.KINETO:
        return _info_other(args.path, sniffed)
    trace = load(args.path, extra_args=args.extra_arg, progress=terminal_progress(os.path.basename(args.path)))
    for line in describe_trace(trace):
        print(line)
    return 0


def _info_other(path: str, sniffed: logdir_mod.Sniffed) -> int:
    labels = {logdir_mod.ET: "Execution Trace", logdir_mod.TENSOR_TRACE: "tensor.trace"}
    label = labels.get(sniffed.kind)
    if label is None:
        raise GpuInsightError(f"{path}: not a trace file ({sniffed.reason})")
    print(f"file      {path}")
    print(f"kind      {label}")
    if sniffed.kind == logdir_mod.ET:
        from .trace.et import load_et

        et = load_et(path)
        print(f"schema    {et.schema}")
        print(f"nodes     {len(et):,}" + (f" ({et.dropped_nodes:,} unusable, skipped)" if et.dropped_nodes else ""))
        for line in _field_lines("coerced", et.coerced_fields) + _field_lines("dropped", et.dropped_fields):
            print(line)
    return 0


def describe_trace(trace) -> List[str]:
    """Human lines describing a loaded Kineto trace (used by `info`)."""
    m = trace.meta
    lines = [
        f"file      {m.path}",
        f"kind      Kineto trace, {_mb(m.json_bytes)} of JSON ({_mb(m.file_bytes)} on disk)",
        f"era       {m.era}; vendor {m.vendor}",
    ]
    if m.distributed:
        lines.append(f"rank      {m.distributed.get('rank', '?')} of {m.distributed.get('world_size', '?')}"
                     f" ({m.distributed.get('backend', '?')})")
    lines.append(f"span      {_span(m)}")
    if trace.devices:
        for d in trace.devices:
            mem = d.get("totalGlobalMem")
            memtxt = f", {mem / 2**30:.0f} GiB" if isinstance(mem, (int, float)) else ""
            lines.append(f"device    {d.get('id')}: {d.get('name') or '(no name)'}"
                         f"{_sm(d)}{memtxt}")
    else:
        lines.append("device    none listed (CPU-only run or a trace without deviceProperties)")
    lines.append(f"events    {m.event_count:,}" + (f" ({m.malformed_events} malformed, skipped)"
                                                   if m.malformed_events else ""))
    for cat, count in m.category_counts.items():
        lines.append(f"  {cat:<24}{count:>10,}")
    lines += _field_lines("coerced", m.coerced_fields) + _field_lines("dropped", m.dropped_fields)
    tables = ", ".join(f"{name} {len(t):,}" for name, t in trace.tables().items())
    lines.append(f"tables    {tables}")
    lines.append(f"shapes    {'yes' if m.record_shapes else 'no'} ({len(trace.shapes):,} distinct signatures)")
    lines.append("ET links  " + _et_links(m))
    for name in m.extra_args:
        present = sum(int(sum(v is not None for v in t[name])) for t in trace.tables().values())
        lines.append(f"arg       {name!r}: on {present:,} events")
    return lines


def _field_lines(what: str, counts: Dict[str, int]) -> List[str]:
    """Values the reader read after a conversion, or left out, with how many and why (most frequent first)."""
    if not counts:
        return []
    lines = [f"fields    {sum(counts.values()):,} {what}" + (" (absent for every analysis)" if what == "dropped" else "")]
    return lines + [f"  {count:>8,}  {safe_text(why)[:200]}" for why, count in counts.items()]


def _et_links(m) -> str:
    if m.has_record_function_ids:
        return "Record function id present (links to ET rf_id)"
    if m.has_external_ids:
        return "External id only (ET links by External id / name order)"
    return "none"


def _sm(d: Dict) -> str:
    sms = d.get("numSms")
    major = d.get("computeMajor")
    parts = []
    if sms:
        parts.append(f"{sms} SMs")
    if major is not None:
        parts.append(f"compute {major}.{d.get('computeMinor', 0)}")
    return f" ({', '.join(parts)})" if parts else ""


def _span(m) -> str:
    if m.start_us is None:
        return "no timed events"
    start = m.start_us + (m.base_time_ns or 0) / 1000
    when = ""
    if start > 1e15:  # absolute microseconds since the epoch
        try:
            when = datetime.datetime.fromtimestamp(start / 1e6, tz=datetime.timezone.utc).strftime(
                " from %Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):  # beyond any calendar date: a corrupt timestamp
            when = f" from {start:.6g} us after the epoch (not a valid date)"
    return f"{m.duration_us / 1000:,.3f} ms{when}"


def _mb(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------------------- ls

def _register_ls(sub) -> None:
    p = sub.add_parser("ls", help="runs, workers, spans and companion files of a logdir")
    p.add_argument("logdir")
    p.set_defaults(func=_cmd_ls)


def _cmd_ls(args) -> int:
    runs = logdir_mod.discover(args.logdir)
    if not runs:
        print(f"no traces under {args.logdir}")
        return 0
    for run in runs:
        for line in describe_run(run):
            print(line)
    return 0


def describe_run(run: logdir_mod.Run) -> List[str]:
    """Human lines describing one discovered run (used by `ls`)."""
    lines = [f"run {run.name}"]
    for worker in sorted(run.workers):
        spans = run.workers[worker]
        lines.append(f"  worker {worker}: {len(spans)} span{'s' if len(spans) != 1 else ''}")
        for span in spans:
            lines.append(f"    {span.name}  {_mb(span.trace.size)}")
            for companion in span.execution_traces + span.tensor_traces:
                lines.append(f"      + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for companion in run.execution_traces + run.tensor_traces:
        lines.append(f"  + {os.path.basename(companion.path)} ({_kind_label(companion.kind)})")
    for bad in run.unreadable:
        lines.append(f"  ! {os.path.basename(bad.path)}: {bad.reason}")
    return lines


def _kind_label(kind: str) -> str:
    return {logdir_mod.ET: "Execution Trace", logdir_mod.TENSOR_TRACE: "tensor.trace"}.get(kind, kind)


# ---------------------------------------------------------------------------------------------- analyze

def _analysis_options(p) -> None:
    p.add_argument("--dtype", default="auto",
                   help="rate against this dtype's peak: auto (each kernel's own), fp64, fp32, tf32, bf16, fp16, "
                        "fp8, int8")
    p.add_argument("--device", metavar="NAME", help="rate every device as this datasheet row (e.g. 'H100 SXM5')")
    p.add_argument("--devices", metavar="FILE", help="JSON file adding or overriding datasheet rows "
                                                     "(also read from $TB_GPUINSIGHT_DEVICES)")


def _check_device(args) -> None:
    """`--device NAME` must be a datasheet row (the plugin answers 400 to another name): checked before any work."""
    from difflib import get_close_matches

    from .errors import ConfigError
    from .estimate.devices import load_datasheet

    if not getattr(args, "device", None):
        return
    names = [spec.name for spec in load_datasheet(args.devices)]
    if args.device not in names:
        close = get_close_matches(args.device, names, n=3, cutoff=0.4)
        raise ConfigError(f"--device {args.device!r} is not a datasheet row" +
                          (f"; did you mean {', '.join(repr(n) for n in close)}?" if close else "") +
                          " (the datasheet's rows are the Device picker's; add one with --devices FILE)")


def _top(args) -> int:
    """Rows to write: --top when given, else 20 in a table and all of them in CSV or JSON (0 = all)."""
    return args.top if args.top is not None else (20 if args.format == "table" else 0)


def _analyze(path: str, args):
    from . import analyze, load

    _check_device(args)
    trace = load(path, progress=terminal_progress(os.path.basename(path)))
    ets = getattr(args, "et", None)
    captures = getattr(args, "capture", None)
    return analyze(trace, dtype=args.dtype, devices_file=args.devices, device=args.device,
                   execution_traces=None if ets is None else [e for e in ets if e],
                   capture=None if captures is None else [c for c in captures if c])


def _register_analyze(sub) -> None:
    p = sub.add_parser("analyze", help="efficiency of every kernel: FLOPs, bytes, achieved vs device peak")
    p.add_argument("path")
    _analysis_options(p)
    p.add_argument("--top", type=int, help="rows to show (0 = all; default 20 in a table, all in CSV or JSON)")
    p.add_argument("--by", choices=("name", "op"), default="name",
                   help="group by kernel name, or by launching op and kernel name")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--et", action="append", metavar="PATH",
                   help="Execution Trace supplying shapes the trace lacks (repeatable; default: the companion "
                        "ETs discovery pairs with the trace; --et '' for none)")
    p.add_argument("--capture", action="append", metavar="PATH",
                   help="trace recorded while the CUDA/HIP graphs this trace replays were captured: replayed "
                        "kernels take the captured ops and shapes (repeatable; default: the trace itself, a "
                        "capture_traces/ folder beside it, the run's other spans; --capture '' for none)")
    p.set_defaults(func=_cmd_analyze)


def _cmd_analyze(args) -> int:
    eff = _analyze(args.path, args)
    with stage("output"):
        return _print_analysis(eff, args)


def _print_analysis(eff, args) -> int:
    from .analysis.enrich import shape_sources
    from .analysis.kernels.rows import group_rows, sort_order

    table = eff.by_name() if args.by == "name" else eff.by_op()
    order = sort_order(table, "total_us")
    top = _top(args)
    rows = group_rows(table, order[:top] if top > 0 else order)
    if args.format == "json":
        import json

        print(json.dumps({"devices": eff.summary(), "dtype": args.dtype, "rows": rows,
                          "shape_sources": shape_sources(eff.trace, eff.activities)}, indent=1))
    elif args.format == "csv":
        _print_csv(rows)
    else:
        for line in _device_lines(eff) + _shape_source_lines(eff) + [""] + render_table(rows, _ANALYZE_COLUMNS):
            print(line)
    return 0


_ANALYZE_COLUMNS = (
    ("!", "over_roof", 1), ("kernel", "display_name", 56), ("class", "kernel_class", 13), ("op", "op", 28),
    ("dev", "device", 3), ("calls", "count", 6),
    ("total ms", "total_us", 9), ("% time", "time_share", 6), ("mean us", "mean_us", 9),
    ("TFLOP/s", "tflops", 8), ("% peak", "pct_peak", 7), ("GB/s", "gbps", 8), ("% DRAM", "pct_dram", 7),
    ("FLOP/B", "intensity", 7), ("bound", "bound", 7), ("dtype", "dtype", 5), ("occ %", "occupancy", 5),
)


def _device_lines(eff) -> List[str]:
    lines = []
    for d in eff.summary():
        s = d["summary"]
        spec = d["spec"]
        lines.append(f"device {d['id']}: {d['trace_name'] or '(no name)'} -> "
                     f"{spec['name'] if spec else 'unknown (efficiency unknown)'}")
        lines.append(f"  {d['how']}")
        lines.append(f"  GPU busy {_ms(s['gpu_busy_us'])}, kernels {_ms(s['kernel_time_us'])} "
                     f"({s['kernel_count']:,}), memcpy/memset {_ms(s['memop_time_us'])}; kernel time with FLOPs "
                     f"{_pct(s['flop_time_share'])}, with bytes {_pct(s['byte_time_share'])}; "
                     f"time-weighted efficiency {_pct(s['efficiency'])}")
        lines += _coverage_lines(s)
    if not lines:
        lines.append("no GPU devices or GPU activity in this trace")
    return lines


def _coverage_lines(s: Dict) -> List[str]:
    """Over-the-roof kernels and kernel time without a rated figure, per reason with its hint."""
    from .analysis.kernels.reasons import reason_lines

    over = [f"  {s['over_roof_count']:,} kernel calls ({_pct(s['over_roof_time_share'])} of kernel time) over the "
            f"physical roof: marked ! and left out of the efficiency"] if s.get("over_roof_count") else []
    families = ", ".join(f"{r['family']} {_pct(r['time_share'])} ({r['reason'] or 'unknown'})"
                         for r in s.get("unrated_families", []))
    compute = [f"  FLOPs known for {_pct(s['compute_flop_share'])} of compute kernel time (communication aside)"
               + (f"; without FLOPs: {families}" if families else "")] if s.get("compute_flop_share") is not None \
        else []
    return compute + over + reason_lines({r["code"]: r["time_share"] for r in s.get("reasons", [])})


def _shape_source_lines(eff) -> List[str]:
    """Where the shapes behind the kernel time came from, and which Execution Trace supplied some."""
    from .analysis.enrich import shape_sources

    info = shape_sources(eff.trace, eff.activities)
    shares = ", ".join(f"{k} {_pct(v)}" for k, v in info["kernel_time_share"].items() if v > 0)
    lines = [f"shapes of kernel time: {shares or '-'}"]
    for et in info["execution_traces"]:
        verdict = (f"used, {et['linked']:,} ops linked by {et['method']}" if et["used"] else
                   f"not used: {et['reason']}")
        lines.append(f"  Execution Trace {os.path.basename(et['path'])}: {verdict}")
    return lines


def render_table(rows: List[Dict], columns) -> List[str]:
    """Fixed-width text table; long names are cut in the middle so both ends stay readable."""
    present = [c for c in columns if any(c[1] in r for r in rows)] or list(columns)
    head = "  ".join(_cell(title, width, title) for title, _, width in present)
    out = [head, "-" * len(head)]
    for r in rows:
        out.append("  ".join(_cell(_fmt(key, r.get(key)), width, key) for _, key, width in present))
    if not rows:
        out.append("(no kernels)")
    return out


def _cell(text: str, width: int, key: str) -> str:
    if len(text) > width:
        half = (width - 1) // 2
        text = text[:half] + "~" + text[len(text) - (width - 1 - half):]
    return text.ljust(width) if key in ("name", "display_name", "op", "kernel", "bound", "dtype", "status", "class",
                                        "kernel_class") \
        else text.rjust(width)


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return ("!" if v else "") if key == "over_roof" else ("yes" if v else "")
    if key in ("total_us", "time_us_a", "time_us_b", "delta_us"):
        return f"{v / 1000:,.3f}"
    if key in ("time_share", "pct_peak", "pct_dram", "efficiency", "delta_pct", "pct_peak_a", "pct_peak_b"):
        return f"{100 * v:.1f}"
    if isinstance(v, float) and key.startswith(("count", "launches")):
        return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"  # calls per span: whole unless spans differ
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def _ms(us: float) -> str:
    return f"{us / 1000:,.3f} ms"


def _pct(v) -> str:
    return "unknown" if v is None else f"{100 * v:.1f}%"


def _print_csv(rows: List[Dict]) -> None:
    import csv

    if not rows:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in rows)


def _csv_cell(value):
    """One line per cell: a list or dict (grid, block, shapes), or JSON text as recorded (over several lines in
    CUDA traces), as compact JSON; other text with its line breaks folded into spaces."""
    import json

    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.dumps(json.loads(value), separators=(",", ":"))
        except ValueError:
            pass
    return " ".join(value.split()) if isinstance(value, str) and "\n" in value else value


# ---------------------------------------------------------------------------------------------- augment

def _register_augment(sub) -> None:
    p = sub.add_parser("augment", help="write a copy of a trace with kernel_flop, kernel_num_gb and achieved-%% args")
    p.add_argument("src")
    p.add_argument("dst", help="output path (.json or .json.gz); never the input")
    _analysis_options(p)
    p.set_defaults(func=_cmd_augment)


def _cmd_augment(args) -> int:
    from .analysis.kernels.augment import write_augmented

    _check_output(args.src, args.dst)
    count = write_augmented(args.src, args.dst, _analyze(args.src, args))
    print(f"wrote {args.dst}: {count:,} events annotated")
    return 0


def _check_output(src: str, dst: str) -> None:
    """Refuse an output path that cannot be written before the analysis runs (it can take minutes)."""
    from .errors import ConfigError

    folder = os.path.dirname(os.path.abspath(dst))
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise ConfigError(f"{dst}: refusing to overwrite the input trace; choose another output path")
    if os.path.isdir(dst):
        raise ConfigError(f"{dst}: is a directory; give a file path (.json or .json.gz)")
    if not os.path.isdir(folder):
        raise ConfigError(f"{dst}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{dst}: the folder {folder} is not writable")


# ---------------------------------------------------------------------------------------------- diff

def _register_diff(sub) -> None:
    p = sub.add_parser("diff", help="compare two traces (or run directories: all their spans) kernel by kernel")
    p.add_argument("a", help="trace file, or a run directory (its spans are averaged)")
    p.add_argument("b")
    p.add_argument("--names", nargs=2, metavar=("NAME_A", "NAME_B"), help="labels for the two sides")
    p.add_argument("--match", choices=("normalized", "exact"), default="normalized",
                   help="match kernels by normalised name (default) or exact name")
    p.add_argument("--by", choices=("kernel", "op"), default="kernel",
                   help="rows per kernel, or per launching op and input shapes")
    _analysis_options(p)
    p.add_argument("--top", type=int, help="rows to show (0 = all; default 20 in a table, all in CSV or JSON)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    importlib.import_module("tb_gpuinsight.commands.report").add_gate_options(p)
    p.set_defaults(func=_cmd_diff)


def _cmd_diff(args) -> int:
    from . import diff

    names = tuple(args.names) if args.names else (os.path.basename(args.a.rstrip("/")),
                                                 os.path.basename(args.b.rstrip("/")))
    _check_device(args)
    options = dict(dtype=args.dtype, devices_file=args.devices, device=args.device)
    gate = importlib.import_module("tb_gpuinsight.commands.report") if args.fail_if_slower is not None else None
    if gate is None:
        result = diff(args.a, args.b, names=names, match=args.match, by=args.by, **options)
    else:  # each side read once for both the diff and the gate's step figures
        result, verdict = gate.diff_with_gate(args, names, options)
    try:
        _print_diff(args, result)
    except BrokenPipeError:  # output cut short (piped into `head`): the gate's verdict still sets the exit status
        if gate is None:
            raise
    return gate.report_verdict(verdict) if gate is not None else 0


def _print_diff(args, result) -> None:
    """The diff as a table, CSV or JSON on stdout."""
    top = _top(args)
    shown = result.rows[:top] if top > 0 else result.rows
    if args.format == "json":
        import json

        print(json.dumps({"summary": result.summary, "classes": result.classes, "rows": shown}, indent=1))
    elif args.format == "csv":
        _print_csv(result.to_pandas().head(len(shown)).to_dict("records"))
    else:
        for line in _diff_summary_lines(result.summary, result.classes) + [""] + render_table(shown, _DIFF_COLUMNS):
            print(line)


def _diff_summary_lines(s: Dict, classes: List[Dict]) -> List[str]:
    per = lambda n: f" per span ({n} spans)" if n > 1 else ""  # noqa: E731
    lines = [f"A = {s['name_a']}: {_ms(s['time_us_a'])} of GPU activity{per(s['spans_a'])}"
             f" on {', '.join(s['devices_a']) or 'no device'}",
             f"B = {s['name_b']}: {_ms(s['time_us_b'])}{per(s['spans_b'])} on {', '.join(s['devices_b']) or 'no device'}"
             f" ({_signed_ms(s['delta_us'])}, {_pct(s['delta_pct'])}); {s['added']} kernels only in B, "
             f"{s['removed']} only in A" + (f", {s['within_noise']} changes within span-to-span noise"
                                           if s["within_noise"] else ""),
             "", "by class:      A ms      B ms   delta ms   share of change"]
    for c in classes:
        lines.append(f"  {c['class']:<13}{c['time_us_a'] / 1000:>8.3f}{c['time_us_b'] / 1000:>10.3f}"
                     f"{c['delta_us'] / 1000:>+11.3f}   {_pct(c['share_of_change'])}")
    if s.get("suggest"):
        lines += ["", f"note: {s['suggest']['why']} (--by {s['suggest']['by']})"]
    return lines


def _signed_ms(us: float) -> str:
    return f"{'+' if us >= 0 else ''}{us / 1000:,.3f} ms"


_DIFF_COLUMNS = (
    ("kernel", "display_name", 56), ("class", "class", 13), ("status", "status", 7), ("calls A", "count_a", 7),
    ("calls B", "count_b", 7), ("launches A", "launches_a", 10), ("launches B", "launches_b", 10), ("A ms", "time_us_a", 9), ("B ms", "time_us_b", 9), ("delta ms", "delta_us", 9),
    ("delta %", "delta_pct", 8), ("TFLOP/s A", "tflops_a", 9), ("TFLOP/s B", "tflops_b", 9),
    ("% peak A", "pct_peak_a", 8), ("% peak B", "pct_peak_b", 8), ("noise", "within_noise", 5),
)


COMMANDS: List[Callable] = [_register_info, _register_ls, _register_analyze, _register_augment, _register_diff]

# Commands of other features live in their own modules, each with `register(subparsers)`.
COMMAND_MODULES: Tuple[str, ...] = ("tb_gpuinsight.commands.shapes", "tb_gpuinsight.commands.graph",
                                     "tb_gpuinsight.commands.overview",
                                     "tb_gpuinsight.commands.memory", "tb_gpuinsight.commands.timeline",
                                     "tb_gpuinsight.commands.ranks", "tb_gpuinsight.commands.critical_path",
                                     "tb_gpuinsight.commands.summarize", "tb_gpuinsight.commands.export_parquet",
                                     "tb_gpuinsight.commands.report")

if __name__ == "__main__":
    sys.exit(main())
