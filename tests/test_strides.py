"""Broadcast views (stride-0 inputs from ``expand``) are charged the storage they read, not their logical numel.

Kineto records ``Input Strides`` per op (torch >= 2.1 with record_shapes); the reader keeps them only where some
input has a 0 stride on a dim of size > 1, folds them into the op's shape signature (trace/strides.py), and the byte
rules count such an input by its distinct elements (estimate/args.py ``stored_numel``). Expected figures here are
derived from first principles (the tensors' storage and the op's semantics), never from the estimator.
"""
from __future__ import annotations

import json

import pytest

import tb_gpuinsight
from tb_gpuinsight.estimate.args import OpArgs, ViewShape, stored_numel
from tb_gpuinsight.estimate.bytes import estimate_bytes
from tb_gpuinsight.estimate.flops import estimate_op, freeze
from tb_gpuinsight.estimate.memo import EstimateMemo
from tb_gpuinsight.estimate.movement import ASSUMED_LIST_DTYPE
from tb_gpuinsight.trace.strides import STRIDES_KEY, broadcast_view, fold_strides, folded_strides

F32, I64 = 4, 8
GATHER = ("aten::gather", [[64, 128], [], [64, 32], [], [64, 32]], ["float", "Scalar", "long int", "Scalar", "float"],
          ["", "1", "", "False", ""])
GATHER_STRIDES = [[128, 1], [], [0, 1], [], [32, 1]]  # index = idx[1, 32].expand(64, 32); out= given


def _gather_first_principles(index_stored: int) -> int:
    """gather(x, 1, index, out=o): the index read (its storage), x read and o written at 64*32 positions."""
    return index_stored * I64 + 2 * 64 * 32 * F32


# ------------------------------------------------------------------------------------------ the fold

def test_fold_keeps_strides_only_for_broadcast_views():
    _, dims, _, concrete = GATHER
    folded = fold_strides(dims, concrete, GATHER_STRIDES)
    assert folded == concrete + [[STRIDES_KEY, GATHER_STRIDES]]
    assert folded_strides(folded) == GATHER_STRIDES and folded_strides(freeze(folded)) == freeze(GATHER_STRIDES)
    transposed = [[1, 64], [], [1, 64], [], [32, 1]]  # non-contiguous but every element distinct: nothing kept
    assert fold_strides(dims, concrete, transposed) is concrete
    size_one = [[128, 1], [], [32, 0], [], [32, 1]]  # a 0 stride on a size-1 dim repeats nothing
    assert fold_strides([[64, 128], [], [64, 1], [], [64, 1]], concrete, size_one) is concrete
    assert fold_strides(dims, None, GATHER_STRIDES) == [""] * 5 + [[STRIDES_KEY, GATHER_STRIDES]]
    assert broadcast_view([8, 768], [0, 1]) and not broadcast_view([8, 768], [768, 1])


@pytest.mark.parametrize("strides", [7, "x", [None], [[0, "a"]], [[0]], {"a": 1}, [[0, 1, 2]]])
def test_malformed_strides_change_nothing(strides):
    name, dims, types, concrete = GATHER
    folded = fold_strides(dims, concrete, strides)
    args = OpArgs(dims, types, folded)
    assert [stored_numel(s) for _, s, _ in args.tensor_items()] == [64 * 128, 64 * 32, 64 * 32]
    assert estimate_bytes(name, dims, types, folded)[0] == _gather_first_principles(64 * 32)


def test_op_args_strip_the_strides_from_concrete_inputs():
    name, dims, types, concrete = GATHER
    args = OpArgs(dims, types, fold_strides(dims, concrete, GATHER_STRIDES))
    assert args.concrete == tuple(concrete) and args.opt_value(1) == 1
    index = dict((i, s) for i, s, _ in args.tensor_items())[2]
    assert isinstance(index, ViewShape) and index == (64, 32) and stored_numel(index) == 32


# ------------------------------------------------------------------------------------------ byte rules

def test_gather_out_with_an_expanded_index():
    name, dims, types, concrete = GATHER
    plain, _ = estimate_bytes(name, dims, types, concrete)
    expanded, reason = estimate_bytes(name, dims, types, fold_strides(dims, concrete, GATHER_STRIDES))
    assert plain == _gather_first_principles(64 * 32)
    assert (expanded, reason) == (_gather_first_principles(32), "")


