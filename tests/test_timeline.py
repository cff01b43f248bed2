"""Timeline index and viewport queries: bounded answers, exact busy time (checked against intervals merged by hand
from the trace's own tables), every wide event returned, routes on the corpus's biggest trace, bad parameters."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tb_gpuinsight as gi
from tb_gpuinsight.analysis.timeline import flows, index as tl
from tb_gpuinsight.analysis.overview.breakdown import LAUNCH_GAP_US

from .corpus import corpus_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BERT = os.path.join(ROOT, "samples", "bert_h100", "h100-node.1751410836000000000.pt.trace.json.gz")
BASE = "/data/plugin/gpuinsight"


def _union_in(intervals, t0, t1) -> float:
    """Busy time of [t0, t1] covered by a list of (start, end): a plain sweep, independent of the index."""
    total, reach = 0.0, t0
    for s, e in sorted(intervals):
        s, e = max(s, reach), min(e, t1)
        if e > s:
            total += e - s
            reach = e
    return total


def _gpu_intervals(trace, origin, device, stream):
    out = []
    for table in (trace.kernels, trace.memops):
        on = (table["device"] == device) & (table["stream"] == stream)
        out += list(zip((table["ts"][on] - origin).tolist(), (table["ts"][on] + table["dur"][on] - origin).tolist()))
    return out


@pytest.fixture(scope="module")
def bert():
    trace = gi.load(BERT)
    return trace, tl.build_index(trace, gi.analyze(trace))


def _ranges(duration, n=25, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        t0 = rng.uniform(-0.05, 0.9) * duration
        yield t0, t0 + duration * 10 ** rng.uniform(-4, 0.1)


def _check_viewport(index, trace, t0, t1, width):
    view = tl.viewport(index, t0, t1, width)
    px = (t1 - t0) / width
    for lane in view["lanes"]:
        info = index.lanes[lane["id"]]
        bins = sum(lane["bins"]["busy_us"])
        assert bins == pytest.approx(lane["busy_us"], rel=5e-3, abs=1e-3)
        assert all(0 <= a <= b < width for a, b in zip(lane["bins"]["px0"], lane["bins"]["px1"]))
        assert all(d >= px for d in lane["events"]["dur"])
        if info["kind"] == "gpu":
            exact = _union_in(_gpu_intervals(trace, index.origin_us, info["device"], info["stream"]), t0, t1)
            assert lane["busy_us"] == pytest.approx(exact, rel=5e-3, abs=1e-3)
    return view


def test_aggregates_equal_the_exact_busy_time(bert):
    trace, index = bert
    for t0, t1 in _ranges(index.duration_us):
        _check_viewport(index, trace, t0, t1, 800)


def test_every_event_wider_than_a_pixel_is_returned(bert):
    trace, index = bert
    k = trace.kernels
    gpu = next(lane for lane in index.lanes if lane["kind"] == "gpu")
    t0, t1, width = 0.0, index.duration_us, 2000
    px = (t1 - t0) / width
    view = tl.viewport(index, t0, t1, width, lanes=[gpu["id"]])
    [lane] = view["lanes"]
    on = (k["device"] == gpu["device"]) & (k["stream"] == gpu["stream"]) & (k["dur"] >= px)
    starts = sorted(np.round(k["ts"][on] - index.origin_us, 4).tolist())
    assert set(starts) <= set(lane["events"]["start"])
    classes = {index.names[n]: tl.CLASSES[c] for n, c in zip(lane["events"]["name"], lane["events"]["cls"])}
    assert "GEMM" in classes.values() and all(c in tl.CLASSES for c in classes.values())


def test_range_breakdown_and_find(bert):
    trace, index = bert
    out = tl.breakdown(index, 0, index.duration_us)
    [device] = out["devices"]
    k, m = trace.kernels, trace.memops
    exact = _union_in(_gpu_intervals(trace, index.origin_us, 0, 7), 0, index.duration_us)
    assert device["busy_us"] == pytest.approx(exact, rel=1e-5)
    assert device["busy_us"] + device["idle_us"] == pytest.approx(index.duration_us)
    assert sum(device["classes"].values()) == pytest.approx(device["busy_us"], rel=1e-6)
    name = trace.kernels.strings["name"][k["name"][np.argmax(k["dur"])]]
    found = tl.find(index, name)
    assert found["count"] == int((np.asarray(trace.kernels.values("name"), dtype=object) == name).sum())
    longest = found["longest"]
    assert longest["end"] - longest["start"] == pytest.approx(float(k["dur"].max()))
    assert tl.event(index, longest["index"])["name"] == name
    assert tl.find(index, "no such kernel")["count"] == 0
    assert len(m) and index.steps == ["ProfilerStep#6"]


def test_idle_gaps_carry_the_overview_cause(bert):
    _, index = bert
    view = tl.viewport(index, 0, index.duration_us, 4000)
    [gaps] = view["idle"]
    assert gaps["start"] and len(gaps["cause"]) == len(gaps["start"])
    launch_bound = tl.IDLE_CAUSES.index("launch-bound")
    for s, e, cause in zip(gaps["start"], gaps["end"], gaps["cause"]):
        assert 0 <= cause < len(tl.IDLE_CAUSES)
        # The Overview's rule: an idle run shorter than LAUNCH_GAP_US (with no other evidence) is launch-bound;
        # a longer one never is.
        if e - s >= LAUNCH_GAP_US:
            assert cause != launch_bound
    assert launch_bound in gaps["cause"]
    # Bands are the Overview's step windows.
    assert [s["name"] for s in view["steps"]] == ["ProfilerStep#6"]


def test_cpu_lanes_nest_ops_by_depth(bert):
    trace, index = bert
    cpu = [lane for lane in index.lanes if lane["kind"] == "cpu"]
    assert [lane["depth"] for lane in cpu] == list(range(len(cpu))) and len(cpu) > 1
    top = cpu[0]["id"]
    a, b = index.lane_off[top], index.lane_off[top + 1]
    # Top-level ops never overlap one another, and every op of depth 1 lies inside one of them.
    assert np.all(index.start[a + 1:b] >= index.end[a:b - 1] - 1e-6)
    c, d = index.lane_off[cpu[1]["id"]], index.lane_off[cpu[1]["id"] + 1]
    j = np.searchsorted(index.start[a:b], index.start[c:d], side="right") - 1
    assert np.all(index.end[a:b][j] >= index.end[c:d] - 1e-6)


def test_a_cpu_only_trace_draws_with_efficiency_colours():
    """No GPU activity: the activity table is empty and every event is a CPU op (no % of roof)."""
    trace = gi.load(os.path.join(ROOT, "samples", "cpu_mlp", "cpu-worker.1795250381965892228.pt.trace.json"))
    eff = gi.analyze(trace)
    index = tl.build_index(trace, eff)
    view = tl.viewport(index, 0, index.duration_us, 500, efficiency=eff.activities["efficiency"])
    events = [e for lane in view["lanes"] for e in lane["events"]["eff"]]
    assert len(eff.activities) == 0 and events and all(e is None for e in events)


def test_bad_ranges_are_refused(bert):
    _, index = bert
    for t0, t1, width in ((5, 5, 100), (5, 1, 100), (0, float("nan"), 100), (0, 10, 0), (0, 10, tl.MAX_WIDTH + 1)):
        with pytest.raises(tl.TimelineError):
            tl.viewport(index, t0, t1, width)
    with pytest.raises(tl.TimelineError):
        tl.viewport(index, 0, 10, 100, lanes=[len(index.lanes)])


# ------------------------------------------------------------------------------------- the biggest real trace

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """df_index_resolver, the corpus's biggest trace (216k events, ~80k on the timeline: 20 times MAX_EVENTS),
    linked into a logdir served by the plugin."""
    source = corpus_path("hta/df_index_resolver.json.gz")
    logdir = tmp_path_factory.mktemp("timeline_logdir")
    run = logdir / "big"
    run.mkdir()
    out = run / "w.1700000000000000000.pt.trace.json.gz"
    os.symlink(source, out)
    return logdir, out


def _serve(logdir, cache, **sel):
    """A `get(route, **params) -> (status, JSON)` on the plugin served by real TensorBoard over `logdir`."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_gpuinsight.plugin import GpuInsightPlugin
    from tb_gpuinsight.service import LogdirService

    service = LogdirService(str(logdir), cache_dir=str(cache), workers=0, scan_interval=60)
    service.scan()
    client = Client(application.TensorBoardWSGI([GpuInsightPlugin(
        base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)]))

    def get(route, **params):
        response = client.get(f"{BASE}/{route}", query_string={**sel, **params})
        return response.status_code, json.loads(response.get_data(as_text=True))

    return get


