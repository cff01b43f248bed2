"""ET shapes by call stack (analysis/et_stack.py) with the Python code that ran each op in the key: two Linear
layers whose ops nest alike (an aten::addmm under an aten::linear, each at top level) cannot be told apart by op
nesting, so an iteration the ET did not cover stays without shapes; the "Call stack" frames (2021-22 traces) or the
nn.Module calls around the ops (python_function events of later traces) tell them apart."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tb_gpuinsight.analysis.et_stack import fill_by_call_stack, python_stacks
from tb_gpuinsight.loading import load

LAYERS = [((64, 512), (512, 256)), ((64, 256), (256, 128))]  # the two layers' addmm inputs (x, w), bias first


def _trace(tmp_path, python: str):
    """Two iterations of two Linear layers; the first iteration's ops have shapes (as the ET gave them), the
    second's none. `python`: "frames" (a Call stack arg per op), "modules" (nn.Module python_function events) or
    "none"."""
    events, ts = [], 0.0
    for iteration in range(2):
        for layer, (x, w) in enumerate(LAYERS):
            dims = [[w[1]], list(x), list(w)] if iteration == 0 else None
            frames = f"model.py({10 + layer}): forward;train.py(40): step"
            if python == "modules":
                events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: Linear_{layer}", "pid": 1,
                               "tid": 1, "ts": ts, "dur": 40})
            for name, start, dur in (("aten::linear", ts + 1, 30), ("aten::addmm", ts + 2, 20)):
                args = {"External id": len(events) + 1}
                if dims is not None:
                    args.update({"Input Dims": dims if name == "aten::addmm" else [list(x), list(w), [w[1]]],
                                 "Input type": ["float"] * 3})
                if python == "frames":
                    args["Call stack"] = frames
                events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": start,
                               "dur": dur, "args": args})
            ts += 100
    path = tmp_path / f"{python}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    trace = load(path)
    trace.ops.columns["shape_source"] = np.zeros(len(trace.ops), dtype=np.int32)
    return trace


def _second_iteration_dims(trace):
    ops = trace.ops
    late = np.flatnonzero(ops["ts"] >= 200)
    names = [ops.decode("name", int(ops["name"][r])) for r in late]
    return [(n, trace.shape(int(ops["shape"][r]))[0] if ops["shape"][r] >= 0 else None) for n, r in zip(names, late)]


@pytest.mark.parametrize("python", ["frames", "modules"])
def test_the_python_stack_tells_alike_nested_layers_apart(tmp_path, python):
    trace = _trace(tmp_path, python)
    sized = trace.ops["shape"] >= 0
    stacks = python_stacks(trace)
    assert (stacks >= 0).all() and len(set(stacks[trace.ops["ts"] < 200].tolist())) == 2
    filled, by_python = fill_by_call_stack(trace.ops, sized, 1, lambda: stacks)
    assert filled == by_python == 4
    addmm = [dims for name, dims in _second_iteration_dims(trace) if name == "aten::addmm"]
    assert addmm == [[[w[1]], list(x), list(w)] for x, w in LAYERS]  # each layer its own shapes


def test_without_a_python_stack_alike_nested_ops_stay_without_shapes(tmp_path):
    trace = _trace(tmp_path, "none")
    sized = trace.ops["shape"] >= 0
    stacks = python_stacks(trace)
    assert (stacks < 0).all()
    assert fill_by_call_stack(trace.ops, sized, 1, lambda: stacks) == (0, 0)  # two shapes for one nesting: ambiguous
    assert all(dims is None for _, dims in _second_iteration_dims(trace))
