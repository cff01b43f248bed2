"""Diff view and comparisons: `compare` (two analyses kernel by kernel or op by op), `stats` (the one comparison
rule: medians, warm-up and hiccups left out, noise band, verdict), `attribution` (what accounts for a change, per
step) and `trend` (every run against the runs before it)."""
