"""Critical path over the joint CPU + GPU graph: hand-made traces with answers worked out by hand (a GPU-bound
step, a host-bound step, a cudaStreamSynchronize, two streams joined by an event wait, a collective wait, a
cross-thread data dependency from an Execution Trace), the same answer with and without an ET, the rank
comparison, the section, CLI, API and plugin routes on the real DLRM ranks."""
from __future__ import annotations

import json
import os

import pytest

import tb_gpuinsight
from tb_gpuinsight.analysis.graph.critical_path.path import compute, to_json
from tb_gpuinsight.analysis.graph.critical_path.deps import CAUSES
from tb_gpuinsight.analysis.graph.critical_path.ranks import compare
from tb_gpuinsight.analysis.kernels.efficiency import analyze_trace
from tb_gpuinsight.cli import main

from .corpus import corpus_path

PID, TID = 100, 1


def op(name, ts, dur, tid=TID, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def call(name, ts, dur, corr, tid=TID):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def kernel(name, ts, dur, corr, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr}}


def sync(kind, ts, corr, stream=-1, wait_stream=None, record=None):
    args = {"cuda_sync_kind": kind, "device": 0, "stream": stream, "correlation": corr}
    if wait_stream is not None:
        args.update(wait_on_stream=wait_stream, wait_on_cuda_event_record_corr_id=record)
    return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": ts, "dur": 1, "args": args}


def step(n, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": PID, "tid": TID, "ts": ts,
            "dur": dur}


def path_of(tmp_path, events, name="t.pt.trace.json", ets=(), **top):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, **top}))
    trace = tb_gpuinsight.load(path)
    return compute(trace, analyze_trace(trace).activities, [str(p) for p in ets])


def causes(cp, i=0):
    return {c: round(us, 6) for c, us in cp.steps[i]["causes"].items() if us}


def kinds(cp):
    return [(s["cause"], s["kind"], s["name"], s["start_us"], s["dur_us"]) for s in cp.segments()]


def test_gpu_bound_step_is_mostly_kernels(tmp_path):
    events = [step(1, 0, 850), op("aten::mm", 10, 50), call("cudaLaunchKernel", 20, 10, 1),
              call("cudaLaunchKernel", 40, 10, 2), kernel("gemm_a", 35, 400, 1), kernel("gemm_b", 435, 400, 2),
              call("cudaDeviceSynchronize", 70, 770, 3)]
    cp = path_of(tmp_path, events)
    # idle before the op, the op's own time, the launch until the first kernel runs, both kernels back to back,
    # the sync's return after the last kernel, host time after it.
    assert causes(cp) == {"cpu_op": 10, "launch": 15, "kernel": 800, "sync_wait": 5, "idle": 20}
    assert [s[2] for s in kinds(cp)] == ["(host, outside any op)", "aten::mm", "cudaLaunchKernel", "gemm_a", "gemm_b",
                                         "cudaDeviceSynchronize", "(host, outside any op)"]
    s = cp.steps[0]
    assert s["wall_us"] == 850 and s["path_us"] == 830 and sum(s["causes"].values()) == pytest.approx(850)
    assert s["causes"]["kernel"] / s["wall_us"] > 0.9


def test_host_bound_step_is_mostly_cpu_ops(tmp_path):
    events = [step(1, 0, 810), op("aten::a", 0, 400), call("cudaLaunchKernel", 390, 5, 1), kernel("k1", 396, 10, 1),
              op("aten::b", 410, 390), call("cudaLaunchKernel", 790, 5, 2), kernel("k2", 796, 10, 2)]
    cp = path_of(tmp_path, events)
    assert causes(cp) == {"cpu_op": 775, "launch": 11, "kernel": 10, "idle": 14}
    assert [s[2] for s in kinds(cp)] == ["aten::a", "cudaLaunchKernel", "aten::a", "(host, outside any op)",
                                         "aten::b", "cudaLaunchKernel", "k2", "(host, outside any op)"]


