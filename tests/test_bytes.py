"""Bytes model (estimate/bytes.py) golden tests: every expected figure is computed here by hand from the shapes.

BF16 = 2 bytes, FP32 = 4, int64 = 8. Shapes of the trace-like records are those real traces record for the op.
"""
from __future__ import annotations

import pytest

from tb_gpuinsight.estimate.bytes import estimate_bytes
from tb_gpuinsight.estimate.flops import estimate_op

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def test_index_put_into_a_large_cache_charges_the_slice():
    # cache[slots] = values, as torch 2.13's profiler records it: the index list has no shapes ([] / "")
    cache, values = (4096, 16, 8, 128), (32, 16, 8, 128)  # a 128 MiB bf16 cache, 32 rows written
    dims, types = (cache, (), values, ()), (BF16, "", BF16, "Scalar")
    nbytes, reason = estimate_bytes("aten::index_put_", dims, types, ("", "", "", "False"))
    slice_elems = 32 * 16 * 8 * 128
    assert (nbytes, reason) == (slice_elems * 2 + slice_elems * 2, "")  # values read + slice written
    assert nbytes < 4096 * 16 * 8 * 128 * 2 / 50  # not the whole cache
    # accumulate=True reads the slice as well
    acc, _ = estimate_bytes("aten::index_put_", dims, types, ("", "", "", "True"))
    assert acc == nbytes + slice_elems * 2
    # when a trace does carry the index shapes: the indices are read, the slice is index x trailing dims
    with_index = (cache, ((32,),), values, ())
    nbytes, _ = estimate_bytes("aten::index_put_", with_index, (BF16, "GenericList", BF16, "Scalar"),
                               ("", "", "", "False"))
    assert nbytes == slice_elems * 2 + 32 * 8 + slice_elems * 2


@pytest.mark.parametrize("name,dims,types,expected", [
    # index_copy_(self, dim, index, source): source + index + slice
    ("aten::index_copy_", ((10000, 64), (), (50,), (50, 64)), (F32, "Scalar", I64, F32), 50 * 64 * 4 + 50 * 8 + 50 * 64 * 4),
    # index_add_: read-modify-write of the slice
    ("aten::index_add_", ((10000, 64), (), (50,), (50, 64), ()), (F32, "Scalar", I64, F32, "Scalar"),
     50 * 64 * 4 + 50 * 8 + 2 * 50 * 64 * 4),
    # scatter_(self, dim, index, src): one src element read and one written per index (src may be larger)
    ("aten::scatter_", ((1000, 1000), (), (1000, 3), (1000, 5)), (F32, "Scalar", I64, F32),
     3000 * 4 + 3000 * 8 + 3000 * 4),
    ("aten::scatter_add_", ((1000, 1000), (), (1000, 3), (1000, 3)), (F32, "Scalar", I64, F32),
     3000 * 4 + 3000 * 8 + 2 * 3000 * 4),
    # masked_scatter_(self, mask, source): the whole bool mask is read, at most numel(source) written
    ("aten::masked_scatter_", ((1000, 1000), (1000, 1000), (500,)), (F32, "bool", F32),
     1000 * 1000 * 1 + 500 * 4 + 500 * 4),
    # copy_ into a slice: self is recorded with the view's shape, so the slice is what is written
    ("aten::copy_", ((1, 64, 128), (1, 64, 128), ()), (BF16, BF16, "Scalar"), 2 * 64 * 128 * 2),
])
def test_indexed_writes(name, dims, types, expected):
    assert estimate_bytes(name, dims, types, None) == (expected, "")


def test_reshape_and_cache_flash_writes_tokens_not_the_cache():
    # vLLM: 256 new tokens, 8 KV heads x 128 into a 20000-block x 16-slot bf16 cache (2 x 10.5 GB)
    kv, cache = (256, 8, 128), (20000, 16, 8, 128)
    dims = (kv, kv, cache, cache, (256,), (), (), ())
    types = (BF16, BF16, BF16, BF16, I64, "", F32, F32)
    nbytes, reason = estimate_bytes("_C_cache_ops::reshape_and_cache_flash", dims, types, None)
    tokens = 2 * 256 * 8 * 128
    assert (nbytes, reason) == (tokens * 2 + 256 * 8 + tokens * 2, "")
    # an fp8 cache: the write is 1 byte per element
    fp8 = (BF16, BF16, "unsigned char", "unsigned char", I64, "", F32, F32)
    assert estimate_bytes("_C_cache_ops::reshape_and_cache", dims, fp8, None)[0] == tokens * 2 + 256 * 8 + tokens


