"""Where tb_gpuinsight keeps what it computes on this machine: the user's cache directory, holding the summary
store of the plugin (by default) and the memo of per-op estimates. A leaf module (standard library only), so the
estimates, the summaries and the service can all ask it without importing each other."""
from __future__ import annotations

import os


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME/tb_gpuinsight, else ~/.cache/tb_gpuinsight."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_gpuinsight")


def memo_path() -> str:
    """The SQLite file of memoised per-op estimates, in the cache directory."""
    return os.path.join(default_cache_dir(), "estimates.sqlite")