def test_routes_on_a_big_trace_are_bounded_and_exact(big, tmp_path):
    logdir, path = big
    get = _serve(logdir, tmp_path / "cache", run="big", worker="w", span="all")
    code, meta = get("timeline/meta")
    assert code == 200 and meta["events"] > 15 * tl.MAX_EVENTS and meta["steps"] >= 5
    trace = gi.load(str(path))
    busy = {}  # per GPU lane, its intervals from the trace's own tables (gathered once, checked in every range)
    width = 1500
    for t0, t1 in [(0, meta["duration_us"]), *_ranges(meta["duration_us"], n=6, seed=1)]:
        code, view = get("timeline/view", t0=repr(t0), t1=repr(t1), width=width)
        assert code == 200
        lanes = len(view["lanes"])
        assert view["items"] <= tl.MAX_EVENTS + lanes * width  # bounded, whatever the trace size
        assert sum(len(lane["events"]["start"]) for lane in view["lanes"]) <= tl.MAX_EVENTS + 16 * lanes
        for lane in view["lanes"]:
            info = meta["lanes"][lane["id"]]
            assert sum(lane["bins"]["busy_us"]) == pytest.approx(lane["busy_us"], rel=5e-3, abs=1e-3)
            if info["kind"] == "gpu":
                key = (info["device"], info["stream"])
                if key not in busy:
                    busy[key] = sorted(_gpu_intervals(trace, meta["origin_us"], *key))
                exact = _union_in(busy[key], t0, t1)
                assert sum(lane["bins"]["busy_us"]) == pytest.approx(exact, rel=5e-3, abs=1e-3)
                assert all(e is None or e >= 0 for e in lane["events"].get("eff", []))
    code, rng = get("timeline/range", t0="0", t1=repr(meta["duration_us"]))
    assert code == 200 and rng["devices"][0]["busy_us"] > 0
    code, found = get("timeline/find", name=meta["names"][0])
    launches = sum(table.values("name").count(meta["names"][0]) for table in (trace.kernels, trace.memops))
    assert code == 200 and found["count"] == launches >= 2
    code, ev = get("timeline/event", index=found["longest"]["index"])
    assert code == 200 and ev["name"] == meta["names"][0]
    for bad in ({"t0": "1", "t1": "0"}, {"t0": "x", "t1": "1"}, {"t0": "0", "t1": "1", "width": "0"},
                {"t0": "0", "t1": "1", "lanes": "a,b"}, {"t0": "0", "t1": "1", "lanes": "99999"},
                {"t0": "0", "t1": "inf"}):
        code, body = get("timeline/view", **bad)
        assert code == 400 and body["error"], bad
    code, body = get("timeline/meta", tspan="nope")
    assert code == 404 and body["error"]
    code, body = get("timeline/event", index="999999999")
    assert code == 400 and body["error"]