def test_custom_op_without_rule_is_partial():
    # a cache-like argument 1000x larger than the others: presumed mutated, not charged; the reason says so
    dims = ((64, 128), (64,), (100000, 128))
    types = (BF16, I64, BF16)
    nbytes, reason = estimate_bytes("mylib::update_cache", dims, types, None)
    assert nbytes == 64 * 128 * 2 + 64 * 8
    assert reason.startswith("partial: custom op without a byte rule") and "[2]" in reason
    # fbgemm's fused embedding lookup + adagrad (real DLRM record, trimmed): two 640M-element tables (weights and
    # momentum) beside a few KB of indices and offsets; only the indexed rows are touched
    table = (640279200,)
    dims = ((0,), table, (0,), (3,), (2304,), (385,), table)
    types = (F32, F32, F32, "int", I64, I64, F32)
    nbytes, reason = estimate_bytes("fbgemm::split_embedding_codegen_lookup_adagrad_function", dims, types, None)
    assert nbytes == 3 * 4 + (2304 + 385) * 8 and "[1, 6]" in reason and reason.startswith("partial:")
    # a custom GEMM has its own entry: x and the whole weight read, the output [32, 201088] written (the real vLLM
    # decode trace: vllm::rocm_unquantized_gemm(x[32, 2880], weight[201088, 2880], bias=None))
    gemm = ((32, 2880), (201088, 2880), ())
    nbytes, reason = estimate_bytes("vllm::rocm_unquantized_gemm", gemm, (BF16, BF16, ""), None)
    assert (nbytes, reason) == (((32 + 201088) * 2880 + 32 * 201088) * 2, "")
    # no presumed buffer: every input read, outputs not recorded
    nbytes, reason = estimate_bytes("mylib::fused", ((64, 128), (128, 128)), (BF16, BF16), None)
    assert nbytes == (64 * 128 + 128 * 128) * 2 and reason.startswith("partial:") and "outputs not recorded" in reason
    # with the output shape known from elsewhere (ET): it is written
    nbytes, _ = estimate_bytes("mylib::fused", ((64, 128), (128, 128)), (BF16, BF16), None, (64, 128))
    assert nbytes == (64 * 128 + 128 * 128 + 64 * 128) * 2
    est = estimate_op("mylib::fused", ((64, 128), (128, 128)), (BF16, BF16), None)
    assert est.bytes_reason.startswith("partial:") and est.bytes is not None


def test_mul_out_does_not_read_out():
    a = (16, 559, 2816)
    nbytes, _ = estimate_bytes("aten::mul", (a, a, a), (BF16,) * 3, ("", "", ""))
    assert nbytes == 3 * 16 * 559 * 2816 * 2  # two reads + one write, not 1.5x that
    # the functional form (2 arguments) reads both and writes the result
    assert estimate_bytes("aten::mul", (a, a), (BF16,) * 2, ("", ""))[0] == 3 * 16 * 559 * 2816 * 2


def test_type_promotion_of_the_result():
    a = (16, 559, 1024)
    n = 16 * 559 * 1024
    # bf16 + fp32 (both dimensioned): fp32 result
    assert estimate_bytes("aten::add", (a, a, ()), (BF16, F32, "Scalar"), ("", "", "1"))[0] == n * (2 + 4 + 4)
    assert estimate_bytes("aten::mul", (a, a), (BF16, F32), None)[0] == n * (2 + 4 + 4)
    # bf16 dimensioned * 0-dim double: stays bf16 (the TraceLens timesformer row: 3603.797 MiB for 8x12x3137x3137)
    big = (8, 12, 3137, 3137)
    nbig = 8 * 12 * 3137 * 3137
    assert estimate_bytes("aten::mul", (big, ()), (BF16, "double"), None)[0] == nbig * 4 + 8
    # int64 tensor * float scalar: float32 result
    assert estimate_bytes("aten::mul", ((100,), ()), (I64, "Scalar"), ("", "0.5"))[0] == 100 * 8 + 100 * 4
    # comparisons write bool
    assert estimate_bytes("aten::eq", ((16, 559), ()), (I64, "Scalar"), ("", "1"))[0] == 16 * 559 * (8 + 1)


@pytest.mark.parametrize("name,dims,types,concrete,out_spatial", [
    ("aten::upsample_nearest2d", ((2, 64, 32, 32), (), (), ()), (F32, "ScalarList", "", ""),
     ("", "[64, 48]", "", ""), 64 * 48),
    ("aten::upsample_nearest2d", ((2, 64, 32, 32), (), ()), (F32, "", "ScalarList"),
     ("", "", "[2., 1.5]"), 64 * 48),
    ("aten::upsample_bilinear2d", ((2, 64, 32, 32), (), (), (), ()), (F32, "ScalarList", "Scalar", "", ""),
     ("", "[64, 48]", "False", "", ""), 64 * 48),
    ("aten::upsample_bilinear2d", ((2, 64, 32, 32), (), (), ()), (F32, "", "Scalar", "ScalarList"),
     ("", "", "False", "[2., 1.5]"), 64 * 48),
    ("aten::upsample_nearest1d", ((1, 768, 8), (), ()), (BF16, "ScalarList", ""), ("", "[128]", ""), 128),
])
def test_upsample_uses_output_size(name, dims, types, concrete, out_spatial):
    n, c = dims[0][:2]
    size = 2 if types[0] == BF16 else 4
    expected = n * c * (dims[0][2] * (dims[0][3] if len(dims[0]) == 4 else 1) + out_spatial) * size
    assert estimate_bytes(name, dims, types, concrete) == (expected, "")


