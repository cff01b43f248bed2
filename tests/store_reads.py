"""Counting the summaries a request reads: the rank index's tests show a route opens none (or only a changed rank's)."""
from __future__ import annotations

from typing import List


def count_summary_reads(monkeypatch) -> List[int]:
    """Count the summaries read from any store from now on: a one-item list, updated in place."""
    from tb_gpuinsight.store.summaries import SummaryStore

    count = [0]
    original = SummaryStore.get

    def get(self, key):
        count[0] += 1
        return original(self, key)
    monkeypatch.setattr(SummaryStore, "get", get)
    return count