def test_back_to_back_events_follow_each_other(tmp_path):
    """Whole-microsecond traces put one event's start exactly at the previous one's end: siblings, not nested
    (nested, b's time would be lost to a host gap after a)."""
    events = [op("a", 0, 100), op("b", 100, 100), op("c", 250, 50)]
    cp = path_of(tmp_path, events)
    assert [(s[2], s[3], s[4]) for s in kinds(cp)] == [("a", 0, 100), ("b", 100, 100),
                                                       ("(host, outside any op)", 200, 50), ("c", 250, 50)]


STREAM_SYNC = [step(1, 0, 600), op("aten::item", 0, 500), call("cudaLaunchKernel", 10, 10, 1),
               kernel("k1", 25, 400, 1), call("cudaStreamSynchronize", 30, 400, 2), op("aten::add", 510, 90)]


@pytest.mark.parametrize("with_sync_event", [True, False])
def test_stream_synchronize_waits_for_the_kernel(tmp_path, with_sync_event):
    """The host's wait inside cudaStreamSynchronize is the kernel's time, not CPU time; without the cuda_sync
    event (older traces) the last GPU work to end inside the call gives the same answer."""
    events = STREAM_SYNC + ([sync("Stream Sync", 429, 2, stream=7)] if with_sync_event else [])
    cp = path_of(tmp_path, events)
    assert causes(cp) == {"cpu_op": 170, "launch": 15, "kernel": 400, "sync_wait": 5, "idle": 10}
    assert ("sync_wait", "sync", "cudaStreamSynchronize", 425, 5) in kinds(cp)
    assert cp.notes["host_syncs_waiting"] == 1


def test_event_synchronize_waits_for_the_recorded_work(tmp_path):
    """cudaEventSynchronize waits for the work recorded before its event (k1 on stream 7), not for the last work
    to end inside the call (k2 on stream 8)."""
    events = [call("cudaLaunchKernel", 10, 10, 1), kernel("k1", 50, 400, 1, stream=7),
              call("cudaEventRecord", 22, 2, 2), call("cudaLaunchKernel", 26, 4, 3), kernel("k2", 60, 392, 3, stream=8),
              call("cudaEventSynchronize", 40, 415, 4), sync("Event Sync", 454, 4, wait_stream=7, record=2),
              op("after", 460, 10)]
    cp = path_of(tmp_path, events)
    assert causes(cp) == {"cpu_op": 10, "launch": 40, "kernel": 400, "sync_wait": 5, "idle": 5}  # from the first event
    assert "k1" in {s[2] for s in kinds(cp)} and "k2" not in {s[2] for s in kinds(cp)}


def test_graph_replay_kernels_all_hang_on_the_graph_launch(tmp_path):
    """The kernels a cudaGraphLaunch replays share its correlation id: each depends on that call, and on the
    previous one on the stream; the host waits for the last."""
    events = [op("replay", 0, 340), call("cudaGraphLaunch", 10, 10, 1), kernel("g1", 30, 100, 1),
              kernel("g2", 130, 100, 1), kernel("g3", 230, 100, 1), call("cudaStreamSynchronize", 25, 310, 2)]
    cp = path_of(tmp_path, events)
    assert causes(cp) == {"cpu_op": 15, "launch": 20, "kernel": 300, "sync_wait": 5}
    assert [s[2] for s in kinds(cp)] == ["replay", "cudaGraphLaunch", "g1", "g2", "g3", "cudaStreamSynchronize",
                                         "replay"]
    assert {s["correlation"] for s in cp.segments() if s["kind"] == "kernel"} == {1}


