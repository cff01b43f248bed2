"""Bytes of Inductor kernels from their argument roles (estimate/triton.py), against hand counts: Inductor passes
in_out_ptr* (read and written), then in_ptr* (read), then out_ptr* (written), then xnumel[, r0_numel]. The records
here are what Kineto writes for a Triton launch: Input Dims / Input type per argument, the numels as Concrete
Inputs of Scalar arguments."""
from __future__ import annotations

import math
import re

import pytest

from tb_gpuinsight.estimate.flops import estimate_op
from tb_gpuinsight.estimate.triton import fused_ops

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def launch(name, shapes, types, numels):
    dims = tuple(tuple(s) for s in shapes) + tuple(() for _ in numels)
    return estimate_op(name, dims, tuple(types) + ("Scalar",) * len(numels),
                       tuple("" for _ in shapes) + tuple(str(n) for n in numels))


def test_epilogue_updating_the_gemm_output_in_place_is_read_and_written():
    """addmm + gelu epilogue: (in_out_ptr0 [M, N], in_ptr0 bias [N], xnumel = M x N). The bias cannot be an output
    (N elements, not M x N), so there is no out_ptr and buffer 0 is updated in place: 2 x M x N x 2 + N x 2."""
    m, n = 4096, 5120
    e = launch("triton_poi_fused_addmm_gelu_view_15", [(m, n), (n,)], [BF16, BF16], [m * n])
    assert e.bytes == 2 * m * n * 2 + n * 2
    assert e.bytes_reason.startswith("Inductor argument roles") and "in_out_ptr0" in e.bytes_reason  # exact
    assert e.flops is None and "benchmark_kernel" in e.flops_reason


def test_first_buffer_smaller_than_the_iteration_space_means_no_in_place_buffer():
    """constant_pad_nd: (in_ptr0 [32, 2880], out_ptr0 [32, 3072], xnumel = 32 x 3072): each once, exact."""
    e = launch("triton_poi_fused_constant_pad_nd_moe_forward_0", [(32, 2880), (32, 3072)], [BF16, BF16],
               [32 * 3072])
    assert e.bytes == (32 * 2880 + 32 * 3072) * 2
    assert e.bytes_reason.startswith("Inductor argument roles")


def test_undecided_roles_are_a_lower_bound_naming_the_in_place_figure():
    """silu(a) * b with a and b both [8192, 8192]: (in_ptr0, in_ptr1, out_ptr0) or (in_out_ptr0, in_ptr0): every
    buffer once is the figure, a lower bound; the in-place reading adds buffer 0 once more."""
    n = 8192 * 8192
    e = launch("triton_poi_fused_mul_silu_2", [(8, 1024, 8192), (8192, 8192)], [BF16, BF16], [n])
    assert e.bytes == 2 * n * 2
    assert e.bytes_reason.startswith("lower bound:") and f"{3 * n * 2:.4g}" in e.bytes_reason


def test_single_buffer_is_updated_in_place_unless_its_ops_only_create_values():
    """relu_(x) on [1024, 1024] fp32: read + write; fill of [1024, 1024]: written only."""
    n = 1024 * 1024
    relu = launch("triton_poi_fused_relu_0", [(1024, 1024)], [F32], [n])
    fill = launch("triton_poi_fused_fill_0", [(1024, 1024)], [F32], [n])
    assert relu.bytes == 2 * n * 4 and fill.bytes == n * 4


def test_buffer_larger_than_the_iteration_space():
    """A slice of a [4096, 2 x 4096] buffer into a [4096, 4096] output: counted in full, an upper bound (the slice
    reads half). An embedding gather of 32 rows of a [201088, 2880] table reads 32 x 2880 elements of it."""
    n = 4096 * 4096
    sliced = launch("triton_poi_fused_slice_0", [(4096, 8192), (4096, 4096)], [BF16, BF16], [n])
    assert sliced.bytes == (2 * n + n) * 2 and sliced.bytes_reason.startswith("upper bound:")
    gather = launch("triton_poi_fused_embedding_0", [(32,), (201088, 2880), (32, 2880)], [I64, BF16, BF16],
                    [32 * 2880])
    assert gather.bytes == 32 * 8 + 32 * 2880 * 2 + 32 * 2880 * 2
    assert gather.bytes_reason.startswith("Inductor argument roles") and "gathered" in gather.bytes_reason


