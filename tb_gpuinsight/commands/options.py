"""Options and checks the analysing commands share (`analyze`, `augment`, `diff`, `report`): the rating options,
checks made before any work, and the analysis of one trace as these commands run it."""
from __future__ import annotations

import os

from ..errors import ConfigError
from ..progress import terminal_progress


def analysis_options(p) -> None:
    """`--dtype`, `--device` and `--devices` on a command's parser."""
    p.add_argument("--dtype", default="auto",
                   help="rate against this dtype's peak: auto (each kernel's own), fp64, fp32, tf32, bf16, fp16, "
                        "fp8, int8")
    p.add_argument("--device", metavar="NAME", help="rate every device as this datasheet row: its name or a common one "
                                                    "('B200', 'h100 sxm', 'MI300X'; `tb-gpuinsight devices` lists them)")
    p.add_argument("--devices", metavar="FILE", help="JSON file adding or overriding datasheet rows "
                                                     "(also read from $TB_GPUINSIGHT_DEVICES)")
    model_config_option(p)


def model_config_option(p) -> None:
    """`--model-config FILE`: the served model's Hugging Face config.json."""
    p.add_argument("--model-config", metavar="FILE",
                   help="the model's Hugging Face config.json: sizes ops that hide their weights or KV cache (vLLM "
                        "moe_forward, unified_attention); default: model_config.json beside the trace; '' for none")


def model_config_arg(args):
    """`--model-config` loaded before any work (a bad file is refused in one line); None: discovery decides,
    "": none."""
    from ..estimate.model_config import load_model_config

    value = getattr(args, "model_config", None)
    return value if value is None or value == "" else load_model_config(value)


def check_device(args) -> None:
    """`--device NAME` must name one datasheet row, checked before any work: the row's name or one people use ("B200",
    "NVIDIA B200", "h100 sxm"); `args.device` becomes the row's name. Another name is refused with rows to try."""
    from ..estimate.device_names import resolve_device
    from ..estimate.devices import load_datasheet

    if not getattr(args, "device", None):
        return
    found = resolve_device(args.device, load_datasheet(args.devices))
    if found.spec is None:
        raise ConfigError(f"--device {found.refusal(args.device)} (`tb-gpuinsight devices` lists the rows; add one "
                          "with --devices FILE)")
    args.device = found.spec.name


def check_output(src: str, dst: str) -> None:
    """Refuse an output path that cannot be written before the analysis runs (it can take minutes)."""
    folder = os.path.dirname(os.path.abspath(dst))
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise ConfigError(f"{dst}: refusing to overwrite the input trace; choose another output path")
    if os.path.isdir(dst):
        raise ConfigError(f"{dst}: is a directory; give a file path (.json or .json.gz)")
    if not os.path.isdir(folder):
        raise ConfigError(f"{dst}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{dst}: the folder {folder} is not writable")


def rows_to_write(args) -> int:
    """Rows to write: --top when given, else 20 in a table and all of them in CSV or JSON (0 = all)."""
    return args.top if args.top is not None else (20 if args.format == "table" else 0)


def analyze_trace(path: str, args):
    """The analysis of one trace with the command's options (`--et` and `--capture` where it has them)."""
    from .. import analyze, load

    check_device(args)
    trace = load(path, progress=terminal_progress(os.path.basename(path)))
    ets = getattr(args, "et", None)
    captures = getattr(args, "capture", None)
    return analyze(trace, dtype=args.dtype, devices_file=args.devices, device=args.device,
                   model_config=model_config_arg(args),
                   execution_traces=None if ets is None else [e for e in ets if e],
                   capture=None if captures is None else [c for c in captures if c])
