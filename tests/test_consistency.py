"""One consistency rule for every view, checked on every route's JSON over real runs (the samples, the 8-rank DLRM
step from the corpus and two 4-rank gloo runs recorded here with one slow rank: one gradient bucket, and small
buckets so that two all-reduces are in flight at every step):

- a share, percentage or efficiency lies in [0, 1], unless the row carries the over-the-roof mark;
- the shares of one list (rows, segments, causes, items) sum to at most 100 % of their total;
- a part is never larger than the whole it belongs to: a rank's or span's split adds up to its step or wall time,
  its waits and idle causes fit inside it; every per-step figure of a rank (the Distributed heatmap's) fits inside
  that step; the time others waited for a rank fits inside their steps;
- a CPU-only run names no GPU idle cause; no display name is a mangled `_Z...` name; an All-ranks device card
  names the ranks it adds up; a graph node outlined as critical is an op of the path.
Each failure names the route, the run and the JSON path.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_gpuinsight.plugin import GpuInsightPlugin
from tb_gpuinsight.service import LogdirService

from .corpus import corpus_path
from .test_plugin import BASE, _wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-6
SLACK_US = 1.0  # rounding of microsecond figures
# A bounded share: the key's last word says it is a fraction of a whole (not a change such as `delta_pct`).
SHARE_KEY = re.compile(r"(?:^|_)(?:share|pct|efficiency|mfu|covered)(?:_[ab])?$|^pct_|_pct_[ab]$")
UNBOUNDED = re.compile(r"delta|change|ratio|speedup")
# Lists whose items' shares split one total; items naming their step (critical-path segments) split that step's.
SHARE_OF_LIST = ("share", "time_share")
TOTAL_NAMED_BY = ("step", "span", "rank")
# A rank's or span's step split: these parts add up to the step (or wall) time, and each fits inside it.
SPLIT = ("compute_us", "comm_exposed_us", "memcpy_us", "idle_us")
IDLE_CAUSES = ("idle_host_bound_us", "idle_launch_bound_us", "idle_sync_us", "idle_data_loading_us",
               "idle_other_us")
INSIDE_STEP = SPLIT + IDLE_CAUSES + ("comm_overlapped_us", "comm_wait_us")
STEP_METRICS = ("dur", "compute", "comm_exposed", "comm_overlapped", "memcpy", "idle", "idle_host_bound",
                "idle_launch_bound", "idle_sync", "idle_data_loading", "idle_other", "comm_wait")


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> Dict[str, Tuple[int, Any]]:
    """Every route's JSON on every run of the logdir: {"run|route": (status, body)}."""
    root = tmp_path_factory.mktemp("consistency")
    logdir = root / "logdir"
    shutil.copytree(os.path.join(ROOT, "samples"), logdir, ignore=shutil.ignore_patterns("*.md", "*.py"))
    try:
        os.symlink(corpus_path("param/dlrm_8ranks"), logdir / "dlrm")
    except pytest.skip.Exception:
        pass  # no corpus here: the samples and the recorded run still walk every route
    pytest.importorskip("torch")
    from .gloo_ddp import record
    record(str(logdir / "gloo_ddp"), world=4, slow_rank=2)
    record(str(logdir / "gloo_ddp_buckets"), world=4, slow_rank=2, bucket_cap_mb=0.001)
    service = LogdirService(str(logdir), cache_dir=str(root / "cache"), workers=0, scan_interval=0.1)
    plugin = GpuInsightPlugin(base_plugin.TBContext(logdir=str(logdir), flags=None), service=service)
    client = Client(application.TensorBoardWSGI([plugin]))

    def get(route: str, **query) -> Tuple[int, Any]:
        response = client.get(f"{BASE}/{route}", query_string=query)
        return response.status_code, json.loads(response.get_data(as_text=True))

    def settled() -> bool:
        runs = get("runs")[1]["runs"]
        return len(runs) >= 6 and all(r["status"] != "loading" for r in runs)
    assert _wait(settled, timeout=240.0), get("runs")[1]
    return dict(_walk(get, get("runs")[1]["runs"]))


