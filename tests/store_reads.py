"""The rank index tests' shared parts: the real DLRM run summarised into a store, and counting the summaries a
request reads (a route answered from the index opens none, or only a changed rank's)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import List

from tb_gpuinsight.store.batch import summarize

from .corpus import corpus_path


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


def summarized_dlrm(tmp_path_factory) -> Path:
    """The real DLRM run summarised into a store by `summarize` (which writes the rank index): the folder holding
    `logdir/` and `store/`."""
    root = tmp_path_factory.mktemp("dlrm")
    (root / "logdir").mkdir()
    shutil.copytree(corpus_path("param/dlrm_8ranks"), root / "logdir" / "dlrm")
    report = summarize(str(root / "logdir"), str(root / "store"), workers=0)
    assert not report.failed and report.indexed == 1
    return root
