"""Transformer Engine entries (estimate/transformer_engine.py) against first principles.

TE 1.x's GEMM is the TorchScript op ``tex_ts::te_gemm_ts`` (csrc/ts_fp8_op.cpp): the test registers an op with the
same schema, implements cuBLASLt's column-major convention in it, checks that convention against PyTorch's own
products for TE's three layouts (fprop TN, dgrad NN, wgrad NT), and records the calls with torch's profiler, as a
TE 1.x run would be recorded. TE 2.x's autograd Functions are recorded by class name with their tensor arguments.
"""
from __future__ import annotations

import json

import pytest

from tb_gpuinsight.estimate.bytes import estimate_bytes
from tb_gpuinsight.estimate.flops import estimate_op, freeze
from tb_gpuinsight.estimate.registry import lookup

TE_GEMM_SCHEMA = (
    "te_gemm_ts(Tensor A, Tensor A_scale_inverse, int A_fp8_tensor, int A_type, int transa, Tensor B, "
    "Tensor B_scale_inverse, int B_fp8_tensor, int B_type, int transb, Tensor D, Tensor D_scale, int D_type, "
    "Tensor D_amax, Tensor bias, int bias_type, Tensor pre_gelu_out, int grad, Tensor workspace, "
    "int workspaceSize, int accumulate, int use_split_accumulator) -> Tensor")
BF16, F32 = 5, 3  # TE DType codes
TOKENS, IN, OUT = 48, 32, 80


@pytest.fixture(scope="module")
def te_gemm():
    """torch.ops.tex_ts.te_gemm_ts: D = op(A) op(B) in cuBLAS's column-major view of row-major tensors."""
    torch = pytest.importorskip("torch")
    lib = torch.library.Library("tex_ts", "FRAGMENT")
    lib.define(TE_GEMM_SCHEMA)

    def impl(A, A_si, A_i, A_t, transa, B, B_si, B_i, B_t, transb, D, D_s, D_t, D_amax, bias, bias_t, gelu, grad,
             ws, ws_size, accumulate, split):
        op_a = A if transa else A.t()  # column-major A is A.t(); transposing it back gives A
        op_b = B if transb else B.t()
        product = (op_a @ op_b).t()  # column-major D [m, n] is row-major D [n, m]
        D.copy_(product + D if accumulate else product)
        return D

    lib.impl("te_gemm_ts", impl, "CPU")
    yield torch
    del lib


def _call(torch, A, transa, B, transb, D, accumulate=0):
    empty = torch.empty(0)
    ws = torch.empty(1024, dtype=torch.uint8)
    return torch.ops.tex_ts.te_gemm_ts(A, empty, 0, F32, transa, B, empty, 0, F32, transb, D, empty, F32, empty,
                                       empty, BF16, empty, 0, ws, 1024, accumulate, 0)


