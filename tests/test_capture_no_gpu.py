"""A CUDA build of torch on a machine without a usable GPU (what `pip install torch` gives on most machines):
`tb_gpuinsight.profile` profiles the CPU and says, as its own warning, that Kineto's "gpuGetDeviceCount failed with
code 35" line is torch's, not this package's; a CPU build says nothing."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import tb_gpuinsight  # noqa: E402
from tb_gpuinsight.capture import profiling  # noqa: E402


def _warnings(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = tb_gpuinsight.profile(str(tmp_path), scalars=False, execution_trace=False, tensor_trace=False)
    assert torch.profiler.ProfilerActivity.CUDA not in prof.activities
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_a_cuda_build_without_a_gpu_names_the_device_count_line_as_torchs(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    notes = _warnings(tmp_path)
    assert len(notes) == 1 and notes[0].startswith("tb_gpuinsight.profile: this torch is a CUDA build")
    assert "'gpuGetDeviceCount failed with code 35'" in notes[0] and "torch's own profiler (Kineto)" in notes[0]


def test_a_cpu_build_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None)
    assert _warnings(tmp_path) == [] and not profiling.warn_gpu_build_without_gpu()