def test_command_exports_and_api_frame(tmp_path, capsys):
    from tb_gpuinsight import cli

    out_csv, out_json = tmp_path / "view.csv", tmp_path / "view.json"
    code = cli.main(["timeline", BERT, "--t0", "0", "--t1", "3000", "--width", "400", "--csv", str(out_csv),
                     "--json", str(out_json)])
    assert code == 0
    text = capsys.readouterr().out
    assert "GPU 0 (all streams)" in text and "busy" in text and "GEMM" in text
    view = json.loads(out_json.read_text())
    assert view["width"] == 400 and view["lanes"] and len(view["names"]) > 10
    lines = out_csv.read_text().splitlines()
    assert lines[0] == ",".join(tl.ROW_FIELDS) and len(lines) > 10
    frame = gi.timeline(BERT, t0=0, t1=3000, width=400)
    assert list(frame.columns) == list(tl.ROW_FIELDS) and len(frame) == len(lines) - 1
    gpu = frame[frame["lane_label"].str.startswith("GPU")]
    busy = gpu[gpu["item"] == "bins"]["busy_us"].sum()
    trace = gi.load(BERT)
    exact = _union_in(_gpu_intervals(trace, trace.meta.start_us, 0, 7), 0, 3000)
    assert busy == pytest.approx(exact, rel=5e-3)
    assert gpu[gpu["item"] == "event"]["pct_of_roof"].notna().any()


