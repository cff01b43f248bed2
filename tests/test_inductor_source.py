"""Bytes of Inductor Triton kernels from the source Inductor generated for them (estimate/inductor_source.py).

The kernels in tests/data/inductor_triton were generated here by torch 2.13's Inductor (generate.py beside them:
torch.compile with Triton as the CPU backend, `benchmark_kernel=True`), so each file carries Inductor's own
`kernel_num_gb`. The sizing from roles and index expressions must give exactly that figure, and the hand count:
bytes each buffer really moves from the model's shapes. The last tests run a Kineto record of a launch through
the whole analysis, with the source beside the trace and without it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tb_gpuinsight
from tb_gpuinsight.estimate.inductor_source import KernelSource, candidates, launch_bytes, parse_source

DATA = Path(__file__).parent / "data" / "inductor_triton"
LAUNCHES = json.loads((DATA / "launches.json").read_text())
F32, BF16, I64 = 4, 2, 8
# Hand counts of what each kernel moves, from the compiled models (generate.py's MODELS).
HAND = {
    # x[:, :64] * 2 + x[:, 128:192], x [256, 512] fp32: two 256x64 slices read, one 256x64 written.
    "triton_poi_fused_add_mul_slice_0": (2 * 256 * 64 + 256 * 64) * F32,
    # gelu(x @ w) + b: the mm's [256, 384] output updated in place (read + written), the bias [384] read.
    "triton_poi_fused_add_gelu_0": 2 * 256 * 384 * F32 + 384 * F32,
    # silu(x @ w1) * (x @ w3), bf16 [128, 1024]: the first mm's output read + written, the second's read.
    "triton_poi_fused_mul_silu_0": (2 + 1) * 128 * 1024 * BF16,
    # RMSNorm of [256, 512] fp32: x read, weight [512] read, y written.
    "triton_per_fused_add_mean_mul_pow_rsqrt_0": (2 * 256 * 512 + 512) * F32,
    # table[idx] * 2: 64 int64 indices, 64 rows of 128 gathered from a [1000, 128] table, [64, 128] written.
    "triton_poi_fused_index_mul_0": 64 * I64 + 2 * 64 * 128 * F32,
    # x.t().contiguous() + 1, x [384, 256]: all of x read (strided), all written.
    "triton_poi_fused_add_clone_t_0": 2 * 384 * 256 * F32,
}


def _record(args):
    """A launch as Kineto records it: Input Dims / Input type per argument, numels as Scalar Concrete Inputs."""
    dims = [a[0] if isinstance(a, list) else [] for a in args]
    types = [a[1] if isinstance(a, list) else "Scalar" for a in args]
    concrete = ["" if isinstance(a, list) else str(a) for a in args]
    return dims, types, concrete


def _without_inductor_figures(src: KernelSource) -> KernelSource:
    return KernelSource(src.path, src.args, src.indices, src.numels)


@pytest.mark.parametrize("kernel", sorted(HAND))
def test_index_expressions_give_inductors_own_figure_and_the_hand_count(kernel):
    launch = LAUNCHES[kernel]
    src = parse_source((DATA / launch["file"]).read_text())
    assert src is not None and src.num_gb is not None  # compiled with benchmark_kernel: Inductor's figure is there
    assert launch_bytes(src, *_record(launch["args"]))[0] == pytest.approx(src.num_gb * 1e9, rel=1e-12)
    nbytes, note = launch_bytes(_without_inductor_figures(src), *_record(launch["args"]))
    assert nbytes == HAND[kernel] == pytest.approx(src.num_gb * 1e9, rel=1e-12)
    assert note.startswith("Inductor source: roles")


def test_roles_and_slices_are_read_from_the_source():
    slices = parse_source((DATA / LAUNCHES["triton_poi_fused_add_mul_slice_0"]["file"]).read_text())
    assert slices.args == ("in_ptr0", "out_ptr0", "xnumel")
    assert len(slices.indices["in_ptr0"]) == 2 and slices.numels == {"xnumel": 16384}  # two slices of one buffer
    silu = parse_source((DATA / LAUNCHES["triton_poi_fused_mul_silu_0"]["file"]).read_text())
    assert [name for _, name in silu.buffers] == ["in_out_ptr0", "in_ptr0"]  # the in-place epilogue, by name
    note = launch_bytes(_without_inductor_figures(silu), *_record(LAUNCHES["triton_poi_fused_mul_silu_0"]["args"]))[1]
    assert "in_out_ptr0" in note


def test_a_launch_that_does_not_match_its_source_is_not_sized():
    launch = LAUNCHES["triton_poi_fused_add_mul_slice_0"]
    src = _without_inductor_figures(parse_source((DATA / launch["file"]).read_text()))
    assert launch_bytes(src, *_record(launch["args"][1:])) is None  # an argument fewer
    assert parse_source("def f(:\n") is None and parse_source("x = 1\n") is None
    template = parse_source("@triton.jit\ndef triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0, BLOCK_M: tl.constexpr):\n"
                            "    a = tl.load(arg_A + (0))\n    tl.store(out_ptr0 + (0), a)\n")
    assert template.args == ("arg_A", "arg_B", "out_ptr0")  # a GEMM template reads its operands by other names
    assert launch_bytes(template, [[64, 64], [64, 64], [64, 64]], ["float"] * 3, ["", "", ""]) is None


def test_only_inductor_kernel_files_are_looked_for(tmp_path):
    trace = str(tmp_path / "t.pt.trace.json")
    good = "/tmp/torchinductor_someone/mw/cmwjlpfu2kb4ehcuvblmjopjzi4rp4n2rtyqnvbbrb4xvqkksyqd.py"
    found = candidates(good, trace)
    assert found == [tmp_path / Path(good).name]  # beside the trace only: never the path the trace names
    assert candidates("/etc/passwd", trace) == [] and candidates("/home/x/../../etc/shadow.py", trace) == []
    assert candidates("/srv/cmwjlpfu2kb4ehcuvblmjopjzi4rp4n2rtyqnvbbrb4xvqkksyqd.py", None) == []  # no cache dir


def _compiled_trace(tmp_path, kernel):
    """A CUDA trace of one Inductor launch of `kernel` (its cpu_op as Inductor records it: kernel_file in the
    compiling machine's cache, no kernel_num_gb), its runtime launch and its kernel."""
    args = LAUNCHES[kernel]["args"]
    dims, types, concrete = _record(args)
    file = f"/tmp/torchinductor_nobody/xx/{LAUNCHES[kernel]['file']}"
    events = [
        {"ph": "X", "cat": "cpu_op", "name": kernel, "pid": 1, "tid": 1, "ts": 100, "dur": 20,
         "args": {"External id": 1, "Input Dims": dims, "Input type": types, "Concrete Inputs": concrete,
                  "kernel_backend": "triton", "kernel_file": file, "kernel_hash": Path(file).stem}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 105, "dur": 5,
         "args": {"correlation": 1, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 120, "dur": 10,
         "args": {"External id": 1, "correlation": 1, "device": 0, "stream": 7, "grid": [16, 1, 1],
                  "block": [128, 1, 1], "registers per thread": 16}}]
    path = tmp_path / "run" / "w.pt.trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "computeMajor": 9, "computeMinor": 0,
         "numSms": 132}]}))
    return path, Path(file).name