def test_upsample_nearest1d_matches_tracelens_row():
    # timesformer: upsample_nearest1d ((1, 768, 8), [128]) = 0.19921875 MiB per call in TraceLens
    nbytes, _ = estimate_bytes("aten::upsample_nearest1d", ((1, 768, 8), (), ()), (BF16, "ScalarList", ""),
                               ("", "[128]", ""))
    assert nbytes / 2 ** 20 == 0.19921875


@pytest.mark.parametrize("mask,reads,writes", [
    ("[True, True, False]", ("dy", "w", "dy", "x"), ("x", "w")),
    ("[False, True, False]", ("dy", "x"), ("w",)),
    ("[True, False, False]", ("dy", "w"), ("x",)),
    ("[True, True, True]", ("dy", "w", "dy", "x", "dy"), ("x", "w", "b")),
])
def test_conv_backward_reads_grad_output_per_gradient(mask, reads, writes):
    x, dy, w = (8, 96, 56, 56), (8, 96, 56, 56), (96, 1, 7, 7)
    size = {"x": 8 * 96 * 56 * 56, "dy": 8 * 96 * 56 * 56, "w": 96 * 49, "b": 96}
    dims = (dy, x, w) + ((),) * 8
    types = (BF16,) * 3 + ("ScalarList",) * 4 + ("Scalar", "ScalarList", "Scalar", "ScalarList")
    concrete = ("", "", "", "[96]", "[1, 1]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "96", mask)
    expected = 2 * (sum(size[r] for r in reads) + sum(size[w_] for w_ in writes))
    assert estimate_bytes("aten::convolution_backward", dims, types, concrete) == (expected, "")


def test_cast_writes_target_dtype():
    # _to_copy(self, dtype=bf16 (15), ...): read fp32, write bf16
    dims = ((1024, 1024), (), (), (), (), (), ())
    assert estimate_bytes("aten::_to_copy", dims, (F32, "Scalar", "", "", "", "Scalar", ""),
                          ("", "15", "", "", "", "False", ""))[0] == 1024 * 1024 * (4 + 2)


def test_custom_op_mutated_argument_from_its_schema():
    torch = pytest.importorskip("torch")
    lib = torch.library.Library("tbgi_bytes_test", "DEF")  # noqa: F841  (kept alive for the lookup)
    lib.define("scatter_rows(Tensor(a!) table, Tensor rows, Tensor src) -> ()")
    dims = ((1000, 64), (10,), (10, 64))
    nbytes, reason = estimate_bytes("tbgi_bytes_test::scatter_rows", dims, (F32, I64, F32), None)
    assert nbytes == 10 * 8 + 10 * 64 * 4  # the table (mutated per its schema) is not charged as read
    assert reason.startswith("partial:") and "[0] are mutated (schema)" in reason


def test_recorded_index_put_and_mul_out(tmp_path):
    """Records from torch's own profiler (CPU): the shapes and types as a real trace carries them."""
    import json

    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    cache, values, idx = torch.zeros(2048, 8, 64), torch.ones(16, 8, 64), torch.arange(16) * 3
    a, b, out = torch.ones(256, 64, dtype=torch.bfloat16), torch.ones(256, 64, dtype=torch.bfloat16), \
        torch.empty(256, 64, dtype=torch.bfloat16)
    with profile(record_shapes=True) as prof:
        cache.index_put_((idx,), values)
        torch.mul(a, b, out=out)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    ops = {e["name"]: e["args"] for e in json.loads(path.read_text())["traceEvents"]
           if e.get("cat") == "cpu_op" and e["name"] in ("aten::index_put_", "aten::mul")}
    rec = ops["aten::index_put_"]
    nbytes, _ = estimate_bytes("aten::index_put_", rec["Input Dims"], rec["Input type"], rec.get("Concrete Inputs"))
    assert nbytes == 2 * 16 * 8 * 64 * 4  # values read + 16 rows written, not the 4 MiB cache
    rec = ops["aten::mul"]
    nbytes, _ = estimate_bytes("aten::mul", rec["Input Dims"], rec["Input type"], rec.get("Concrete Inputs"))
    assert len(rec["Input Dims"]) == 3 and nbytes == 3 * 256 * 64 * 2  # out written once, not read