def _two_streams(with_args):
    waits = dict(wait_stream=7, record=2) if with_args else {}
    return [op("outer", 0, 60), call("cudaLaunchKernel", 10, 10, 1), kernel("producer", 100, 500, 1, stream=7),
            call("cudaEventRecord", 25, 2, 2), call("cudaStreamWaitEvent", 30, 2, 3),
            sync("Stream Wait Event", 31, 3, stream=8, **waits),
            call("cudaLaunchKernel", 40, 10, 4), kernel("consumer", 605, 100, 4, stream=8),
            call("cudaDeviceSynchronize", 62, 648, 5), op("after", 715, 5)]


@pytest.mark.parametrize("with_args", [True, False])
def test_two_streams_joined_by_an_event_wait(tmp_path, with_args):
    """The consumer on stream 8 waits for the producer on stream 7 (cudaStreamWaitEvent): the path runs through
    both kernels. Kineto 2024+ names the stream and event record; without those args the wait is inferred."""
    cp = path_of(tmp_path, _two_streams(with_args))
    assert causes(cp) == {"cpu_op": 15, "launch": 90, "kernel": 600, "sync_wait": 10, "idle": 5}
    names = [s[2] for s in kinds(cp)]
    assert names[:6] == ["outer", "cudaLaunchKernel", "producer", "consumer", "consumer", "cudaDeviceSynchronize"]
    assert ("sync_wait", "stream_wait", "consumer", 600, 5) in kinds(cp)
    assert cp.notes["stream_wait_source"] == ("cuda_sync events" if with_args else "inferred")


def test_a_short_copy_waiting_on_another_stream(tmp_path):
    """A 1 us copy ends before any other activity could: the inferred wait looks past the copy itself."""
    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 8,
            "ts": 603, "dur": 1, "args": {"device": 0, "stream": 8, "correlation": 4, "bytes": 4}}
    events = [op("outer", 0, 60), call("cudaLaunchKernel", 10, 10, 1), kernel("producer", 100, 500, 1, stream=7),
              call("cudaStreamWaitEvent", 30, 2, 3), call("cudaMemcpyAsync", 40, 15, 4), copy]
    cp = path_of(tmp_path, events)
    assert ("sync_wait", "stream_wait", "Memcpy DtoH (Device -> Pageable)", 600, 3) in kinds(cp)
    assert causes(cp) == {"cpu_op": 10, "launch": 90, "kernel": 501, "sync_wait": 3}


def _collective(rank, compute_us):
    """A rank computes for `compute_us`, then all-reduces; the collective ends at 900 us on every rank, so a
    rank that computed less waited longer in it."""
    nccl_start = 21 + compute_us
    return [step(1, 0, 1000), op("aten::mm", 5, 10), call("cudaLaunchKernel", 10, 3, 1),
            kernel("gemm", 20, compute_us, 1), call("cudaEventRecord", 14, 1, 2),
            op("record_param_comms", 16, 10), call("cudaStreamWaitEvent", 17, 1, 3),
            sync("Stream Wait Event", 17, 3, stream=20, wait_stream=7, record=2),
            call("cudaLaunchKernel", 20, 3, 4),
            kernel("ncclKernel_AllReduce_RING_LL_Sum_float", nccl_start, 900 - nccl_start, 4, stream=20),
            call("cudaStreamSynchronize", 30, 875, 5), sync("Stream Sync", 904, 5, stream=20)]


def test_collective_wait_is_communication(tmp_path):
    cp = path_of(tmp_path, _collective(0, 100), distributedInfo={"rank": 0, "world_size": 2})
    # mm's head, the launch until the gemm runs, the gemm, the stream wait, the all-reduce (its wait for the
    # peer inside), the sync's return, host time to the step's end.
    assert causes(cp) == {"cpu_op": 5, "launch": 10, "kernel": 100, "sync_wait": 6, "communication": 779,
                          "idle": 100}
    assert cp.rank == 0


