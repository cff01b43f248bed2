"""`tb-gpuinsight mcp LOGDIR [--store URL]`: serve a logdir read-only to a coding assistant over the Model Context
Protocol (stdio), with the plugin's analyses as tools (needs the `mcp` extra)."""
from __future__ import annotations

from ..errors import ConfigError


def register(sub) -> None:
    """Add the `mcp` subcommand."""
    p = sub.add_parser("mcp", help="serve a logdir to coding assistants over the Model Context Protocol (stdio): "
                                   "runs, overview, top kernels, diff, ranks, critical path, memory, report")
    p.add_argument("logdir", metavar="LOGDIR", help="logdir path or URL (s3://bucket/prefix, gs://...)")
    p.add_argument("--store", metavar="URL", default=None,
                   help="summary store to read and fill (a path or URL, as TensorBoard's --gpuinsight_store; "
                        "default: summaries kept in memory)")
    p.add_argument("--devices", metavar="FILE", default=None, help="JSON file adding or overriding datasheet rows")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes that analyse traces (default: min(cores, 4))")
    p.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                   help="how long a tool call waits for a trace still being analysed before asking to call again")
    p.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args) -> int:
    import os
    import sys

    from .. import terminal

    try:
        from ..mcp_server.server import serve
    except ImportError as exc:
        raise ConfigError(f"the mcp command needs the MCP SDK: pip install 'tb_gpuinsight[mcp]' ({exc})") from None
    if args.workers is not None and args.workers < 0:
        raise ConfigError("--workers must be 0 or more")
    if not 0 <= args.wait <= 3600:
        raise ConfigError("--wait must be from 0 to 3600 seconds")
    if "://" not in args.logdir and not os.path.isdir(args.logdir):
        raise ConfigError(f"{args.logdir}: not a directory")
    # JSON-RPC on stdio: its encoder escapes control characters, and the SDK writes to the bytes under the text.
    sys.stdout, sys.stderr = terminal.unwrapped(sys.stdout), terminal.unwrapped(sys.stderr)
    serve(args.logdir, store=args.store, devices_file=args.devices or os.environ.get("TB_GPUINSIGHT_DEVICES"),
          workers=args.workers, max_trace_gb=args.max_trace_gb, wait_s=args.wait)
    return 0