def _kernel_row(path):
    acts = tb_gpuinsight.analyze(path, execution_traces=[]).activities
    i = [acts.strings["kind"][k] for k in acts["kind"]].index("kernel")
    return (acts["bytes"][i], acts.strings["bytes_reason"][acts["bytes_reason"][i]],
            acts.strings["source"][acts["source"][i]])


def test_the_source_beside_the_trace_sizes_a_sliced_read(tmp_path):
    """Without its source the slice kernel's [256, 512] input is counted in full (an upper bound); with the
    generated file beside the trace (its benchmark figure removed) the two slices it reads are counted."""
    kernel = "triton_poi_fused_add_mul_slice_0"
    path, name = _compiled_trace(tmp_path, kernel)
    nbytes, reason, _ = _kernel_row(path)
    assert nbytes == (256 * 512 + 256 * 64) * F32 and reason.startswith("upper bound:")
    text = (DATA / LAUNCHES[kernel]["file"]).read_text()
    (path.parent / "inductor" / name[1:3]).mkdir(parents=True)
    (path.parent / "inductor" / name[1:3] / name).write_text(re.sub(r"'kernel_num_gb': [0-9.e-]+, ?", "", text))
    nbytes, reason, source = _kernel_row(path)
    assert nbytes == HAND[kernel] and source == "inductor"
    assert reason.startswith("Inductor source:") and "in_ptr0: 2 x 16384" in reason


