"""Diff view: two analyses compared kernel by kernel or op by op."""
