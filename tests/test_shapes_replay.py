"""Tensor shapes through graph replays (analysis/shapes/report.py): kernels a CUDA/HIP graph replayed count in the
groups of the ops that captured them, marked "graph capture" as in Kernel efficiency, not in the op around the
replay. Checked on a small capture + replay built here and on the corpus' vLLM decode replay with its capture."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tb_gpuinsight

from .test_moe_subops import UP, replay_and_capture

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "tracelens")


def _shaped_share(path, **options):
    report = tb_gpuinsight.shapes(path, **options)
    eff = tb_gpuinsight.analyze(path)
    ops = report.ops
    shaped = ops[ops["input_dims"].notna()]
    return float(shaped["self_us"].fillna(0).sum()) / float(eff.activities["dur"].sum()), ops


def test_replayed_kernels_count_in_their_captured_ops_group(tmp_path):
    replay, capture = replay_and_capture(tmp_path)
    eff = tb_gpuinsight.analyze(replay, capture=[capture])
    from tb_gpuinsight.analysis.shapes.report import shapes_report

    rows = shapes_report(eff.trace, eff.activities, (), eff.shapes).ops
    moe = rows[rows["op"] == "vllm::moe_forward"]
    assert len(moe) == 1 and moe["source"].iloc[0] == "graph capture"
    assert moe["kernels"].iloc[0] == 3 and moe["device_us"].iloc[0] == 60  # the three replayed kernels, 20 us each
    up = eff.activities["name"] == eff.activities.strings["name"].index(UP)
    assert moe["flops"].iloc[0] == pytest.approx(np.nansum(eff.activities["flops"]))
    assert up.sum() == 1


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="corpus traces (../shared/traces) not present")
def test_the_corpus_vllm_decode_replay_is_covered_by_tensor_shapes():
    """3% of its kernel time had shapes in Tensor shapes before (the replay's few eager ops)."""
    share, ops = _shaped_share(os.path.join(CORPUS, "vllm_decode_full__graph_execution.json.gz"))
    assert share >= 0.9
    top = ops.sort_values("self_us", ascending=False).iloc[0]
    assert top["op"] == "vllm::moe_forward" and top["source"] == "graph capture"
    assert top["input_dims"] == [[32, 3072], [32, 32], [], []]


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason="corpus traces (../shared/traces) not present")
def test_diff_by_op_counts_replayed_kernels_under_their_captured_ops():
    path = os.path.join(CORPUS, "vllm_decode_full__graph_execution.json.gz")
    rows = tb_gpuinsight.diff(path, path, by="op").to_pandas()
    moe = rows[rows["name"].str.startswith("vllm::moe_forward [[32,3072]")]
    assert len(moe) == 1 and moe["count_a"].iloc[0] > 0 and moe["time_us_a"].iloc[0] > 7000
