"""Kernels view: every GPU activity linked to its op, its FLOPs and bytes, rated against its device (efficiency)."""