def test_all_ranks_stack_on_one_time_base(dlrm_logdir):
    """The worker "*" stacks the 8 DLRM ranks' stored indexes: lanes of every rank, bounded answers, and a
    collective that ends together on every rank once each trace is placed by its absolute start."""
    logdir, cache = dlrm_logdir
    get = _serve(logdir, cache, run="dlrm", worker="*", span="all")
    code, meta = get("timeline/meta")
    assert code == 200 and [r["rank"] for r in meta["ranks"]] == list(range(8))
    offsets = [r["offset_us"] for r in meta["ranks"]]
    assert min(offsets) == 0 and max(offsets) > 1000  # the ranks' traces start milliseconds apart
    width = 1500
    code, view = get("timeline/view", t0="0", t1=repr(meta["duration_us"]), width=width, depth="0")
    assert code == 200
    shown = [meta["lanes"][lane["id"]] for lane in view["lanes"]]
    assert {lane["rank"] for lane in shown if lane["kind"] == "gpu"} == set(range(8))
    assert {lane["rank"] for lane in shown if lane["kind"] == "cpu"} == set(range(8))
    assert all(lane["depth"] == 0 for lane in shown if lane["kind"] == "cpu")  # CPU lanes collapsed
    events = sum(len(lane["events"]["start"]) for lane in view["lanes"])
    assert events <= max(tl.MAX_EVENTS, 16 * len(shown)) and view["items"] <= tl.MAX_EVENTS + len(shown) * width
    code, small = get("timeline/view", t0="0", t1=repr(meta["duration_us"]), width=width, depth="0",
                      lanes=",".join(str(lane["id"]) for lane in shown))
    assert code == 200 and small["items"] == view["items"]
    code, tight = get("timeline/view", t0="0", t1=repr(meta["duration_us"]), width="200")
    assert code == 200 and sum(len(lane["events"]["start"]) for lane in tight["lanes"]) <= tl.MAX_EVENTS
    # Rank 3's stream lane holds what its own span's timeline holds, shifted by its offset.
    rank3 = next(lane for lane in shown if lane["rank"] == 3 and lane["kind"] == "gpu")
    own = _serve(logdir, cache, run="dlrm", worker=rank3["worker"], span=rank3["span"])
    off = offsets[3]
    local = next(lane for lane in own("timeline/meta")[1]["lanes"] if lane["label"] == rank3["label"].split(" · ", 1)[1])
    code, alone = own("timeline/view", t0=repr(-off), t1=repr(meta["duration_us"] - off), width=width,
                      lanes=str(local["id"]))
    stacked = next(lane for lane in view["lanes"] if lane["id"] == rank3["id"])
    assert stacked["busy_us"] == pytest.approx(alone["lanes"][0]["busy_us"])
    assert stacked["events"]["start"] == pytest.approx([s + off for s in alone["lanes"][0]["events"]["start"]])
    # The step's three all-reduces end within tens of microseconds on every rank (their starts differ by the
    # ranks' arrival, their ends by the ring's last hop), though the traces start up to milliseconds apart.
    name = next(n for n in meta["names"] if n.startswith("ncclKernel_AllReduce"))
    code, found = get("timeline/find", name=name)
    assert code == 200 and found["count"] == 24
    ends = {}
    for occ in found["occurrences"]:
        ends.setdefault(meta["lanes"][occ["lane"]]["rank"], []).append(occ["end"])
    assert sorted(ends) == list(range(8))
    per_instance = np.array([sorted(e) for _, e in sorted(ends.items())])
    assert np.ptp(per_instance, axis=0).max() < 50
    code, ev = get("timeline/event", index=found["longest"]["index"])
    assert code == 200 and ev["name"] == name and ev["worker"] == meta["ranks"][ev["rank"]]["worker"]
    code, rng = get("timeline/range", t0="0", t1=repr(meta["duration_us"]))
    assert code == 200 and len(rng["devices"]) == 8 and all(d["label"].startswith("rank ") for d in rng["devices"])
    for bad in ({"t0": "1", "t1": "0"}, {"t0": "0", "t1": "1", "lanes": str(len(meta["lanes"]))}):
        code, body = get("timeline/view", **bad)
        assert code == 400 and body["error"], bad