def test_ranks_name_the_longest_path_and_the_straggler(tmp_path):
    fast = path_of(tmp_path, _collective(0, 100), "r0.pt.trace.json", distributedInfo={"rank": 0})
    slow = path_of(tmp_path, _collective(1, 600), "r1.pt.trace.json", distributedInfo={"rank": 1})
    out = compare([("w0", [fast]), ("w1", [slow])])
    rows = {r["worker"]: r for r in out["ranks"]}
    assert rows["w1"]["causes"]["kernel"] == 600 and rows["w0"]["causes"]["communication"] == 779
    assert rows["w0"]["top"] == {"name": "ncclKernel_AllReduce_RING_LL_Sum_float", "cause": "communication",
                                 "dur_us": 779}
    # Both paths are 900 us of traced work; the slow rank waits least in the collective: the others wait for it.
    assert out["longest"] in ("w0", "w1") and "w1 (rank 1) spends the least time in communication" in out["why"]


def test_a_thread_blocked_on_another_thread_waits_for_it(tmp_path):
    """The main thread sits in backward() (no op) while the autograd thread works: the path runs through the
    autograd thread, joined at both ends, instead of calling the main thread's wait host idle time."""
    events = [op("forward", 0, 100, tid=1), op("optimizer", 620, 80, tid=1), op("backward_op", 150, 450, tid=2)]
    cp = path_of(tmp_path, events)
    assert causes(cp) == {"cpu_op": 630, "sync_wait": 70}
    assert [(s[1], s[2]) for s in kinds(cp)] == [("cpu_op", "forward"), ("thread_wait", "backward_op"),
                                                 ("cpu_op", "backward_op"), ("thread_wait", "optimizer"),
                                                 ("cpu_op", "optimizer")]
    assert cp.notes["thread_waits"] == 2


# ------------------------------------------------------------------------------------------ Execution Trace

def _et(nodes):
    root = {"id": 1, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 0, "tid": 0}
    return {"schema": "1.0.1", "pid": PID, "time": "", "start_ts": 0, "finish_ts": 0, "nodes": [root] + nodes}


def _node(i, name, rf, tid, inputs=(), outputs=()):
    t = lambda ids: [[k, k, 0, 4, 4, "cuda:0"] for k in ids]  # noqa: E731
    return {"id": i, "name": name, "parent": 1, "rf_id": rf, "tid": tid, "op_schema": f"{name}(Tensor x) -> Tensor",
            "inputs": t(inputs), "input_types": ["Tensor(float)"] * len(inputs),
            "input_shapes": [[4]] * len(inputs), "outputs": t(outputs),
            "output_types": ["Tensor(float)"] * len(outputs), "output_shapes": [[4]] * len(outputs)}


def _write_et(tmp_path, nodes, name="t.et.json"):
    path = tmp_path / name
    path.write_text(json.dumps(_et(nodes)))
    return path


def test_same_answer_with_and_without_an_execution_trace(tmp_path):
    """On one thread the ET's data dependencies are implied by program order: the path is the same, and its
    segments carry the ET node ids."""
    events = [step(1, 0, 600), op("aten::item", 0, 500, **{"Record function id": 11}),
              call("cudaLaunchKernel", 10, 10, 1), kernel("k1", 25, 400, 1), call("cudaStreamSynchronize", 30, 400, 2),
              op("aten::add", 510, 90, **{"Record function id": 12})]
    et = _write_et(tmp_path, [_node(2, "aten::item", 11, TID, outputs=[5]),
                              _node(3, "aten::add", 12, TID, inputs=[5], outputs=[6])])
    bare, linked = path_of(tmp_path, events), path_of(tmp_path, events, ets=[et])
    assert linked.has_et and not bare.has_et and linked.notes["et"]["linked"] == 2
    assert linked.steps == bare.steps and kinds(linked) == kinds(bare)
    ids = {s["name"]: s["et_id"] for s in linked.segments()}
    assert ids["aten::item"] == 2 and ids["aten::add"] == 3 and ids["k1"] == 2  # a kernel: its launching op's node
    assert ids["cudaStreamSynchronize"] == 2 and all(s["et_id"] is None for s in bare.segments())


