"""`tb-gpuinsight summarize LOGDIR [--store URL] [--engine local|dask] [--scheduler ADDRESS] [--workers N]`:
summarise every trace of a logdir not yet in a summary store, on a local process pool or a Dask cluster."""
from __future__ import annotations

from ..progress import count_progress
from ..store.batch import summarize
from ..store.engines import ENGINES


def register(sub) -> None:
    """Add the `summarize` subcommand."""
    p = sub.add_parser("summarize", help="summarise every trace of a logdir into a summary store (local pool or "
                                         "Dask cluster), so TensorBoard serves it without reading traces")
    p.add_argument("logdir", metavar="LOGDIR", help="logdir path or URL (s3://bucket/prefix, gs://...)")
    p.add_argument("--store", metavar="URL", default=None,
                   help="summary store path or URL (default: the plugin's cache directory)")
    p.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: a pool of processes on this machine; dask: a dask.distributed cluster")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="Dask scheduler address (tcp://host:8786); default: a local cluster of --workers")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (local pool or local Dask cluster; default: min(cores, 4))")
    p.add_argument("--extra-arg", action="append", default=[], metavar="NAME",
                   help="also keep this event arg (as the plugin's --gpuinsight_extra_args)")
    p.add_argument("--retry-failed", action="store_true", help="try again the traces the store records as failed")
    p.set_defaults(func=_cmd_summarize)


def _cmd_summarize(args) -> int:
    import os

    workers = args.workers if args.workers is not None else min(os.cpu_count() or 1, 4)
    report = summarize(args.logdir, store=args.store, engine=args.engine, scheduler=args.scheduler,
                       workers=workers, extra_args=args.extra_arg, max_trace_gb=args.max_trace_gb,
                       retry_failed=args.retry_failed, progress=count_progress("summarize", "files"))
    print("\n".join(report.lines()))
    if not report.total and not report.failed:  # the store line names where summaries would go: none went
        print(f"note: no trace files under {args.logdir}: nothing written to the store")
    return 1 if report.failed else 0
