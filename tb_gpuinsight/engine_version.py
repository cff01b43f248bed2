"""The analysis engine's version: bump it when estimates, attribution or stored layouts change, so that summaries
and memoised estimates written by an older engine are ignored rather than trusted."""
ENGINE_VERSION = "6-cpath"