def test_all_ranks_from_the_command_line_and_api(tmp_path, capsys):
    """The CLI and the API stack the ranks of a run directory as the plugin does (read from the traces there)."""
    from tb_gpuinsight import cli

    run = corpus_path("param/dlrm_8ranks")
    stack = gi.timeline_ranks(run)
    ranks = stack.meta()["ranks"]
    assert [r["rank"] for r in ranks] == list(range(8)) and min(r["offset_us"] for r in ranks) == 0
    assert ranks[0]["offset_us"] == pytest.approx(stack.ranks[0].index.origin_us - stack.origin_us)
    out_csv = tmp_path / "ranks.csv"
    assert cli.main(["timeline", str(run), "--width", "300", "--csv", str(out_csv)]) == 0
    text = capsys.readouterr().out
    assert all(f"rank {r} · GPU {r} (all streams)" in text for r in range(8))
    labels = {line.split(",")[1].split(" · ")[0] for line in out_csv.read_text().splitlines()[1:]}
    assert labels == {f"rank {r}" for r in range(8)}


VLLM = "tracelens/vllm_decode_full__graph_execution.json.gz"  # MI300X: CK (mangled) and Tensile kernels


def _long_names(meta):
    return sorted(meta["names"], key=len, reverse=True)


def test_find_by_any_part_of_a_name_on_a_rocm_trace(tmp_path):
    """Find takes any part of the raw, demangled or display name, case-insensitive; "Show on timeline" names the
    longest real CK / Tensile / PyTorch kernel names (hundreds of characters) by key; matches come in time order."""
    logdir = tmp_path / "logdir"
    (logdir / "vllm").mkdir(parents=True)
    os.symlink(corpus_path(VLLM), logdir / "vllm" / "mi300x.pt.trace.json.gz")
    get = _serve(logdir, tmp_path / "cache", run="vllm", worker="mi300x", span="all")
    code, meta = get("timeline/meta")
    assert code == 200 and len(meta["name_keys"]) == len(meta["names"])
    longest = _long_names(meta)[0]
    assert len(longest) > 800
    code, body = get("timeline/find", name=longest)  # a raw name this long does not fit a parameter
    assert code == 400
    for name in _long_names(meta)[:6]:  # the 822-character copy kernel, the CK norms, the Tensile GEMMs
        code, found = get("timeline/find", name_key=meta["name_keys"][meta["names"].index(name)])
        assert code == 200 and found["count"] >= 1 and [n["name"] for n in found["names"]] == [name]
        code, ev = get("timeline/event", index=found["longest"]["index"])
        assert code == 200 and ev["name"] == name and ev["name_key"] == found["names"][0]["key"]
    # Two CK kernels share the display name "ck_tile::Rmsnorm2dFwd": its lower-case part finds both, through
    # their demangled form (the raw names are mangled: `...12Rmsnorm2dFwdINS_27...`).
    ck = [n for n in meta["names"] if n.startswith("_ZN7ck_tile") and "Rmsnorm2dFwd" in n]
    assert len(ck) == 2
    code, found = get("timeline/find", q="ck_tile::rmsnorm2dfwd")
    assert code == 200 and sorted(n["name"] for n in found["names"]) == sorted(ck)
    assert {n["display_name"] for n in found["names"]} == {"ck_tile::Rmsnorm2dFwd"}
    starts = [o["start"] for o in found["occurrences"]]
    assert starts == sorted(starts) and found["count"] == sum(n["count"] for n in found["names"]) == len(starts)
    assert {meta["names"][o["name"]] for o in found["occurrences"]} == set(ck)
    # A part of a Tensile display name ("MT16x16x256") and of a raw name ("cijk_alik") both find GEMMs.
    code, tensile = get("timeline/find", q="cijk_alik")
    assert code == 200 and tensile["names"] and all(n["name"].startswith("Cijk_Alik") for n in tensile["names"])
    totals = [n["total_us"] for n in tensile["names"]]
    assert totals == sorted(totals, reverse=True)
    # The kernel drawer asks the kernel table for the one row of a key, whatever the name's length.
    key = meta["name_keys"][meta["names"].index(longest)]
    code, table = get("kernels", name_key=key)
    assert code == 200 and [row["name"] for row in table["rows"]] == [longest] and table["rows"][0]["name_key"] == key
    code, none = get("timeline/find", q="no such kernel anywhere")
    assert code == 200 and none["count"] == 0 and none["longest"] is None and none["names"] == []
    for bad in ({}, {"name_key": "XYZ"}, {"q": "x" * 600}):
        code, body = get("timeline/find", **bad)
        assert code == 400 and body["error"], bad