def test_a_cross_thread_data_dependency_from_the_et(tmp_path):
    """The consumer on thread 2 reads what the producer on thread 1 wrote, resuming too late after it for a thread
    join to be inferred: only the ET shows the dependency, and the path then runs through the producer."""
    events = [op("producer", 0, 500, tid=1, **{"Record function id": 1}), op("z", 0, 100, tid=2),
              op("consumer", 1100, 100, tid=2, **{"Record function id": 2})]
    et = _write_et(tmp_path, [_node(2, "producer", 1, 1, outputs=[7]), _node(3, "consumer", 2, 2, inputs=[7])])
    bare, linked = path_of(tmp_path, events), path_of(tmp_path, events, ets=[et])
    assert causes(bare) == {"cpu_op": 200, "idle": 1000}
    assert causes(linked) == {"cpu_op": 600, "sync_wait": 600}
    assert ("sync_wait", "data_wait", "consumer", 500, 600) in kinds(linked)
    assert linked.notes["et"]["data_edges"] == 1 and bare.notes["thread_waits"] == 0


# ------------------------------------------------------------------------------------------ users' entry points

def test_json_limit_step_and_section_round_trip(tmp_path):
    cp = path_of(tmp_path, _two_streams(True))
    again = type(cp).from_section(cp.to_section())
    assert again.steps == cp.steps and kinds(again) == kinds(cp)
    out = to_json([("s", cp)], limit=2)
    assert out["available"] and out["segment_count"] == len(cp.segments()) and out["truncated"]
    assert [s["dur_us"] for s in out["segments"]] == [500, 100] and [s["index"] for s in out["segments"]] == [0, 1]
    assert set(out["totals"]) == set(CAUSES) and out["causes"] == list(CAUSES)
    assert not to_json([("s", cp)], step="7")["available"]
    stepped = path_of(tmp_path, [step(12, 0, 850)] + _two_streams(True), "s.pt.trace.json")
    assert stepped.step_index(12) == stepped.step_index("12") == stepped.step_index("ProfilerStep#12") == 0


SMALL = ["hta/event_sync_trace.json.gz", "hta/benchmark_result_2869224_1695835535_trace.json.gz",
         "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "tracelens/vllm_decode_full__graph_execution.json.gz",
         "tracelens/mi210__gpu_only_trace.json.gz", "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
         "hta/inference_rank_1.json.gz", "kineto/gpu_metrics_input.json"]


@pytest.mark.parametrize("rel", SMALL)
def test_every_step_is_covered_on_real_traces(rel):
    """AMD, graph replay, GPU-only, CPU-only, 2021-era traces: segments tile each step, causes sum to its wall."""
    trace = tb_gpuinsight.load(corpus_path(rel))
    cp = compute(trace, analyze_trace(trace).activities)
    assert cp.steps
    for i, s in enumerate(cp.steps):
        segs = cp.segments(i)
        assert sum(s["causes"].values()) == pytest.approx(s["wall_us"])
        assert sum(x["dur_us"] for x in segs) == pytest.approx(s["wall_us"])
        assert all(x["dur_us"] > 0 for x in segs)
        starts = [x["start_us"] for x in segs]
        assert starts == sorted(starts) and starts[0] == pytest.approx(s["start_us"])


DLRM = "param/dlrm_8ranks"


@pytest.fixture(scope="module")
def dlrm_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("cpath_logdir")
    os.symlink(corpus_path(DLRM), logdir / "dlrm")
    return logdir