def _walk(get, runs) -> Iterator[Tuple[str, Tuple[int, Any]]]:
    for run in runs:
        if run["status"] != "ready":
            continue
        spans = [(w["worker"], s["span"]) for w in run["workers"] for s in w["spans"]]
        selections = [spans[0]] + ([("*", "all")] if len(run["workers"]) > 1 else [])
        for worker, span in selections:
            sel = dict(run=run["run"], worker=worker, span=span)
            name = f"{run['run']}[{worker}]"
            for route in ("overview", "kernels", "roofline", "devices", "memory", "op_shapes", "tensors",
                          "critical_path", "graph/view", "timeline/meta", "ranks", "ranks_heatmap",
                          "ranks_compare"):
                yield f"{name}|{route}", get(route, **sel)
            for metric in STEP_METRICS if worker == "*" else ():
                yield f"{name}|ranks_heatmap:{metric}", get("ranks_heatmap", metric=metric, **sel)
            yield from _dependent_routes(get, name, sel)
        worker, span = spans[-1]
        yield f"{run['run']}|diff", get("diff", a_run=run["run"], a_worker=spans[0][0], a_span=spans[0][1],
                                        b_run=run["run"], b_worker=worker, b_span=span)


def _dependent_routes(get, name: str, sel: dict) -> Iterator[Tuple[str, Tuple[int, Any]]]:
    """Routes that take a value another route gives: a memory device, an op, a time window."""
    status, memory = get("memory", **sel)
    for device in (memory.get("devices") or [])[:1] if status == 200 else []:
        dev = str(device.get("device", device) if isinstance(device, dict) else device)
        for route in ("memory_curve", "memory_allocations", "memory_ops"):
            yield f"{name}|{route}", get(route, device=dev, **sel)
    status, shapes = get("op_shapes", **sel)
    for row in (shapes.get("rows") or [])[:1] if status == 200 else []:
        yield f"{name}|shape_distribution", get("shape_distribution", op=row["op"], **sel)
    status, meta = get("timeline/meta", **sel)
    if status == 200 and meta.get("duration_us"):
        yield f"{name}|timeline/view", get("timeline/view", t0=0, t1=meta["duration_us"], **sel)