def test_the_source_decides_an_in_place_epilogue_the_order_leaves_open(tmp_path):
    """silu(a) * b over two [128, 1024] buffers: by order alone (in_ptr0, out_ptr0) or (in_out_ptr0, in_ptr0), a
    lower bound; the source names in_out_ptr0, so read + write of it and a read of the other."""
    kernel = "triton_poi_fused_mul_silu_0"
    path, name = _compiled_trace(tmp_path, kernel)
    nbytes, reason, _ = _kernel_row(path)
    assert nbytes == 2 * 128 * 1024 * BF16 and reason.startswith("lower bound:")
    (path.parent / name).write_text((DATA / LAUNCHES[kernel]["file"]).read_text())
    nbytes, reason, source = _kernel_row(path)
    assert nbytes == HAND[kernel] and source == "inductor" and reason == "Inductor's kernel_num_gb, in the kernel's source"


@pytest.mark.parametrize("kernel", sorted(HAND))
def test_the_order_based_figure_without_the_source_is_what_its_label_says(kernel):
    """Without the file, bytes come from the argument order (estimate/triton.py): an exact figure is the hand
    count, a lower bound is below it, an upper bound above it (tiled kernels included: ynumel x xnumel)."""
    from tb_gpuinsight.estimate.flops import estimate_op

    dims, types, concrete = _record(LAUNCHES[kernel]["args"])
    e = estimate_op(kernel, tuple(tuple(d) for d in dims), tuple(types), tuple(concrete))
    if e.bytes_reason.startswith("lower bound:"):
        assert e.bytes <= HAND[kernel]
    elif e.bytes_reason.startswith("upper bound:"):
        assert e.bytes >= HAND[kernel]
    else:
        assert e.bytes_reason.startswith("Inductor argument roles") and e.bytes == HAND[kernel]


def test_capture_keeps_the_kernels_beside_the_trace_where_the_analysis_finds_them(tmp_path):
    """tb_gpuinsight.profile copies the Triton kernels Inductor loaded into {logdir}/inductor_kernels/<xx>/: a
    wrapper or C++ module (no @triton.jit) is not copied, a kernel is copied once, and the analysis of a trace in
    that logdir sizes its launch from the copy."""
    from tb_gpuinsight.capture.inductor_kernels import FOLDER, keep_kernel_sources

    kernel = "triton_poi_fused_add_mul_slice_0"
    path, name = _compiled_trace(tmp_path, kernel)
    wrapper = tmp_path / "cwrapperwrapperwrapperwrapper.py"
    wrapper.write_text("def call(args):\n    pass\n")
    loaded = [str(DATA / LAUNCHES[kernel]["file"]), str(wrapper)]
    seen: set = set()
    assert keep_kernel_sources(str(path.parent), loaded, seen) == 1
    assert keep_kernel_sources(str(path.parent), loaded, seen) == 0 and len(seen) == 2
    assert [p.name for p in (path.parent / FOLDER).rglob("*.py")] == [name]
    nbytes, reason, source = _kernel_row(path)
    assert nbytes == HAND[kernel] and source == "inductor" and reason.startswith("Inductor's kernel_num_gb")