def test_cli_and_api_on_the_dlrm_ranks(dlrm_logdir, capsys):
    run = dlrm_logdir / "dlrm"
    assert main(["critical-path", str(run), "--worker", "worker0_step_12", "--top", "5"]) == 0
    text = capsys.readouterr().out
    assert "ProfilerStep#10" in text and "communication" in text and "with its Execution Trace" in text
    report = tb_gpuinsight.critical_path(run, worker="worker0_step_12")
    steps = report.steps
    assert list(steps["step"]) == ["ProfilerStep#10"]
    assert steps[list(CAUSES)].sum(axis=1).iloc[0] == pytest.approx(steps["wall_us"].iloc[0])
    assert report.segments["dur_us"].sum() == pytest.approx(steps["wall_us"].iloc[0])
    assert report.segments["et_id"].notna().any()
    assert main(["critical-path", str(run), "--ranks"]) == 0
    ranks_text = capsys.readouterr().out
    assert "has the longest critical path" in ranks_text and ranks_text.count("_step_12 ") >= 8
    # A step no trace holds is bad input, as the route's 404: exit 2 and the steps there are.
    assert main(["critical-path", str(run), "--worker", "worker0_step_12", "--step", "ProfilerStep#99"]) == 2
    err = capsys.readouterr().err
    assert "no step 'ProfilerStep#99'" in err and "ProfilerStep#10" in err and len(err.strip().splitlines()) == 1


def test_routes_on_the_dlrm_ranks(dlrm_logdir, tmp_path):
    from .test_timeline import _serve

    get = _serve(dlrm_logdir, tmp_path / "cache", run="dlrm")
    code, ranks = get("critical_path/ranks")
    assert code == 200 and [r["rank"] for r in ranks["ranks"]] == list(range(8)) and ranks["longest"]
    worker = ranks["ranks"][3]["worker"]
    code, one = get("critical_path", worker=worker, span="all", limit="50")
    assert code == 200 and one["available"] and one["has_et"] and len(one["segments"]) == 50
    s = one["steps"][0]
    assert sum(s["causes"].values()) == pytest.approx(s["wall_us"]) and s["causes"]["communication"] > 0
    assert {seg["cause"] for seg in one["segments"]} <= set(CAUSES)
    assert get("critical_path", worker=worker, step="ProfilerStep#10")[1]["steps"][0]["step"] == "ProfilerStep#10"
    assert get("critical_path", worker=worker, step="3")[0] == 404
    assert get("critical_path", worker=worker, limit="0")[0] == 400
    assert get("critical_path", worker="nobody")[0] == 404
    assert get("critical_path/ranks", run="nope")[0] == 404


def test_routes_say_why_when_the_path_could_not_be_built(tmp_path, monkeypatch):
    """A builder failure is the span's failure for this view (422 with its reason); other views still work."""
    from tb_gpuinsight.analysis.graph.critical_path import path as cpath

    from .test_timeline import _serve

    run = tmp_path / "logdir" / "tiny"
    run.mkdir(parents=True)
    (run / "w.1700000000000000000.pt.trace.json").write_text(json.dumps({"traceEvents": STREAM_SYNC}))

    def broken(ctx):
        raise ValueError("no luck")

    monkeypatch.setattr(cpath, "build_section", broken)
    get = _serve(tmp_path / "logdir", tmp_path / "cache", run="tiny", worker="w")
    code, out = get("critical_path")
    assert code == 422 and "critical path: internal error: ValueError: no luck" in out["error"]
    assert get("overview")[0] == 200
    code, ranks = get("critical_path/ranks")
    assert code == 200 and ranks["ranks"] == [] and "no luck" in ranks["problems"][0]


def test_odd_values_do_not_break_the_path(tmp_path):
    """Thread ids beyond int64, far-future times, ids that do not fit: the path is still built, every step tiled."""
    events = [op("a", 0, 100, tid=2 ** 64 + 5), op("b", 9.3e18, 10, tid="main"),
              call("cudaLaunchKernel", 10, 5, 2 ** 63), kernel("k", 20, 10, 2 ** 63), op("c", 200, 10, tid=-(2 ** 63) - 1)]
    cp = path_of(tmp_path, events)
    for i, s in enumerate(cp.steps):
        assert sum(x["dur_us"] for x in cp.segments(i)) == pytest.approx(s["wall_us"])
    assert json.dumps(to_json([("s", cp)]))