def test_search_names_reads_every_form():
    names = ["volta_sgemm_128x64_nn", "aten::mm", "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdEEEvv"]
    assert tl.search_names(names, "SGEMM") == [0]
    assert tl.search_names(names, "aten::") == [1]
    assert tl.search_names(names, "rmsnorm2d") == [2]
    assert tl.search_names(names, "   ") == []


def test_launch_flows_link_every_kernel_to_its_op(bert, tmp_path):
    """Each GPU event points at the CPU op that launched it (Kineto's ac2g links, resolved by the analysis): the
    source lane is a CPU lane, the launch lies inside the op and before the kernel; the op lists its kernels."""
    trace, index = bert
    gpu = np.flatnonzero(index.act >= 0)
    src = index.flow_src[gpu]
    assert (src >= 0).mean() > 0.9
    linked = gpu[src >= 0]
    ops = index.flow_src[linked]
    assert (index.act[ops] == -1).all()  # the source is a CPU op
    assert (index.flow_ts[linked] >= index.start[ops] - 1e-3).all() and \
        (index.flow_ts[linked] <= index.end[ops] + 1e-3).all() and (index.flow_ts[linked] <= index.start[linked]).all()
    ev = tl.event(index, int(linked[0]))
    assert ev["launched_by"]["index"] == int(ops[0])
    parent = tl.event(index, int(ops[0]))
    assert int(linked[0]) in [k["index"] for k in parent["launched"]]
    view = tl.viewport(index, 0.0, index.duration_us, 2000)
    drawn = [(lane["id"], i) for lane in view["lanes"] for i, s in enumerate(lane["events"].get("src_lane", []))
             if s is not None]
    assert drawn and all(index.lanes[s]["kind"] == "cpu" for lane in view["lanes"]
                         for s in lane["events"].get("src_lane", []) if s is not None)
    logdir = tmp_path / "logdir" / "bert"
    logdir.mkdir(parents=True)
    os.symlink(BERT, logdir / "h100.pt.trace.json.gz")
    get = _serve(tmp_path / "logdir", tmp_path / "cache", run="bert", worker="h100", span="all")
    code, body = get("timeline/event", index=int(ops[0]))
    assert code == 200 and body["launched"] and all("efficiency" in k for k in body["launched"])


