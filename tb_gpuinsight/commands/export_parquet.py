"""`tb-gpuinsight export-parquet STORE OUT [--logdir LOGDIR]`: the kernel, op, step and collective tables of every
summarised trace in a store, as Parquet files for pandas / DuckDB."""
from __future__ import annotations

from ..store.export import export_parquet


def register(sub) -> None:
    """Add the `export-parquet` subcommand."""
    p = sub.add_parser("export-parquet", help="write a summary store's kernel/op/step/collective tables of every "
                                              "rank as Parquet (needs the parquet extra)")
    p.add_argument("store", metavar="STORE", help="summary store path or URL")
    p.add_argument("out", metavar="OUT", help="directory to write kernels/ops/steps/collectives.parquet into")
    p.add_argument("--logdir", metavar="LOGDIR", default=None,
                   help="only the traces this logdir holds now (default: the newest summary of every trace)")
    p.add_argument("--devices", metavar="FILE", help="extra datasheet rows (JSON) to rate kernels against")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args) -> int:
    report = export_parquet(args.store, args.out, logdir=args.logdir, devices_file=args.devices)
    print("\n".join(report.lines()))
    return 0
