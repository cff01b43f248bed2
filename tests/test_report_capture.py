"""Recorded CPU torch runs: the regression gate (`diff --fail-if-slower`) fails on a slower run and passes on a run
against itself; `profile()` writes the headline figures as TensorBoard scalars, and none with `scalars=False`."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tb_gpuinsight  # noqa: E402
from tb_gpuinsight.capture.scalars import PREFIX, event_files, read_scalars  # noqa: E402
from tb_gpuinsight.cli import main  # noqa: E402


ACTIVE = 12  # recorded steps: on a loaded machine a few are hiccups, and the gate needs 5 kept per side


def record(run, batch: int, size: int, matmuls: int, scalars: bool = True, active: int = ACTIVE) -> None:
    """A small training-like loop under `tb_gpuinsight.profile`: 2 unrecorded steps, then `active` recorded ones."""
    torch.manual_seed(0)
    weight = torch.randn(size, size) / size ** 0.5
    with tb_gpuinsight.profile(run, worker_name="w", wait=1, warmup=1, active=active, scalars=scalars) as prof:
        for _ in range(2 + active):
            x = torch.randn(batch, size)
            for _ in range(matmuls):
                x = torch.tanh(x @ weight)
            prof.step()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A fast run and one doing 256 times the matrix work per step (the same loop, bigger matmuls), one thread
    each: the fast run's steps last milliseconds, not the fraction of one a scheduler's hiccup dwarfs."""
    root = tmp_path_factory.mktemp("logdir")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record(root / "fast", batch=64, size=256, matmuls=4)
        record(root / "slow", batch=512, size=1024, matmuls=8)
    finally:
        torch.set_num_threads(threads)
    return root


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_gate_fails_on_the_slower_run_with_one_line(capsys, runs):
    code, out, err = _cli(capsys, "diff", runs / "fast", runs / "slow", "--fail-if-slower", "10")
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("tb-gpuinsight: gate: FAIL: slow is slower than fast: median step time ")
    assert "threshold 10%" in err and "noise band" in err and "fast: " in err and f" of {ACTIVE} steps kept" in err
    assert out.startswith("A = fast")  # the diff itself is printed as without the gate


def test_gate_passes_on_a_run_against_itself_and_on_a_faster_run(capsys, runs):
    code, _, err = _cli(capsys, "diff", runs / "slow", runs / "slow", "--fail-if-slower", "1")
    assert code == 0 and "gate: pass: not slower" in err and "+0.0% slower" in err
    code, _, err = _cli(capsys, "diff", runs / "slow", runs / "fast", "--fail-if-slower", "5", "--format", "json")
    assert code == 0 and "gate: pass: fast is faster than slow beyond the noise and 5%" in err


def test_gate_threshold_above_the_slowdown_passes(capsys, runs):
    from tb_gpuinsight.reporting.gate import compare

    change = compare(tb_gpuinsight.overview(runs / "fast"), tb_gpuinsight.overview(runs / "slow"), "step")
    assert change.slower > change.noise and change.slower_pct > 10
    code, _, err = _cli(capsys, "diff", runs / "fast", runs / "slow", "--fail-if-slower", f"{change.slower_pct + 1:.1f}")
    assert code == 0 and "gate: pass: not beyond" in err


def test_gate_on_a_metric_a_cpu_run_lacks_exits_2(capsys, runs):
    code, _, err = _cli(capsys, "diff", runs / "fast", runs / "slow", "--fail-if-slower", "10", "--metric", "kernel")
    assert code == 2 and err.count("\n") == 1 and "use --metric step" in err
    code, _, err = _cli(capsys, "diff", runs / "fast", runs / "slow", "--fail-if-slower", "-3")
    assert code == 2 and "> 0" in err


def test_profile_writes_step_scalars_at_the_profiler_steps(runs):
    scalars = read_scalars(runs / "slow")
    assert set(scalars) == {PREFIX + "step_time_ms"}  # a CPU run: no GPU busy, MFU or communication to chart
    steps = tb_gpuinsight.overview(runs / "slow").steps_frame()
    assert [s for s, _ in scalars[PREFIX + "step_time_ms"]] == steps["step_number"].tolist()
    assert [v for _, v in scalars[PREFIX + "step_time_ms"]] == pytest.approx((steps["wall_us"] / 1000).tolist(),
                                                                            rel=1e-6)
    assert len(event_files(runs / "slow")) == 1