def test_find_by_class(tmp_path):
    """"gemm" finds the GEMMs whatever their names say; "nccl" the communication kernels; a class word that is
    also part of names keeps those too."""
    logdir = tmp_path / "logdir" / "bert"
    logdir.mkdir(parents=True)
    os.symlink(BERT, logdir / "h100.pt.trace.json.gz")
    get = _serve(tmp_path / "logdir", tmp_path / "cache", run="bert", worker="h100", span="all")
    code, gemm = get("timeline/find", q="gemm")
    code2, by_name = get("timeline/find", q="cutlass")
    assert code == code2 == 200 and gemm["count"] > 0
    assert {n["name"] for n in by_name["names"] if "gemm" in n["name"].lower()} <= {n["name"] for n in gemm["names"]}
    classes = {flows.CLASS_WORDS["gemm"]}
    assert classes == {"GEMM"}
    code, attn = get("timeline/find", q="attention")
    assert code == 200 and attn["count"] > 0


def _flow_pairs(path, trace, cat):
    """(start op row, end op row) of every flow of category `cat` as the trace file writes them: an `s` and an `f`
    event of one id, each bound to the op of its thread that starts at its time. Read independently of the index."""
    import gzip

    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    at = {}
    for row, e in enumerate(trace.ops["event"].tolist()):
        at.setdefault((str(events[e].get("tid")), float(events[e]["ts"])), row)
    ends = {}
    for e in events:
        if e.get("cat") == cat and e.get("ph") in ("s", "f"):
            ends.setdefault(e["id"], {})[e["ph"]] = at.get((str(e["tid"]), float(e["ts"])))
    return {(p["s"], p["f"]) for p in ends.values() if p.get("s") is not None and p.get("f") is not None}