@pytest.mark.parametrize("name,dims,types,concrete,strides,expected", [
    # a + b.expand(64, 128): a and b's 128 stored elements read, 64x128 written
    ("aten::add", [[64, 128], [64, 128], []], ["float", "float", "Scalar"], ["", "", "1"],
     [[128, 1], [0, 1], []], (64 * 128 + 128 + 64 * 128) * F32),
    # index_select(x, 0, idx) with idx one stored index broadcast 2048 times
    ("aten::index_select", [[64, 128], [], [2048]], ["float", "Scalar", "long int"], ["", "0", ""],
     [[128, 1], [], [0]], 1 * I64 + 2 * 2048 * 128 * F32),
    # take(x, idx.expand(16, 8)): 8 stored indices, 128 elements read and written
    ("aten::take", [[64, 128], [16, 8]], ["float", "long int"], ["", ""], [[128, 1], [0, 1]],
     8 * I64 + 2 * 128 * F32),
    # embedding(w, idx.expand(64, 32)): 32 stored indices, 2048 rows of 128 looked up
    ("aten::embedding", [[64, 128], [64, 32], [], [], []], ["float", "long int", "Scalar", "Scalar", "Scalar"],
     ["", "", "-1", "False", "False"], [[128, 1], [0, 1], [], [], []], 32 * I64 + 2 * 2048 * 128 * F32),
    # scatter_(dest, 1, idx.expand(64, 32), src.expand(64, 32)): 32 + 32 stored, 2048 written
    ("aten::scatter_", [[64, 128], [], [64, 32], [64, 32]], ["float", "Scalar", "long int", "float"],
     ["", "1", "", ""], [[128, 1], [], [0, 1], [0, 1]], 32 * I64 + 32 * F32 + 2048 * F32),
    # copy_(dst, src.expand(8, 768)): 768 stored read, 8x768 written
    ("aten::copy_", [[8, 768], [8, 768], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"], ["", "", "False"],
     [[768, 1], [0, 1], []], (768 + 8 * 768) * 2),
    # cat([b.expand(64, 128), x]): 128 + 8192 read, 16384 written
    ("aten::cat", [[[64, 128], [64, 128]], []], ["TensorList", "Scalar"], ["", "0"], [[[0, 1], [128, 1]], []],
     (128 + 64 * 128 + 2 * 64 * 128) * F32),
    # index_put_(x, [idx], ones(128).expand(16, 128)) with the index list unrecorded: 128 values read, 16 rows written
    ("aten::index_put_", [[64, 128], [], [16, 128], []], ["float", "", "float", "Scalar"], ["", "", "", "False"],
     [[128, 1], [], [0, 1], []], 128 * F32 + 16 * 128 * F32),
    # sum(b.expand(64, 128)): 128 stored elements read
    ("aten::sum", [[64, 128], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[1]", "False", ""],
     [[0, 1], [], [], []], 128 * F32),
])
def test_byte_rules_read_the_storage_of_broadcast_inputs(name, dims, types, concrete, strides, expected):
    nbytes, reason = estimate_bytes(name, dims, types, fold_strides(dims, concrete, strides))
    assert nbytes == expected
    assert reason == ("" if name != "aten::cat" else ASSUMED_LIST_DTYPE)  # a TensorList's dtype is not recorded


def test_strides_key_the_memo(tmp_path):
    """The folded strides are part of the signature: the plain and the expanded gather keep separate figures."""
    name, dims, types, concrete = GATHER
    plain = (name, freeze(dims), freeze(types), freeze(concrete))
    expanded = (name, freeze(dims), freeze(types), freeze(fold_strides(dims, concrete, GATHER_STRIDES)))
    memo = EstimateMemo(str(tmp_path / "memo.sqlite"))
    assert memo.key(plain) != memo.key(expanded)
    memo.put_many({s: estimate_op(*s) for s in (plain, expanded)})
    again = EstimateMemo(str(tmp_path / "memo.sqlite")).get_many([plain, expanded])
    assert again[plain].bytes == _gather_first_principles(64 * 32)
    assert again[expanded].bytes == _gather_first_principles(32)


# ------------------------------------------------------------------------------------------ hand-built trace

def _event(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _gather_trace(strides: list) -> dict:
    name, dims, types, concrete = GATHER
    op = _event("cpu_op", name, 10, 20, **{"External id": 1, "Input Dims": dims, "Input type": types,
                                           "Concrete Inputs": concrete, "Input Strides": strides})
    launch = _event("cuda_runtime", "cudaLaunchKernel", 12, 4, correlation=5, **{"External id": 1})
    kernel = _event("kernel", "void at::native::_scatter_gather_elementwise_kernel<128, 8>", 40, 3, pid=0, tid=7,
                    device=0, stream=7, correlation=5, **{"External id": 1})
    return {"traceEvents": [op, launch, kernel], "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}


@pytest.mark.parametrize("strides,index_stored", [(GATHER_STRIDES, 32), ([[128, 1], [], [32, 1], [], [32, 1]], 2048)])
def test_hand_built_trace_rates_the_gather_on_its_storage(tmp_path, strides, index_stored):
    path = tmp_path / "worker0.1.pt.trace.json"
    path.write_text(json.dumps(_gather_trace(strides)))
    trace = tb_gpuinsight.load(path)
    code = int(trace.ops["shape"][0])
    assert len(trace.shapes[code]) == (4 if index_stored == 32 else 3)  # contiguous strides are not kept
    eff = tb_gpuinsight.analyze(trace)
    assert eff.op_estimates[0].bytes == _gather_first_principles(index_stored)
    kernels = eff.activities
    assert float(kernels["bytes"][0]) == _gather_first_principles(index_stored)


# ------------------------------------------------------------------------------------------ recorded by torch

def test_recorded_broadcast_ops_are_charged_their_storage(tmp_path):
    """torch's own CPU profiler records the strides; the expected bytes come from the tensors themselves."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x, b = torch.randn(64, 128), torch.randn(1, 128)
    idx, out = torch.randint(0, 128, (1, 32)), torch.empty(64, 32)
    index = idx.expand(64, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.gather(x, 1, index, out=out)
        y = x + b.expand(64, 128)
    path = tmp_path / "worker0.1.pt.trace.json"
    prof.export_chrome_trace(str(path))
    ops = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    if not any("Input Strides" in e["args"] for e in ops):
        pytest.skip("this torch records no Input Strides")
    trace = tb_gpuinsight.load(path)
    names = trace.ops.values("name")
    got = {}
    for row, code in enumerate(trace.ops["shape"].tolist()):
        if names[row] in ("aten::gather", "aten::add") and code >= 0:
            got[names[row]] = estimate_op(names[row], *(freeze(v) for v in trace.shape(code))).bytes
    index_read = index.untyped_storage().nbytes()  # 32 indices: the expand shares idx's storage
    assert index_read == 32 * I64
    assert got["aten::gather"] == index_read + x.element_size() * out.numel() + out.numel() * out.element_size()
    assert got["aten::add"] == (x.numel() + b.numel() + y.numel()) * F32


def test_execution_trace_strides_fill_a_shapeless_kineto_op(tmp_path):
    """A Kineto trace recorded without shapes takes them from its Execution Trace (schema 1.1.1 records strides):
    the expanded index still counts its storage."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    x, idx, out = torch.randn(64, 128), torch.randint(0, 128, (1, 32)), torch.empty(64, 32)
    et_path, kineto_path = tmp_path / "worker0.1.et.json", tmp_path / "worker0.1.pt.trace.json"
    observer = ExecutionTraceObserver().register_callback(str(et_path))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False, execution_trace_observer=observer) as prof:
        torch.gather(x, 1, idx.expand(64, 32), out=out)
    prof.export_chrome_trace(str(kineto_path))
    if '"strides"' not in et_path.read_text():
        pytest.skip("this torch writes no strides into its Execution Trace")
    trace = tb_gpuinsight.load(kineto_path)
    tb_gpuinsight.analyze(trace, execution_traces=[str(et_path)])
    names = trace.ops.values("name")
    rows = [r for r, name in enumerate(names) if name == "aten::gather"]
    assert rows and trace.enrichment.et_shapes >= 1
    shape = trace.shape(int(trace.ops["shape"][rows[0]]))
    assert estimate_op("aten::gather", *(freeze(v) for v in shape)).bytes == _gather_first_principles(32)