def _nodes(x: Any, path: str = "") -> Iterator[Tuple[str, Any]]:
    yield path, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _nodes(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _nodes(v, f"{path}[{i}]")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _over_roof(row: dict) -> bool:
    mark = row.get("over_roof")
    return bool(mark) or _number(row.get("over_roof_share")) and row["over_roof_share"] > 0


def _bounded_share_problems(body: Any) -> List[str]:
    out = []
    for path, node in _nodes(body):
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if not _number(value) or not SHARE_KEY.search(key) or UNBOUNDED.search(key):
                continue
            if value < -EPS or (value > 1 + EPS and not _over_roof(node)):
                out.append(f"{path}.{key} = {value:.4g}: a share outside [0, 1] without the over-the-roof mark")
    return out


def _list_share_problems(body: Any) -> List[str]:
    out = []
    for path, node in _nodes(body):
        if isinstance(node, list) and node and all(isinstance(x, dict) for x in node):
            for key in SHARE_OF_LIST:
                totals: Dict[tuple, float] = {}
                for x in node:
                    if _number(x.get(key)):
                        total = tuple(str(x.get(k)) for k in TOTAL_NAMED_BY)
                        totals[total] = totals.get(total, 0.0) + x[key]
                out += [f"{path}[].{key} of {total} sums to {v:.4g} (> 100 % of one total)"
                        for total, v in totals.items() if v > 1 + 1e-4]
        if isinstance(node, dict) and isinstance(node.get("causes"), dict):
            shares = [c["share"] for c in node["causes"].values() if isinstance(c, dict) and _number(c.get("share"))]
            if sum(shares) > 1 + 1e-4:
                out.append(f"{path}.causes shares sum to {sum(shares):.4g}")
    return out


def _part_whole_problems(body: Any) -> List[str]:
    out = []
    for path, node in _nodes(body):
        if not isinstance(node, dict):
            continue
        whole_key = "step_us" if _number(node.get("step_us")) else "wall_us" if _number(node.get("wall_us")) else None
        if whole_key is None:
            continue
        whole_per = whole = node[whole_key]
        for key in INSIDE_STEP:
            if _number(node.get(key)) and node[key] > whole_per + SLACK_US:
                out.append(f"{path}.{key} = {node[key]:.1f} us is larger than its {whole_key} {whole_per:.1f} us")
        if all(_number(node.get(k)) for k in SPLIT):
            parts = sum(node[k] for k in SPLIT)
            if not math.isclose(parts, whole_per, rel_tol=1e-3, abs_tol=len(SPLIT) * SLACK_US):
                out.append(f"{path}: {' + '.join(SPLIT)} = {parts:.1f} us, not its {whole_key} {whole_per:.1f} us")
        if all(_number(node.get(k)) for k in IDLE_CAUSES + ("idle_us",)):
            causes = sum(node[k] for k in IDLE_CAUSES)
            if not math.isclose(causes, node["idle_us"], rel_tol=1e-3, abs_tol=len(IDLE_CAUSES) * SLACK_US):
                out.append(f"{path}: idle causes sum to {causes:.1f} us, not its idle_us {node['idle_us']:.1f} us")
        breakdown = node.get("breakdown_us")
        if isinstance(breakdown, dict) and whole_key == "wall_us" and breakdown:
            parts = sum(v for v in breakdown.values() if _number(v))
            if parts > whole + len(breakdown) * SLACK_US:
                out.append(f"{path}.breakdown_us sums to {parts:.1f} us, more than its wall_us {whole:.1f} us")
    return out


def _others_waited_problems(body: Any) -> List[str]:
    """The time others waited for a rank fits inside the other ranks' steps (mean step x steps, summed)."""
    out = []
    for path, node in _nodes(body):
        if not (isinstance(node, list) and node and all(isinstance(x, dict) for x in node)):
            continue
        rows = [x for x in node if _number(x.get("others_waited_us")) and _number(x.get("step_us"))
                and _number(x.get("steps"))]
        for row in rows:
            room = sum(x["step_us"] * x["steps"] for x in rows if x is not row)
            if row["others_waited_us"] > room + SLACK_US * len(rows):
                out.append(f"{path}[rank {row.get('rank')}].others_waited_us = {row['others_waited_us']:.1f} us, "
                           f"more than the other ranks' steps last ({room:.1f} us)")
    return out


GPU_IDLE = ("data_loading", "sync", "launch_bound", "host_bound", "idle_other")


def _cpu_run_problems(body: Any) -> List[str]:
    """A run with CPU categories (no GPU activity) names no GPU idle cause, in its categories or its steps."""
    cats = body.get("categories") if isinstance(body, dict) else None
    if not (isinstance(cats, list) and any(isinstance(c, dict) and c.get("key") == "cpu_ops" for c in cats)):
        return []
    out = [f"categories: {c['key']}" for c in cats if isinstance(c, dict) and c.get("key") in GPU_IDLE]
    for i, step in enumerate(body.get("steps") or []):
        out += [f"steps[{i}].{k}_us = {step[f'{k}_us']}" for k in GPU_IDLE if (step.get(f"{k}_us") or 0) > 0]
    return out


def _readable_name_problems(body: Any) -> List[str]:
    """No display name (a table's, a critical-path segment's, a recommendation link's label) is a mangled
    Itanium name: every `_Z...` name is demangled, or shown by its qualified name, before display."""
    out = []
    for path, node in _nodes(body):
        if not isinstance(node, dict):
            continue
        for key in ("display_name", "label"):
            value = node.get(key)
            if isinstance(value, str) and value.startswith("_Z"):
                out.append(f"{path}.{key} = {value[:60]}")
    return out


def _card_rank_problems(body: Any) -> List[str]:
    """An All-ranks device answer names, for every card's GPU, the ranks the card adds up."""
    if not isinstance(body, dict) or not body.get("device_ranks"):
        return []
    ranks = body["device_ranks"]
    return [f"devices[{d.get('id')}]: no ranks named" for d in body.get("devices") or []
            if d.get("summary") and not ranks.get(str(d.get("id")))]


def _critical_node_problems(body: Any) -> List[str]:
    """A graph node outlined as critical is itself an op of the path (it holds at least that one op)."""
    nodes = body.get("nodes") if isinstance(body, dict) else None
    return [f"nodes[{i}] ({node.get('label')}): critical without a path op" for i, node in enumerate(nodes or [])
            if isinstance(node, dict) and node.get("critical") is True and not node.get("critical_ops")]


RULES = {"bounded shares": _bounded_share_problems, "shares of one list": _list_share_problems,
         "parts within their whole": _part_whole_problems, "CPU runs described as CPU": _cpu_run_problems,
         "readable names": _readable_name_problems, "cards name their ranks": _card_rank_problems,
         "critical nodes are path ops": _critical_node_problems}


def test_every_route_answered(answers):
    bad = {k: body for k, (status, body) in answers.items() if status >= 500}
    assert not bad, bad
    assert sum(status == 200 for status, _ in answers.values()) >= 60
    split = [name for name, (status, body) in answers.items() if status == 200 and name.startswith("gloo_ddp")
             for _, node in _nodes(body) if isinstance(node, dict) and all(_number(node.get(k)) for k in SPLIT)]
    assert len(split) >= 4, "the rules never saw a rank's step split"  # the 4 recorded ranks at least


@pytest.mark.parametrize("rule", RULES)
def test_every_route_is_consistent(answers, rule):
    problems = [f"{name}: {p}" for name, (status, body) in answers.items() if status == 200
                for p in RULES[rule](body)]
    assert not problems, "\n".join(problems[:40])


@pytest.mark.parametrize("rule", RULES)
def test_the_rule_catches_a_contradiction(rule):
    """Each rule fails on the contradiction it exists for."""
    broken = {"bounded shares": {"rows": [{"time_share": 1.3}]},
              "shares of one list": {"rows": [{"time_share": 0.7}, {"time_share": 0.6}]},
              "parts within their whole": {"ranks": [{"step_us": 754.0, "steps": 3, "comm_wait_us": 1378.0}]},
              "others waited within their steps": {"ranks": [
                  {"rank": 0, "step_us": 225.0, "steps": 3, "others_waited_us": 0.0},
                  {"rank": 1, "step_us": 229.0, "steps": 3, "others_waited_us": 3492.9}]},
              "CPU runs described as CPU": {"categories": [{"key": "cpu_ops"}, {"key": "cpu_idle"}],
                                            "steps": [{"cpu_ops_us": 5.0, "host_bound_us": 203.7}]},
              "readable names": {"rows": [{"name": "_ZN7sgl_hip3fooEv", "display_name": "_ZN7sgl_hip3fooEv"}]},
              "cards name their ranks": {"devices": [{"id": 0, "summary": {"kernel_time_us": 6830.0}}],
                                         "device_ranks": {"1": [1]}},
              "critical nodes are path ops": {"nodes": [{"id": 3, "critical": True, "critical_ops": 0}]}}
    assert RULES[rule](broken[rule])
    assert not _bounded_share_problems({"rows": [{"pct_peak": 1.3, "over_roof": True}]})


def _heatmaps(answers) -> Dict[str, Dict[str, Any]]:
    """Per run selection: {metric: heatmap body} of the Distributed tab's per-step figures."""
    out: Dict[str, Dict[str, Any]] = {}
    for key, (status, body) in answers.items():
        name, _, route = key.partition("|")
        if status == 200 and route.startswith("ranks_heatmap:"):
            out.setdefault(name, {})[route.split(":", 1)[1]] = body
    return out


def _step_problems(name: str, maps: Dict[str, Any]) -> List[str]:
    out = []
    whole = maps["dur"]
    for metric, body in maps.items():
        for rank, row, dur in zip(body["ranks"], body["values"], whole["values"]):
            for step, v, d in zip(body["steps"], row, dur):
                if metric != "dur" and _number(v) and _number(d) and v > d + SLACK_US:
                    out.append(f"{name}: rank {rank} step {step}: {metric} {v:.1f} us > its step {d:.1f} us")
    return out


def test_no_per_step_figure_exceeds_its_step(answers):
    maps = _heatmaps(answers)
    assert any(n.startswith("gloo_ddp_buckets") for n in maps) and all(set(m) == set(STEP_METRICS)
                                                                       for m in maps.values())
    problems = [p for name, m in maps.items() for p in _step_problems(name, m)]
    assert not problems, "\n".join(problems[:40])
    assert _step_problems("broken", {"dur": {"ranks": [0], "steps": [1], "values": [[225.0]]},
                                     "comm_wait": {"ranks": [0], "steps": [1], "values": [[382.0]]}})


def test_the_multi_bucket_run_has_all_reduces_in_flight_together(answers):
    """The recording the wait rules are meant for: at some step, a rank's two all-reduces overlap in time."""
    status, body = answers["gloo_ddp_buckets[*]|ranks"]
    assert status == 200
    spans: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
    for inst in body["instances"]:
        if inst["kind"] == "all_reduce" and inst["step"] >= 0:
            end = inst["ts"] + max(inst["dur_us"].values())
            spans.setdefault((inst["pg"], inst["step"]), []).append((inst["ts"], end))
    overlapping = [k for k, v in spans.items() if len(v) >= 2 and sorted(v)[1][0] < sorted(v)[0][1]]
    assert overlapping, spans