@pytest.mark.parametrize("name", ["hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                  "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"])
def test_forward_backward_links_are_the_traces_fwdbwd_flows(name):
    """Each forward op links to its backward op exactly as the trace's own `fwdbwd` flow events do (905 on the
    V100 ResNet trace): the same pairs, none more, none fewer."""
    path = corpus_path(name)
    trace = gi.load(path)
    index = tl.build_index(trace, gi.analyze(trace))
    expected = _flow_pairs(path, trace, "fwdbwd")
    assert expected
    peer = flows.fwd_bwd_links(trace.ops, np.arange(len(trace.ops)))
    found = {(i, int(p)) for i, p in enumerate(peer.tolist()) if p >= 0 and trace.ops["fwd_tid"][i] <= 0}
    assert found == expected
    # In the index: both ends know each other, the backward op starts after its forward op, and the viewport
    # carries the other end's lane and start for drawing.
    linked = np.flatnonzero(index.fb_peer >= 0)
    assert len(linked) == 2 * len(expected)
    assert (index.fb_peer[index.fb_peer[linked]] == linked).all()
    fwd = tl.event(index, int(linked[0]))
    side = "backward" if "backward" in fwd else "forward"
    assert fwd[side]["index"] == int(index.fb_peer[linked[0]])
    view = tl.viewport(index, 0.0, index.duration_us, 4000, max_events=100000)
    drawn = [(lane["id"], l, t) for lane in view["lanes"] for l, t in
             zip(lane["events"].get("fb_lane", []), lane["events"].get("fb_ts", [])) if l is not None]
    assert drawn and all(index.lanes[l]["kind"] == "cpu" for _, l, _ in drawn)


def test_a_cpu_ops_details_come_from_the_index(bert, tmp_path):
    """A CPU op's shapes, dtypes, Python stack (the nn.Module calls around it, with_stack) and kernels come from the
    stored index, restored from its section as a request sees it."""
    trace, built = bert
    index = tl.TimelineIndex.from_section(built.to_section())
    names = np.array(index.names, dtype=object)[index.name]
    addmm = [int(i) for i in np.flatnonzero((names == "aten::addmm") & (index.act < 0))]
    assert addmm
    ev = tl.event(index, addmm[0])
    assert ev["inputs"]["dims"] and len(ev["inputs"]["types"]) == len(ev["inputs"]["dims"])
    assert "c10::BFloat16" in ev["inputs"]["types"] or "float" in ev["inputs"]["types"]
    assert ev["stack"] and ev["stack"][0].startswith("Bert")  # outermost module first
    # The stack is the modules whose calls enclose the op on its thread, checked against the trace's table.
    mods, op = trace.modules, trace.ops
    row = int(np.flatnonzero((op["ts"] - index.origin_us >= index.start[addmm[0]] - 1e-3) &
                             (op["ts"] - index.origin_us <= index.start[addmm[0]] + 1e-3))[0])
    around = [(float(mods["ts"][i]), mods.strings["name"][mods["name"][i]]) for i in range(len(mods))
              if mods["ts"][i] <= op["ts"][row] and mods["ts"][i] + mods["dur"][i] >= op["ts"][row] + op["dur"][row]]
    assert [n for _, n in sorted(around)] == ev["stack"]
    assert ev["launched"]
    logdir = tmp_path / "logdir" / "bert"
    logdir.mkdir(parents=True)
    os.symlink(BERT, logdir / "h100.pt.trace.json.gz")
    get = _serve(tmp_path / "logdir", tmp_path / "cache", run="bert", worker="h100", span="all")
    code, body = get("timeline/event", index=addmm[0])
    assert code == 200 and body["inputs"] == ev["inputs"] and body["stack"] == ev["stack"]


def test_no_two_boxes_of_a_lane_overlap():
    """Overlapping events of one lane (here CPU ops deeper than the deepest lane) go to sub-rows: no lane holds
    two overlapping boxes, and every event is still drawn once."""
    from tb_gpuinsight.analysis.timeline import layout

    trace = gi.load(corpus_path("hta/trace_diff__control.json.gz"))
    index = tl.build_index(trace, gi.analyze(trace))
    rows = [lane for lane in index.lanes if lane.get("row")]
    assert rows and all("row" in lane["label"] for lane in rows)
    for lane in index.lanes:
        a, b = int(index.lane_off[lane["id"]]), int(index.lane_off[lane["id"] + 1])
        s, e = index.start[a:b], index.end[a:b]
        assert not (s[1:] < np.maximum.accumulate(e)[:-1] - layout.TOLERANCE_US).any(), lane["label"]
    steps = sum(1 for n in trace.ops.strings["name"] if n.startswith("ProfilerStep#"))
    drawn_ops = int((index.act < 0).sum())
    assert drawn_ops == len(trace.ops) - int(np.isin(trace.ops["name"], [i for i, n in enumerate(
        trace.ops.strings["name"]) if n.startswith("ProfilerStep#")]).sum()) and steps >= 0
    assert list(layout.sub_rows(np.array([0.0, 1.0, 2.0, 5.0]), np.array([3.0, 4.0, 6.0, 7.0]))) == [0, 1, 2, 0]


def test_a_cpu_ops_python_call_stack_comes_from_the_index():
    """A 2021 trace recorded with_stack carries each op's `Call stack` ("file(line): function;..." innermost first):
    the details show its frames outermost first, as the trace wrote them, from the stored index."""
    trace = gi.load(corpus_path("kineto/worker0.1623143089861.pt.trace.json.gz"))
    index = tl.TimelineIndex.from_section(tl.build_index(trace, gi.analyze(trace)).to_section())
    ops = trace.ops
    texts = ops.strings["stack"]
    row = next(i for i in range(len(ops)) if texts[ops["stack"][i]].count(";") >= 2)
    frames = texts[ops["stack"][row]].split(";")
    names = np.array(index.names, dtype=object)[index.name]
    start = ops["ts"][row] - index.origin_us
    at = int(np.flatnonzero((index.act < 0) & (names == ops.strings["name"][ops["name"][row]])
                            & (np.abs(index.start - start) < 1e-3))[0])
    ev = tl.event(index, at)
    assert ev["call_stack"] == frames[::-1] and ev["call_stack"][0].endswith("<module>")
    plain = tl.event(index, int(np.flatnonzero(index.act >= 0)[0]))  # a kernel has no Python stack
    assert "call_stack" not in plain
