"""Estimates without torch: the shipped op-schema table answers what torch's dispatcher would, torch is asked only
where the table may be out of date, and the GEMM and convolution closed forms count what torch.utils.flop_counter
counts. A fresh process analysing real traces with shapes never imports torch."""
from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys

import pytest

from tb_gpuinsight.estimate import schemas
from tb_gpuinsight.estimate.flops import estimate_op
from tb_gpuinsight.estimate.lazy_torch import installed_torch_version

from .corpus import corpus_path

F32 = "float"


def _other_release() -> str:
    """Why the installed torch cannot be held to the shipped table ("" when it is the table's release)."""
    written, installed = schemas.table()["torch"], installed_torch_version()
    if str(written).split("+")[0] == installed.split("+")[0]:
        return ""
    return (f"the op-schema table was written from torch {written}, torch {installed} is installed: "
            "run python -m tb_gpuinsight.estimate.schemas after changing torch's pin")


def test_shipped_table_is_what_the_installed_torch_says():
    pytest.importorskip("torch")
    if _other_release():
        pytest.skip(_other_release())
    # built in a fresh process, as the command that writes it does: ops other tests register must not count
    out = subprocess.run([sys.executable, "-c", "import json; from tb_gpuinsight.estimate.schemas import build_table;"
                          " print(json.dumps(build_table()))"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == schemas.table()


def test_shipped_table_entries_from_first_principles():
    """Whatever torch is installed: mul(self, other, *, out) takes 3 and writes its 3rd. addmm.dtype_out takes 7 and
    writes its 7th; at 6 arguments addmm.out and addmm.dtype (no out=) disagree, so no position is taken."""
    shipped = schemas.table()
    assert shipped["aten"]["mul"] == [3, {"3": [2]}]
    assert shipped["aten"]["addmm"] == [7, {"7": [6]}]
    assert shipped["mutated"]["_c10d_functional::all_reduce_"] == [0]


ANALYSE = r"""
import contextlib, io, json, os, sys
from tb_gpuinsight.estimate import schemas
asked = []
if sys.argv[2] == "other":  # as under a torch release other than the table's: record what torch is asked
    schemas.table_is_installed_torch = lambda: False
    for name in ("torch_arg_limit", "torch_out_positions", "torch_mutated"):
        ask = getattr(schemas, name)
        setattr(schemas, name, lambda *a, ask=ask, name=name: (asked.append([name, *a]), ask(*a))[1])
from tb_gpuinsight.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["analyze", "--format", "csv", "--top", "0", sys.argv[1]])
print(json.dumps({"torch": "torch" in sys.modules, "code": code, "formulas": out.getvalue().count("formula"),
                  "asked": asked}))
"""

TRACES_WITH_SHAPES = ["kineto/worker0.1623143089861.pt.trace.json.gz",  # 2021 V100 ResNet: conv, mm
                      "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"]  # 2025 H100


def _first_analysis(tmp_path, trace: str, release: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}  # an empty memo: every estimate is computed
    env.pop("TB_GPUINSIGHT_NO_MEMO", None)
    out = subprocess.run([sys.executable, "-c", ANALYSE, str(corpus_path(trace)), release], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["code"] == 0 and got["formulas"] > 0, got
    return got


@pytest.mark.parametrize("trace", TRACES_WITH_SHAPES)
def test_a_first_analysis_of_traces_with_shapes_imports_no_torch(tmp_path, trace):
    pytest.importorskip("torch")  # installed, so importing it would be possible
    if _other_release():  # then torch is asked what the table may not know: the test below holds that
        pytest.skip(_other_release())
    assert _first_analysis(tmp_path, trace, "same")["torch"] is False


@pytest.mark.parametrize("trace", TRACES_WITH_SHAPES)
def test_under_another_torch_a_first_analysis_asks_only_what_the_table_lacks(tmp_path, trace):
    """Under any torch release but the table's (simulated, so this runs under every torch), the analysis still
    rates, and on these traces torch is asked only about aten ops the table lacks (2021's
    cudnn_convolution_backward_input, since removed from torch): records within the table's schemas never ask."""
    got = _first_analysis(tmp_path, trace, "other")
    aten = schemas.table()["aten"]
    assert [a for a in got["asked"] if a[0] == "torch_mutated" or a[1] in aten] == [], got["asked"]
    assert got["torch"] is (bool(got["asked"]) and importlib.util.find_spec("torch") is not None)  # asked if it can


# --------------------------------------------------------------------------- when torch is asked

class _Spy:
    def __init__(self, monkeypatch, installed_is_table: bool):
        self.asked = []
        schemas.arg_limit.cache_clear()
        schemas.out_positions.cache_clear()
        schemas.mutated.cache_clear()
        monkeypatch.setattr(schemas, "table_is_installed_torch", lambda: installed_is_table)
        monkeypatch.delitem(sys.modules, "torch", raising=False)  # as in a fresh process (restored after)
        for name in ("torch_arg_limit", "torch_out_positions", "torch_mutated"):
            monkeypatch.setattr(schemas, name, self._recorder(name))

    def _recorder(self, name):
        def ask(*args):
            self.asked.append((name,) + args)
            return {"torch_arg_limit": 9, "torch_out_positions": frozenset({8}), "torch_mutated": frozenset({1})}[name]
        return ask


@pytest.fixture
def clear_caches():
    yield
    schemas.arg_limit.cache_clear()
    schemas.out_positions.cache_clear()
    schemas.mutated.cache_clear()


def test_the_table_is_the_whole_answer_under_its_own_torch(monkeypatch, clear_caches):
    spy = _Spy(monkeypatch, installed_is_table=True)
    assert schemas.arg_limit("mul", 3) == 3 and schemas.arg_limit("mul", 7) == 3  # 7 > 3: corrupted, table says so
    assert schemas.out_positions("mul", 3) == {2} and schemas.out_positions("mul", 2) == frozenset()
    assert schemas.arg_limit("cudnn_convolution_backward_input", 9) is None  # removed from torch: unknown
    assert schemas.mutated("vllm::reshape_and_cache") is None  # a library torch knows only once it is imported
    assert schemas.mutated("_c10d_functional::all_reduce_") == {0}
    assert spy.asked == []


def test_another_torch_is_asked_only_what_the_table_may_not_know(monkeypatch, clear_caches):
    spy = _Spy(monkeypatch, installed_is_table=False)
    assert schemas.arg_limit("mul", 3) == 3 and schemas.out_positions("mul", 3) == {2}  # within the table: no ask
    assert spy.asked == []
    assert schemas.arg_limit("mul", 7) == 9  # longer than the table's schema: torch may have added an argument
    assert schemas.arg_limit("an_op_added_later", 2) == 9
    assert schemas.out_positions("an_op_added_later", 2) == {8}
    assert schemas.mutated("c10d::an_op_added_later") == {1}  # a namespace torch registers
    assert schemas.mutated("vllm::reshape_and_cache") is None  # one it does not
    assert [a[0] for a in spy.asked] == ["torch_arg_limit", "torch_arg_limit", "torch_out_positions",
                                         "torch_mutated"]


def test_an_unreadable_table_leaves_every_answer_to_torch(monkeypatch, tmp_path, clear_caches):
    bad = tmp_path / "op_schemas.json"
    bad.write_text('{"aten": [1, 2]')
    monkeypatch.setattr(schemas, "TABLE_PATH", str(bad))
    schemas.table.cache_clear()
    try:
        assert schemas.table()["aten"] == {}
        spy = _Spy(monkeypatch, installed_is_table=False)
        assert schemas.arg_limit("mul", 3) == 9 and spy.asked == [("torch_arg_limit", "mul")]
    finally:
        schemas.table.cache_clear()


# --------------------------------------------------------------------------- closed forms against torch's

SIZES = (1, 3, 17, 64)


def test_gemm_closed_forms_count_what_torch_counts():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import flop_registry as reg

    aten = torch.ops.aten
    for m, k, n, b in itertools.product(SIZES, SIZES, SIZES, (1, 5)):
        a, w, ab, wb = (m, k), (k, n), (b, m, k), (b, k, n)
        cases = [("aten::mm", (a, w), reg[aten.mm](a, w)),
                 ("aten::addmm", ((m, n), a, w, (), ()), reg[aten.addmm]((m, n), a, w)),
                 ("aten::bmm", (ab, wb), reg[aten.bmm](ab, wb)),
                 ("aten::baddbmm", ((b, m, n), ab, wb, (), ()), reg[aten.baddbmm]((b, m, n), ab, wb)),
                 ("aten::_scaled_mm", (a, w, (), (), (), (), (), ()), reg[aten._scaled_mm](a, w, (), ()))]
        for name, dims, expected in cases:
            types = tuple(F32 if d else "Scalar" for d in dims)
            got = estimate_op(name, dims, types, tuple("" for _ in dims)).flops
            assert got == expected == 2 * m * n * k * (b if "bmm" in name else 1), (name, dims)


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_closed_form_counts_what_torch_counts(transposed):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import flop_registry as reg

    from tb_gpuinsight.estimate.conv import conv_flops

    for n, c_in, c_out, groups, size, kernel in itertools.product((1, 4), (4, 8), (8,), (1, 4), (7, 16), (1, 3)):
        x = (n, c_in, size, size)
        w = (c_in, c_out // groups, kernel, kernel) if transposed else (c_out, c_in // groups, kernel, kernel)
        out = (n, c_out if not transposed else c_out, size - kernel + 1, size - kernel + 1)
        expected = reg[torch.ops.aten.convolution](x, w, None, None, None, None, transposed, out_val=out)
        assert conv_flops(x, w, out, transposed) == expected
    # first principles: a 3x3 conv of 2 -> 4 channels on a 5x5 map (3x3 out, no padding), batch 1: each of the
    # 4 x 9 outputs sums 2 x 9 products, one multiply and one add each
    assert conv_flops((1, 2, 5, 5), (4, 2, 3, 3), (1, 4, 3, 3), False) == 4 * 9 * (2 * 9) * 2
