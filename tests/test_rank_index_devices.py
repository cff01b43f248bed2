"""A run whose ranks ran on different GPU models (a real H100 trace and a real A100 trace as its two ranks): the
"All ranks" analysis rates every rank's kernels against the rank's own GPU, exactly as the rank's own analysis does
(`analysis/ranks/span_devices.py`), and the rank index's table, device cards and roofline equal it."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tb_gpuinsight.routes import kernels as kernel_routes
from tb_gpuinsight.store.batch import summarize

from .corpus import corpus_path
from .test_rank_index_kernels import _cards_and_roofline_alike, _combined, _every_view, _plugin, _request, _same

H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
A100 = "hta/benchmark_result_2869224_1695835535_trace.json.gz"
RATED = ("peak_tflops", "dram_gbps", "pct_peak", "pct_dram", "efficiency", "bound", "reason", "over_roof")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """Run `mixed`: rank0 the H100 trace, rank1 the A100 trace (stamps in that order), summarised by `summarize`."""
    root = tmp_path_factory.mktemp("mixed")
    run = root / "logdir" / "mixed"
    run.mkdir(parents=True)
    shutil.copy(corpus_path(H100), run / "rank0.1000.pt.trace.json.gz")
    shutil.copy(corpus_path(A100), run / "rank1.2000.pt.trace.json.gz")
    report = summarize(str(root / "logdir"), str(root / "store"), workers=0)
    assert not report.failed and report.indexed == 1
    return root


def _labels(eff, column: str, rows=None) -> list:
    values = eff.activities[column] if rows is None else eff.activities[column][rows]
    strings = eff.activities.strings.get(column)
    return [strings[v] for v in values.tolist()] if strings else values.tolist()


def test_every_rank_is_rated_against_its_own_gpu(mixed):
    service = _plugin(str(mixed / "logdir"), str(mixed / "store")).service
    combined = service.analysis("mixed", "*", "all")
    states = service.ready_states("mixed", "*", "all")
    peaks = []
    for i, state in enumerate(states):
        own = service.analysis("mixed", state.worker, state.span)
        mine = combined.activities["span"] == i
        for column in RATED:
            np.testing.assert_array_equal(np.asarray(_labels(combined, column, mine)), np.asarray(_labels(own, column)),
                                          err_msg=f"{state.worker}: {column}")
        peaks.append({d.match.spec.name for d in own.devices.values() if d.match.spec is not None})
    assert peaks[0] != peaks[1] and all(peaks)  # two models, each matched: the test rates across models
    # the card of a GPU id: the model of the first rank that ran on it
    assert {d.match.spec.name for d in combined.devices.values()} <= peaks[0] | peaks[1]


def test_the_index_equals_the_combined_analysis_across_models(mixed):
    plugin = _plugin(str(mixed / "logdir"), str(mixed / "store"))
    for request in _every_view(plugin, "mixed"):
        _same(_combined(plugin, request), kernel_routes.kernels_route(plugin, request))
    _cards_and_roofline_alike(plugin, "mixed", devices=(None, 0))
    table = kernel_routes.kernels_route(plugin, _request(run="mixed", worker="*", limit=5000))
    assert table["rows"]


def test_all_ranks_card_sums_what_the_table_sums(mixed):
    """The All-ranks summary above the kernel table: every rank's GPU together, its kernel time the table's total
    (not rank 0's card, smaller than the table's first row)."""
    plugin = _plugin(str(mixed / "logdir"), str(mixed / "store"))
    answer = kernel_routes.devices_route(plugin, _request(run="mixed", worker="*", span="all"))
    whole = answer["all_ranks"]
    cards = [d["summary"] for d in answer["devices"] if d.get("summary")]
    assert whole and len(cards) >= 1
    table = kernel_routes.kernels_route(plugin, _request(run="mixed", worker="*", span="all", limit="5000"))
    kernel_time = sum(r["total_us"] for r in table["rows"] if r.get("kind", "kernel") == "kernel")
    assert whole["kernel_time_us"] == pytest.approx(kernel_time, rel=1e-6)
    assert whole["kernel_time_us"] >= max(c["kernel_time_us"] for c in cards)
    assert whole["gpu_busy_us"] == pytest.approx(sum(c["gpu_busy_us"] for c in cards), rel=1e-9)


def test_every_gpu_card_names_the_ranks_it_adds_up(mixed):
    """In All ranks a GPU id's card adds up every rank that ran on that id (both ranks here ran on GPU 0): the
    answer names those ranks, the same from the rank index and from the combined analysis (a forced dtype)."""
    plugin = _plugin(str(mixed / "logdir"), str(mixed / "store"))
    indexed = kernel_routes.devices_route(plugin, _request(run="mixed", worker="*", span="all"))
    combined = kernel_routes.devices_route(plugin, _request(run="mixed", worker="*", span="all", dtype="fp32"))
    service = plugin.service
    eff = service.analysis("mixed", "*", "all")
    expected = {}
    for i, state in enumerate(service.ready_states("mixed", "*", "all")):
        own = service.analysis("mixed", state.worker, state.span)
        for dev in np.unique(own.activities["device"]).tolist():
            expected.setdefault(str(dev), set()).add(i)
    assert {k: set(v) for k, v in indexed["device_ranks"].items()} == expected
    assert indexed["device_ranks"] == combined["device_ranks"]
    assert {str(d["id"]) for d in indexed["devices"]} <= set(indexed["device_ranks"]) and len(eff.devices) >= 1
    one = kernel_routes.devices_route(plugin, _request(run="mixed", worker=service.ready_states("mixed", "*", "all")[0].worker,
                                                       span="all"))
    assert one["device_ranks"] == {}  # one worker: the card is its own
