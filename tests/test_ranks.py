"""Distributed runs: collective kinds and bus-bandwidth arithmetic, rank discovery, and the multi-rank report on
traces real torch writes (a gloo DDP run recorded here with one rank slowed) and on the real 8-rank DLRM step."""
from __future__ import annotations

import glob
import json
import os
import shutil
import types

import numpy as np
import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.ranks import collectives as coll
from tb_gpuinsight.analysis.ranks import report as rk
from tb_gpuinsight.routes import ranks as ranks_routes
from tb_gpuinsight.service import LogdirService

from .corpus import corpus_path

SLOW_RANK = 1
WORLD = 3


# ---------------------------------------------------------------------------------------------- arithmetic

def test_busbw_factors_follow_the_ring_algorithms():
    # Ring all-reduce: reduce-scatter then all-gather, each rank sends (n-1)/n of the buffer twice.
    n = 8
    assert coll.busbw_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    # All-gather / reduce-scatter / all-to-all: each rank sends (or receives) (n-1) of its n shards.
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert coll.busbw_factor(kind, n) == pytest.approx((n - 1) / n)
    for kind in ("broadcast", "reduce", "send", "recv", "send_recv"):
        assert coll.busbw_factor(kind, n) == 1.0
    assert np.isnan(coll.busbw_factor("barrier", n)) and np.isnan(coll.busbw_factor("all_reduce", 0))
    # One rank alone moves nothing over a link.
    assert coll.busbw_factor("all_reduce", 1) == 0.0


def test_algbw_sizes_follow_nccl_tests():
    assert coll.algbw_bytes("all_reduce", 100.0, 100.0, 4) == 100.0
    assert coll.algbw_bytes("all_gather", 25.0, 100.0, 4) == 100.0      # the gathered output
    assert coll.algbw_bytes("all_gather", 25.0, np.nan, 4) == 100.0     # input only: n shards of it
    assert coll.algbw_bytes("reduce_scatter", 100.0, 25.0, 4) == 100.0  # the whole input
    assert np.isnan(coll.algbw_bytes("barrier", 4.0, 4.0, 4))


@pytest.mark.parametrize("name,kind", [
    ("nccl:all_reduce", "all_reduce"), ("gloo:all_reduce", "all_reduce"), ("c10d::allreduce_", "all_reduce"),
    ("nccl:_all_gather_base", "all_gather"), ("allgather_into_tensor_coalesced", "all_gather"),
    ("nccl:_reduce_scatter_base", "reduce_scatter"), ("c10d::alltoall_base_", "all_to_all"),
    ("nccl:all_to_all", "all_to_all"), ("gloo:broadcast", "broadcast"), ("c10d::barrier", "barrier"),
    ("nccl:send", "send"), ("nccl:recv", "recv"), ("aten::mm", ""), ("record_param_comms", ""),
])
def test_collective_kinds(name, kind):
    assert coll.canonical_kind(name) == kind


def test_kernel_names():
    name = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
    assert coll.kernel_kind(name) == "all_reduce" and coll.kernel_algorithm(name) == "RING LL"
    assert coll.kernel_kind("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)") == "all_gather"
    assert coll.kernel_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "send_recv"
    assert coll.COMM_KERNEL.search(name) and not coll.COMM_KERNEL.search("volta_sgemm_128x32_nt")


@pytest.mark.parametrize("worker,rank", [("rank3", 3), ("rank-12", 12), ("host_rank7", 7), ("worker0_step_12", 0),
                                         ("worker5", 5), ("trainer", None), ("rank1_worker2", 2)])
def test_rank_from_name(worker, rank):
    assert rk.rank_from_name(worker) == rank


# ---------------------------------------------------------------------------------------------- gloo run

@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    pytest.importorskip("torch")
    from .gloo_ddp import record
    return record(str(tmp_path_factory.mktemp("gloo") / "ddp"), world=WORLD, slow_rank=SLOW_RANK)


def _waits_from_raw_json(logdir: str):
    """Per rank, total wait in gloo collectives, read with the json module: the n-th gloo:<name> annotation of every
    rank is one collective; a rank waits from its start until the last rank starts (or it ends)."""
    events = {}
    for path in glob.glob(os.path.join(logdir, "*.pt.trace.json")):
        with open(path) as f:
            data = json.load(f)
        rank = data["distributedInfo"]["rank"]
        mine = sorted((e["ts"], e["dur"], e["name"]) for e in data["traceEvents"]
                      if e.get("cat") == "user_annotation" and e.get("name", "").startswith("gloo:"))
        events[rank] = mine
    waits = {r: 0.0 for r in events}
    by_key = {}
    for rank, mine in events.items():
        seen = {}
        for ts, dur, name in mine:
            n = seen[name] = seen.get(name, -1) + 1
            by_key.setdefault((name, n), {})[rank] = (ts, ts + dur)
    for members in by_key.values():
        last = max(start for start, _ in members.values())
        for rank, (start, end) in members.items():
            waits[rank] += max(0.0, min(last, end) - start)
    return waits


