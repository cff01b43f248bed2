"""One-line capture: per span Kineto trace + Execution Trace + tensor.trace, discovered as one run, ET linked."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

import tb_gpuinsight  # noqa: E402
from tb_gpuinsight.analysis.graph.build import load_graph  # noqa: E402
from tb_gpuinsight.capture.profiling import worker_name  # noqa: E402
from tb_gpuinsight.logdir import discover  # noqa: E402


def _train(prof, steps=6):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(8, 16)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()


def test_profile_writes_three_files_per_span(tmp_path):
    run = tmp_path / "logdir" / "run"
    with tb_gpuinsight.profile(run, worker_name="w", wait=1, warmup=1, active=1, repeat=2) as prof:
        _train(prof)
    runs = discover(tmp_path / "logdir")
    assert [r.name for r in runs] == ["run"]
    spans = runs[0].workers["w"]
    assert len(spans) == 2
    for span in spans:
        assert len(span.execution_traces) == 1 and len(span.tensor_traces) == 1
        stem = span.name[: -len(".pt.trace.json")]
        assert os.path.basename(span.execution_traces[0].path) == stem + ".et.json"
        assert os.path.basename(span.tensor_traces[0].path) == stem + ".tensor.trace"
        graph = load_graph(span.execution_traces[0].path, span.trace.path)
        assert graph.link.rate == 1.0, graph.link.to_dict()
        records = tb_gpuinsight.read_tensor_trace(span.tensor_traces[0].path)
        assert not records.errors and len(records.table) > 0
        trace = tb_gpuinsight.load(span.trace.path)
        assert trace.meta.record_shapes
        assert len(trace.memory) > 0  # profile_memory is on by default
    assert not runs[0].execution_traces and not runs[0].tensor_traces  # nothing left at run level


def _complete_spans(spans) -> None:
    """Each span has its Kineto trace, Execution Trace (linked at 100 %) and tensor.trace."""
    assert len(spans) == 2
    for span in spans:
        assert [len(span.execution_traces), len(span.tensor_traces)] == [1, 1], span.name
        graph = load_graph(span.execution_traces[0].path, span.trace.path)
        assert graph.link.linkable > 0 and graph.link.rate == 1.0, graph.link.to_dict()
        records = tb_gpuinsight.read_tensor_trace(span.tensor_traces[0].path)
        assert not records.errors and len(records.table) > 0


def test_handler_as_observer_of_a_user_built_profiler_completes_the_first_span(tmp_path):
    handler = tb_gpuinsight.trace_handler(tmp_path, worker_name="u")
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=2),
                                on_trace_ready=handler, execution_trace_observer=handler,
                                record_shapes=True) as prof:
        _train(prof)
    _complete_spans(discover(tmp_path)[0].workers["u"])
    assert not [n for n in os.listdir(handler._tmp)]  # nothing left behind


def test_profiler_args_one_liner(tmp_path):
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=2),
                                **tb_gpuinsight.trace_handler(tmp_path, worker_name="k").profiler_args()) as prof:
        _train(prof)
    _complete_spans(discover(tmp_path)[0].workers["k"])


def test_handler_on_a_plain_profiler_takes_over_from_the_second_span(tmp_path):
    handler = tb_gpuinsight.trace_handler(tmp_path, worker_name="p", use_gzip=True)
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=2),
                                on_trace_ready=handler, record_shapes=True) as prof:
        _train(prof)
    spans = discover(tmp_path)[0].workers["p"]
    assert [s.name.endswith(".pt.trace.json.gz") for s in spans] == [True, True]
    assert [len(s.execution_traces) for s in spans] == [0, 1]  # the first window had started before it
    assert [len(s.tensor_traces) for s in spans] == [0, 1]
    assert spans[1].execution_traces[0].path.endswith(".et.json.gz")
    assert load_graph(spans[1].execution_traces[0].path, spans[1].trace.path).link.rate == 1.0


def test_options_turn_parts_off(tmp_path):
    with tb_gpuinsight.profile(tmp_path, worker_name="n", active=1, execution_trace=False,
                               tensor_trace=False, profile_memory=False, scalars=False) as prof:
        _train(prof, steps=4)
    names = os.listdir(tmp_path)
    assert names and all(n.endswith(".pt.trace.json") for n in names)
    assert all(len(tb_gpuinsight.load(tmp_path / n).memory) == 0 for n in names)


def test_distributed_rank_in_worker_name(tmp_path):
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        assert worker_name("host") == "host_rank0"
        assert worker_name("host_rank0") == "host_rank0"
    finally:
        dist.destroy_process_group()
    assert worker_name("host") == "host"


def test_profile_turns_on_inductors_per_kernel_figures(tmp_path):
    import torch._inductor.config as inductor_config

    before = inductor_config.benchmark_kernel
    try:
        inductor_config.benchmark_kernel = False
        tb_gpuinsight.profile(tmp_path / "a", inductor_figures=False)
        assert inductor_config.benchmark_kernel is False
        tb_gpuinsight.profile(tmp_path / "b")
        assert inductor_config.benchmark_kernel is True
    finally:
        inductor_config.benchmark_kernel = before
