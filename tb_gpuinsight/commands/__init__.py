"""Subcommands of `tb-gpuinsight` defined by features, each a module with `register(subparsers)`."""