def test_gloo_run_names_the_slowed_rank_and_its_waits_match_the_trace(gloo_run):
    report = tb_gpuinsight.ranks(gloo_run)
    assert report.world_size == WORLD and [r["rank"] for r in report.ranks] == list(range(WORLD))
    assert report.source == "cpu" and not report.problems
    # No GPU: idle has no cause (the Overview's causes are GPU idle causes).
    assert all(r["idle_host_bound_us"] is None and r["idle_us"] >= 0 for r in report.ranks)
    assert all(r["steps"] == 3 for r in report.ranks)
    [straggler] = report.stragglers
    assert straggler["rank"] == SLOW_RANK and f"rank {SLOW_RANK} arrived last" in straggler["evidence"]
    # Waits: the report's per-step waits summed, against the raw trace's own events.
    expected = _waits_from_raw_json(gloo_run)
    steps = report.to_pandas("steps")
    for rank, wait in expected.items():
        got = steps.loc[steps["rank"] == rank, "comm_wait"].sum()
        in_steps = got + sum(i["wait_us"].get(str(rank), 0.0) for i in report.instances if i["step"] < 0)
        assert in_steps == pytest.approx(wait, rel=0.01)
    # The slowed rank waits least; the others lose about its sleep at each step's all-reduce.
    ranks = {r["rank"]: r for r in report.ranks}
    assert ranks[SLOW_RANK]["comm_wait_us"] == min(r["comm_wait_us"] for r in report.ranks)
    assert straggler["others_waited_us"] > 0.5 * (WORLD - 1) * 3 * 30_000
    collectives = report.to_pandas("collectives")
    all_reduce = collectives[collectives["kind"] == "all_reduce"].iloc[0]
    assert all_reduce["count"] == 3 and all_reduce["busbw_factor"] == pytest.approx(2 * (WORLD - 1) / WORLD)
    assert all_reduce["pct_link"] is None  # a CPU run has no interconnect figure: not rated


def test_gloo_run_through_the_plugin_routes(gloo_run, tmp_path):
    service = LogdirService(os.path.dirname(gloo_run), cache_dir=str(tmp_path / "cache"), workers=0,
                            scan_interval=60)
    service.scan()
    plugin = types.SimpleNamespace(service=service)
    answer = ranks_routes.ranks_route(plugin, _request(run="ddp"))
    assert answer["stragglers"][0]["rank"] == SLOW_RANK and answer["pending"] == 0
    assert answer["heatmap"]["ranks"] == list(range(WORLD)) and len(answer["heatmap"]["values"][0]) == 3
    page = ranks_routes.heatmap_route(plugin, _request(run="ddp", metric="comm_wait", offset="1", limit="1"))
    assert page["ranks"] == [1] and page["total_ranks"] == WORLD
    from tb_gpuinsight.routes.params import BadRequest
    with pytest.raises(BadRequest):
        ranks_routes.heatmap_route(plugin, _request(run="ddp", metric="nope"))
    compare = ranks_routes.compare_route(plugin, _request(run="ddp", rank=str(SLOW_RANK)))
    assert compare["rank"] == SLOW_RANK and compare["median_rank"] in range(WORLD)
    assert compare["rows"] == []  # a CPU run has no kernels to compare
    from tb_gpuinsight.service import NotFound
    with pytest.raises(NotFound):
        ranks_routes.compare_route(plugin, _request(run="ddp", rank="9"))