def test_te_gemm_layouts_rated_from_a_recorded_trace(te_gemm, tmp_path):
    torch = te_gemm
    from torch.profiler import ProfilerActivity, profile

    x, w, dy = torch.randn(TOKENS, IN), torch.randn(OUT, IN), torch.randn(TOKENS, OUT)
    y, dx, dw = torch.zeros(TOKENS, OUT), torch.zeros(TOKENS, IN), torch.zeros(OUT, IN)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _call(torch, w, 1, x, 0, y)  # fprop, layout TN: y = x @ w.T
        _call(torch, w, 0, dy, 0, dx)  # dgrad, layout NN: dx = dy @ w
        _call(torch, x, 0, dy, 1, dw, accumulate=1)  # wgrad, layout NT: dw += dy.T @ x
    torch.testing.assert_close(y, x @ w.t())
    torch.testing.assert_close(dx, dy @ w)
    torch.testing.assert_close(dw, dy.t() @ x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    recs = [e["args"] for e in json.loads(path.read_text())["traceEvents"]
            if e.get("cat") == "cpu_op" and e["name"] == "tex_ts::te_gemm_ts"]
    assert len(recs) == 3
    ests = [estimate_op("tex_ts::te_gemm_ts", freeze(r["Input Dims"]), freeze(r["Input type"]),
                        freeze(r["Concrete Inputs"])) for r in recs]
    assert [e.flops for e in ests] == [2 * TOKENS * OUT * IN] * 3
    # A and B read, D written (wgrad accumulates: D read too); empty bias / GELU input, no workspace
    assert ests[0].bytes == (OUT * IN + TOKENS * IN + TOKENS * OUT) * 4
    assert ests[1].bytes == (OUT * IN + TOKENS * OUT + TOKENS * IN) * 4
    assert ests[2].bytes == (TOKENS * IN + TOKENS * OUT + 2 * OUT * IN) * 4
    assert all(e.flops_reason == e.bytes_reason == "" for e in ests)


def test_te_gemm_inconsistent_shapes_are_unknown():
    dims = [[64, 32], [0], [], [], [], [128, 48], [0], [], [], [], [128, 64], [0], [], [0], [0], [], [0], [], [8],
            [], [], []]
    types = ["c10::BFloat16", "float", "Scalar", "Scalar", "Scalar", "c10::BFloat16", "float", "Scalar", "Scalar", "Scalar",
             "c10::BFloat16", "float", "Scalar", "float", "c10::BFloat16", "Scalar", "c10::BFloat16", "Scalar",
             "unsigned char", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "0", "5", "1", "", "", "0", "5", "0", "", "", "5", "", "", "5", "", "0", "", "8", "0", "0"]
    est = estimate_op("tex_ts::te_gemm_ts", freeze(dims), freeze(types), freeze(concrete))
    assert est.flops is None and "do not agree" in est.flops_reason


def test_fp8_gemm_bytes_use_one_byte_operands():
    """FP8 operands are uint8 tensors: 1 byte each; the bf16 output 2 bytes; the bias read once."""
    dims = [[64, 32], [3], [], [], [], [128, 32], [3], [], [], [], [128, 64], [], [], [], [64], [], [0], [],
            [33554432], [], [], []]
    types = ["unsigned char", "float", "Scalar", "Scalar", "Scalar", "unsigned char", "float", "Scalar", "Scalar", "Scalar",
             "c10::BFloat16", "float", "Scalar", "float", "c10::BFloat16", "Scalar", "c10::BFloat16", "Scalar",
             "unsigned char", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "0", "6", "1", "", "", "1", "6", "0", "", "", "5", "", "", "5", "", "0", "", "33554432",
                "0", "1"]
    est = estimate_op("tex_ts::te_gemm_ts", freeze(dims), freeze(types), freeze(concrete))
    assert est.flops == 2 * 64 * 128 * 32
    assert est.bytes == 64 * 32 + 128 * 32 + 64 * 2 + 128 * 64 * 2


@pytest.mark.parametrize("name,dims,types,concrete,flops,nbytes", [
    # cast_to_fp8_ts(input, scale, amax, scale_inv, fp8_tensor, otype=E4M3): bf16 read, 1-byte copy written
    ("tex_ts::cast_to_fp8_ts", [[256, 64], [3], [1, 3], [3], [], []],
     ["c10::BFloat16", "float", "float", "float", "Scalar", "Scalar"], ["", "", "", "", "0", "6"], 0, 256 * 64 * 3),
    # cast_from_fp8_ts(input, scale_inv, fp8_tensor, itype, otype=fp32)
    ("tex_ts::cast_from_fp8_ts", [[256, 64], [3], [], [], []], ["unsigned char", "float", "Scalar", "Scalar", "Scalar"],
     ["", "", "0", "6", "3"], 0, 256 * 64 * 5),
    # swiglu_ts(input[..., 2d], scale, amax, scale_inv, fp8_tensor, otype=bf16): 2 FLOPs per output element
    ("tex_ts::swiglu_ts", [[128, 512], [0], [0], [0], [], []],
     ["c10::BFloat16", "float", "float", "float", "Scalar", "Scalar"], ["", "", "", "", "0", "5"],
     2 * 128 * 256, 128 * 512 * 2 + 128 * 256 * 2),
    # gelu_ts to FP8: 1 FLOP per element, 1-byte output
    ("tex_ts::gelu_ts", [[128, 512], [3], [1, 3], [3], [], []],
     ["c10::BFloat16", "float", "float", "float", "Scalar", "Scalar"], ["", "", "", "", "1", "7"],
     128 * 512, 128 * 512 * 3),
    # layernorm_fwd_inf_ts(input, weight, bias, eps, sm_margin, zero_centered_gamma)
    ("tex_ts::layernorm_fwd_inf_ts", [[512, 1024], [1024], [1024], [], [], []],
     ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar", "Scalar"], ["", "", "", "1e-05", "0", "0"],
     5 * 512 * 1024, 2 * 512 * 1024 * 2 + 2 * 1024 * 2),
    # rmsnorm_fwd_fp8_inf_ts(input, weight, eps, scale, amax, scale_inv, fp8_tensor, otype=E4M3, ...)
    ("tex_ts::rmsnorm_fwd_fp8_inf_ts", [[512, 1024], [1024], [], [3], [1, 3], [3], [], [], [], []],
     ["c10::BFloat16", "c10::BFloat16", "Scalar", "float", "float", "float", "Scalar", "Scalar", "Scalar", "Scalar"],
     ["", "", "1e-05", "", "", "", "0", "6", "0", "0"], 4 * 512 * 1024, 512 * 1024 * 3 + 1024 * 2),
])
def test_te_torchscript_ops(name, dims, types, concrete, flops, nbytes):
    est = estimate_op(name, freeze(dims), freeze(types), freeze(concrete))
    assert (est.flops, est.bytes) == (flops, nbytes)
    assert lookup(name).source.startswith("Transformer Engine 1.x")


def _te_call(torch, layout):
    """The forward of a Function named like TE's and its apply() arguments, for one argument layout."""
    w, b = torch.randn(OUT, IN), torch.randn(OUT)
    if layout in ("te2", "te1"):
        x = torch.randn(2, TOKENS // 2, IN)

        def linear(*args):
            weight, inp, bias = args[:3] if layout == "te2" else (args[0], args[2], args[3])
            return inp @ weight.t() + bias

        return linear, (w, x, b, (True, None, 3)) if layout == "te2" else (w, w.clone(), x, b, True, 1)
    gamma, beta = torch.ones(IN), (torch.zeros(IN) if layout == "layernorm" else None)

    def ln_linear(inp, ln_weight, ln_b, weight, bias, eps, non_tensor_args):
        return torch.nn.functional.layer_norm(inp, (IN,), ln_weight, ln_b, eps) @ weight.t() + bias

    return ln_linear, (torch.randn(TOKENS, IN), gamma, beta, w, b, 1e-5, (False, None))


GEMM, X, Y, W = 2 * TOKENS * OUT * IN, TOKENS * IN, TOKENS * OUT, OUT * IN


@pytest.mark.parametrize("name, layout, flops, nbytes", [
    # TE 2.x: _Linear.apply(weight, inp, bias, non_tensor_args)
    ("_Linear", "te2", GEMM, (W + X + OUT + Y) * 4),
    # TE 1.x: _Linear.apply(weight, weight_fp8, inp, bias, ...): the weight passed twice (its FP8 copy)
    ("_Linear", "te1", GEMM, (2 * W + X + OUT + Y) * 4),
    # _LayerNormLinear.apply(inp, ln_weight, ln_bias, weight, bias, eps, non_tensor_args): a norm over IN, then
    # x @ weight.T; bytes: x, the norm's parameters, weight and bias read, the normalised x written and read back
    ("_LayerNormLinear", "layernorm", GEMM + 5 * X, (X + 2 * IN + W + OUT + 2 * X + Y) * 4),
    ("_LayerNormLinear", "rmsnorm", GEMM + 4 * X, (X + IN + W + OUT + 2 * X + Y) * 4),  # RMSNorm: no bias
])
def test_functions_recorded_by_torch(tmp_path, name, layout, flops, nbytes):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    forward, args = _te_call(torch, layout)
    function = type(name, (torch.autograd.Function,), {  # named like TE's: the profiler records the class name
        "forward": staticmethod(lambda ctx, *a: forward(*a)),
        "backward": staticmethod(lambda ctx, grad: (None,) * len(args))})
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        function.apply(*args)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    rec = next(e["args"] for e in json.loads(path.read_text())["traceEvents"]
               if e.get("cat") == "cpu_op" and e["name"] == name)
    est = estimate_op(name, freeze(rec["Input Dims"]), freeze(rec["Input type"]), freeze(rec.get("Concrete Inputs")))
    assert (est.flops, est.bytes) == (flops, nbytes)
    assert est.bytes_reason.startswith("partial:")


@pytest.mark.parametrize("dims", [
    [[2, 24, 32], [80, 32], [80]],  # other libraries' _Linear(x, weight, bias), x 3-D first
    [[48, 32], [80, 32], [80]],  # x 2-D first: taken as the matrix, the product 48 x 80 x 32 is the same
])
def test_linear_with_the_input_first(dims):
    est = estimate_op("_Linear", freeze(dims), freeze(["float"] * 3), freeze([""] * 3))
    assert est.flops == 2 * 48 * 80 * 32
    assert est.bytes == (48 * 32 + 80 * 32 + 80 + 48 * 80) * 4


@pytest.mark.parametrize("name,needle", [
    ("FusedAttnFunc", "NVTE_FUSED_ATTN=0"),
    ("_LinearBackward", "same sequence number"),
    ("_LayerNormMLP", "Nsight Compute"),
    ("_GroupedLinear", "m_splits"),
])
def test_unrated_functions_say_what_would_rate_them(name, needle):
    est = estimate_op(name, freeze([[4, 16]]), freeze(["c10::BFloat16"]), freeze([""]))
    assert est.flops is None and est.bytes is None
    assert needle in est.flops_reason and est.flops_reason.startswith(f"Transformer Engine {name}:")
    nbytes, reason = estimate_bytes(name, [[4, 16]], ["c10::BFloat16"], [""])
    assert nbytes is None and needle in reason