def test_reduction_with_its_statistics_updated_in_place():
    """LayerNorm statistics: (in_out_ptr0 rstd [M] fp32, in_ptr0 x [M, N], in_ptr1 weight [N]), xnumel = M,
    r0_numel = N: the weight cannot be an output (neither M nor M x N elements), so rstd is read and written. x has
    an output's size (M x N) and sits right after it, so it too may be in place (in_out_ptr1): a lower bound that
    says by how much; with x after a buffer that cannot be an output, the count is exact."""
    m, n = 32768, 2048
    e = launch("triton_per_fused_native_layer_norm_0", [(m, 1), (m, n), (n,)], [F32, BF16, BF16], [m, n])
    assert e.bytes == 2 * m * 4 + m * n * 2 + n * 2
    assert e.bytes_reason.startswith("lower bound:") and "in_out_ptr0" in e.bytes_reason
    assert f"+{m * n * 2:.4g}" in e.bytes_reason
    exact = launch("triton_per_fused_native_layer_norm_0", [(m, 1), (n,), (m, n), (n,)], [F32, BF16, BF16, BF16],
                   [m, n])
    assert exact.bytes == 2 * m * 4 + m * n * 2 + 2 * n * 2
    assert exact.bytes_reason.startswith("Inductor argument roles") and "in_out_ptr0" in exact.bytes_reason


def test_without_the_iteration_space_the_figure_is_an_inferred_range():
    e = estimate_op("triton_poi_fused_0", ((32,), (64, 64)), (I64, BF16), ("", ""))
    assert e.bytes == 32 * 8 + 64 * 64 * 2 and e.bytes_reason.startswith("inferred:")


def test_fused_ops_from_the_kernel_name():
    assert fused_ops("triton_poi_fused_addmm_gelu_view_15") == ["addmm", "gelu", "view"]
    assert fused_ops("triton_red_fused__unsafe_view_add_mean_1") == ["unsafe", "view", "add", "mean"]
    assert fused_ops("triton_tem_fused_mm_0") == ["mm"]
    assert fused_ops("sm90_xmma_gemm") == []


def _shapes(code: str) -> dict:
    """Buffer name -> shape in an Inductor wrapper (graph inputs, allocations, reuses)."""
    shapes = {}
    for name, dims in re.findall(r"assert_size_stride\((\w+), \(([\d, ]*)\)", code) + \
            re.findall(r"(\w+) = empty_strided_cpu\(\(([\d, ]*)\)", code):
        shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip())
    for new, old in re.findall(r"(\w+) = (\w+); del \w+  # reuse", code):
        shapes[new] = shapes[old]
    return shapes


def test_inductor_passes_in_place_buffers_first(tmp_path, monkeypatch):
    """Compile silu(a @ b) * (a @ b.T) + c with CPU Inductor (its kernels take the same KernelArgs order as Triton's)
    and count the fused kernel's bytes from the roles Inductor names in its signature (in_out_ptr read and written,
    in_ptr read, out_ptr written): the role rule, given only the buffers' shapes in call order and xnumel, counts
    the same."""
    torch = pytest.importorskip("torch")
    from torch._inductor.utils import run_and_get_code

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()

    def mlp(a, b, c):
        return torch.nn.functional.silu(a @ b) * (a @ b.T) + c

    _, code = run_and_get_code(torch.compile(mlp), torch.randn(64, 64), torch.randn(64, 64), torch.randn(64))
    code = code[0]
    signature = re.search(r'extern "C"\s+void\s+kernel\(([^)]*)\)', code).group(1)
    roles = re.findall(r"\b((?:in_out|in|out)_ptr\d+)", signature)
    kernel, passed = re.search(r"\n\s+(cpp_fused_\w+)\(([^)]*)\)", code).groups()
    shapes = [_shapes(code)[b.strip()] for b in passed.split(",")]
    assert roles[0] == "in_out_ptr0" and len(roles) == len(shapes) == 3  # the GEMM output updated in place
    touches = {"in_out": 2, "in": 1, "out": 1}
    by_roles = sum(touches[r.rsplit("_", 1)[0]] * 4 * math.prod(s) for r, s in zip(roles, shapes))
    e = launch(kernel.replace("cpp_", "triton_poi_"), shapes, [F32] * 3, [64 * 64])
    assert e.bytes == by_roles == (2 * 64 * 64 + 64 * 64 + 64) * 4