def test_missing_rank_is_reported_not_fatal(gloo_run, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for path in sorted(glob.glob(os.path.join(gloo_run, "*.pt.trace.json")))[:2]:
        shutil.copy(path, partial)
    report = tb_gpuinsight.ranks(partial)
    assert len(report.ranks) == 2 and any("1 of 3 ranks have no trace here: 2" in p for p in report.problems)


def _request(**args):
    return types.SimpleNamespace(args=args)


# ---------------------------------------------------------------------------------------------- DLRM, 8 V100

def test_dlrm_collectives_and_comm_kernels_against_nvlink():
    run = corpus_path("param/dlrm_8ranks")
    report = tb_gpuinsight.ranks(run)
    assert report.world_size == 8 and len(report.ranks) == 8 and report.source == "kernel"
    assert report.interconnect["gbps"] == 150.0 and "NVLink 2.0" in report.interconnect["how"]
    table = report.to_pandas("collectives")
    assert set(table["kind"]) == {"all_reduce", "all_to_all"} and table["count"].sum() == 8
    big = table[table["bytes"] == 1576964.0].iloc[0]  # nccl:all_reduce of 394241 floats
    assert big["busbw_gbps"] == pytest.approx(big["algbw_gbps"] * 1.75)
    assert big["algbw_gbps"] == pytest.approx(1576964.0 / (big["transfer_us"] * 1e-6) / 1e9)
    assert 0 < big["pct_link"] < 1
    # Every rank's step is split without remainder, idle by the Overview's causes (the same figures, not a copy).
    causes = [f"{m}_us" for m, _ in rk.IDLE_CAUSES]
    for r in report.ranks:
        assert sum(r[c] for c in causes) == pytest.approx(r["idle_us"], rel=1e-9)
        parts = r["compute_us"] + r["comm_exposed_us"] + r["memcpy_us"] + sum(r[c] for c in causes)
        assert parts == pytest.approx(r["step_us"], rel=1e-3)
        assert r["idle_host_bound_us"] > 0 and r["idle_launch_bound_us"] > 0
    overview = tb_gpuinsight.overview(run, worker="worker3_step_12")
    [step] = overview.steps
    rank3 = next(r for r in report.ranks if r["rank"] == 3)
    assert rank3["idle_sync_us"] == pytest.approx(step["sync_us"])
    assert rank3["step_us"] == pytest.approx(step["wall_us"])
    # Kernel table: NCCL kernels are "communication", rated on busbw over NVLink one way.
    eff = tb_gpuinsight.analyze(sorted(run.glob("worker0_*.pt.trace.json.gz"))[0])
    acts = eff.activities
    comm = coll.is_communication(acts)
    assert comm.sum() == 8
    bound = np.array(acts.strings["bound"])[acts["bound"][comm]]
    assert set(bound) == {"communication"}
    rated = comm & np.isfinite(acts["efficiency"])
    expected = acts["comm_bytes"] * acts["comm_factor"] / (acts["dur"] * 1e-6) / 1e9 / 150.0
    assert rated.sum() == 8 and np.allclose(acts["efficiency"][rated], expected[rated])
    groups = eff.by_name().to_pandas()
    nccl = groups[groups["name"].str.startswith("ncclKernel")]
    assert set(nccl["bound"]) == {"communication"}
    rows = acts.to_pandas()[comm]
    busbw = (rows["comm_bytes"] * rows["comm_factor"]).groupby(rows["name"]).sum() / \
        (rows["dur"].groupby(rows["name"]).sum() * 1e-6) / 1e9
    for _, g in nccl.iterrows():  # a group's GB/s: its busbw bytes over its kernel time
        assert g["gbps"] == pytest.approx(busbw[g["name"]])


def test_many_ranks_report_and_heatmap_pages():
    """64 ranks from the 8 real sections (each used as 8 ranks): one report, heatmap pages of any size."""
    run = corpus_path("param/dlrm_8ranks")
    from tb_gpuinsight.sections import SectionContext, build_section
    from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace
    real = []
    for path in sorted(run.glob("*.pt.trace.json.gz")):
        trace = tb_gpuinsight.load(path)
        ctx = SectionContext(trace, analyze_trace(trace))
        real.append((build_section(rk.SECTION, ctx), build_section("overview", ctx)))
    traces = []
    for rank in range(64):
        section, overview = real[rank % 8]
        info = {**section.info, "distributed": {**section.info["distributed"], "rank": rank, "world_size": 64}}
        traces.append(rk.RankTrace(f"worker{rank}", "s", types.SimpleNamespace(info=info, arrays=section.arrays,
                                                                               error=""), overview))
    report = rk.analyze(traces)
    assert len(report.ranks) == 64 and not [p for p in report.problems if "no trace" in p]
    page = report.heatmap("dur", offset=60, limit=16)
    assert page["ranks"] == [60, 61, 62, 63] and page["total_ranks"] == 64
    assert len(page["median_per_step"]) == len(page["steps"])
    assert report.heatmap("idle_launch_bound")["values"][0][0] > 0


def test_all_ranks_selection_combines_every_worker(dlrm_logdir):
    """The worker "*" (All ranks) analyses every rank's span together; a diff against it spreads over the ranks."""
    logdir, cache = dlrm_logdir
    service = LogdirService(str(logdir), cache_dir=str(cache), workers=0, scan_interval=60)
    service.scan()
    one = service.analysis("dlrm", "worker0_step_12", "all")
    every = service.analysis("dlrm", "*", "all")
    assert len(every.activities) > 7 * len(one.activities)
    assert set(every.activities["span"].tolist()) == set(range(8))
    nccl = every.by_name().to_pandas()
    assert nccl.loc[nccl["name"].str.startswith("ncclKernel"), "count"].sum() == 64  # 8 per rank
    from tb_gpuinsight.analysis.diff.compare import diff
    result = diff(one, every, names=("rank 0", "all ranks"))
    allreduce = next(r for r in result.rows if r["name"].startswith("ncclKernel_AllReduce"))
    spread = allreduce["spread_b"]  # per-rank time of this kernel: min / median / max over the 8 ranks
    assert allreduce["spread_a"] is None and spread["min"] <= spread["median"] <= spread["max"]
    # The kernel table of "All ranks": one row per kernel over every rank's GPU, with its spread over the ranks.
    from tb_gpuinsight.routes import kernels as kernel_routes
    plugin = types.SimpleNamespace(service=service)
    request = _request(run="dlrm", worker="*", span="all", sort="rank_max_us", limit="500")
    page = kernel_routes.kernels(every, request, ranks_routes.span_ranks(plugin, request))
    assert page["rank_count"] == 8 and page["rows"][0]["name"].startswith("ncclKernel_SendRecv")
    rows = {r["name"]: r for r in page["rows"]}
    per_rank = {}  # the same kernel's time on each rank, from each rank's own analysis
    for worker in sorted({s.worker for s in service.ready_states("dlrm", "*", "all")}):
        table = service.analysis("dlrm", worker, "all").by_name().to_pandas()
        for name, t in table.groupby("name")["total_us"].sum().items():
            per_rank.setdefault(name, []).append(t)
    assert set(rows) == set(per_rank)
    for name, times in per_rank.items():
        times += [0.0] * (8 - len(times))
        r = rows[name]
        assert r["ranks"] == sum(t > 0 for t in times) and r["total_us"] == pytest.approx(sum(times))
        assert (r["rank_min_us"], r["rank_median_us"], r["rank_max_us"]) == \
            pytest.approx((min(times), float(np.median(times)), max(times)))
    assert all("device" not in r for r in page["rows"])
    assert kernel_routes.kernels(one, _request(run="dlrm", worker="worker0_step_12"))["rank_count"] is None
    frame = tb_gpuinsight.kernels_across_ranks(corpus_path("param/dlrm_8ranks"))
    api = frame[frame["name"].str.startswith("ncclKernel_AllReduce")].iloc[0]
    assert api["ranks"] == 8 and api["rank_median_us"] == pytest.approx(rows[api["name"]]["rank_median_us"])


def test_interconnect_rows_are_sourced_and_rated_one_way(tmp_path):
    from tb_gpuinsight.errors import ConfigError
    from tb_gpuinsight.estimate.devices import load_datasheet
    rows = {r.name: r for r in load_datasheet()}
    links = {name: r.interconnect for name, r in rows.items() if r.interconnect}
    assert links["NVIDIA Tesla V100 SXM2 32GB"]["gbps"] == 300 and links["NVIDIA A100 SXM4 80GB"]["gbps"] == 600
    assert links["NVIDIA H100 SXM5 80GB"]["gbps"] == 900 and "Infinity Fabric" in links["AMD Instinct MI300X"]["link"]
    assert {links[n]["link"] for n in ("NVIDIA Tesla V100 PCIe", "NVIDIA A100 PCIe 80GB", "NVIDIA H100 PCIe 80GB")} == \
        {"PCIe Gen3 x16", "PCIe Gen4 x16", "PCIe Gen5 x16"}
    for link in links.values():
        assert link["source"].startswith("https://") and link["note"]
        assert link["per_direction_gbps"] == link["gbps"] / 2  # every built-in figure sums both directions
    bad = tmp_path / "devices.json"
    bad.write_text(json.dumps({"devices": [{"name": "X", "vendor": "nvidia", "peak_tflops": {"fp32": 1},
                                            "interconnect": {"link": "NVLink", "gbps": "fast"}}]}))
    with pytest.raises(ConfigError, match="interconnect.gbps"):
        load_datasheet(str(bad))