def test_report_of_the_pair_compares_step_time_outside_the_noise(runs):
    report = tb_gpuinsight.report(runs / "slow", baseline=runs / "fast")
    step = report["comparison"]["metrics"][0]
    assert step["metric"] == "step" and step["outside_noise"] is True and step["noise"] is not None
    assert report["devices"] == [] and report["subject"]["steps"] == ACTIVE
    md = tb_gpuinsight.report(runs / "slow", baseline=runs / "fast", format="md")
    assert "No GPU in this trace" in md and "**outside the noise band**" in md


def test_scalars_off_writes_no_event_file(tmp_path):
    record(tmp_path / "off", batch=8, size=32, matmuls=1, scalars=False)
    assert tb_gpuinsight.discover(tmp_path)[0].workers["w"]
    assert event_files(tmp_path / "off") == []
    handler = tb_gpuinsight.trace_handler(tmp_path / "h", worker_name="h", scalars=False)
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=0, warmup=0, active=1),
                                **handler.profiler_args()) as prof:
        torch.randn(8, 8).sum()
        prof.step()
    assert handler.spans and event_files(tmp_path / "h") == []


def test_scalars_of_a_real_h100_span_are_the_overviews_figures(tmp_path):
    """A GPU span (the bert_h100 sample): all four tags, at the ProfilerStep numbers, equal to the Overview's."""
    import os

    from tb_gpuinsight.capture.scalars import ScalarWriter, span_scalars
    from tb_gpuinsight.reporting.gate import per_step

    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "bert_h100")
    trace = os.path.join(folder, os.listdir(folder)[0])
    points = span_scalars(trace)
    ov = tb_gpuinsight.overview(trace)
    assert [s for s, _ in points] == [r["step_number"] for r in ov.steps]
    values = points[0][1]
    assert set(values) == {"step_time_ms", "gpu_busy_pct", "mfu_pct", "comm_exposed_ms"}
    assert values["gpu_busy_pct"] == pytest.approx(100 * ov.steps[0]["gpu_busy_pct"])
    assert values["mfu_pct"] == pytest.approx(per_step(ov, "mfu")[0]) and 0 < values["mfu_pct"] < 100
    writer = ScalarWriter(tmp_path)
    assert writer.write_span(trace) == len(points)
    writer.close()
    back = read_scalars(tmp_path)
    assert back[PREFIX + "mfu_pct"] == [(points[0][0], pytest.approx(values["mfu_pct"], rel=1e-6))]


def test_hparams_are_written_with_the_scalars(tmp_path):
    """`profile(hparams=...)`: an HParams session in the run's event file (its metrics the gpuinsight tags), read
    back with TensorBoard's own reader; a value the plugin cannot take is one clear error before anything runs."""
    from tb_gpuinsight.capture.scalars import read_hparams
    from tb_gpuinsight.errors import ConfigError

    run = tmp_path / "hp"
    with tb_gpuinsight.profile(run, worker_name="w", wait=0, warmup=0, active=2, hparams={
            "batch_size": 16, "optimizer": "sgd", "lr": 0.01, "compiled": False}) as prof:
        for _ in range(3):
            torch.randn(16, 32).tanh().sum()
            prof.step()
    assert read_hparams(run) == {"batch_size": 16.0, "optimizer": "sgd", "lr": 0.01, "compiled": False}
    assert PREFIX + "step_time_ms" in read_scalars(run)
    assert read_hparams(tmp_path) == {}
    with pytest.raises(ConfigError, match="hparams"):
        tb_gpuinsight.profile(tmp_path / "bad", hparams={"layers": [1, 2]})
    with pytest.raises(ConfigError, match="scalars"):
        tb_gpuinsight.trace_handler(tmp_path / "bad", hparams={"lr": 0.1}, scalars=False)
