"""Our per-op FLOPs and bytes against AMD TraceLens's published per-op reports for six corpus traces (one a graph replay joined with its capture): agreement
within 1 % where the oracle notes say the peer is right, explicit disagreement (ours = first principles) where they
say it is wrong. See tests/oracle.py for the join and the expectations; benchmarks/oracle.py prints the table."""
from __future__ import annotations

import pytest

from .oracle import AGREE, CLASSES, NOT_COMPARED, ORACLES, PEER_WRONG, TRACES, agreement_share, available, checks_for


@pytest.fixture(scope="module")
def checks():
    if not available():
        pytest.skip("TraceLens oracle reports or their corpus traces not found (set TB_GPUINSIGHT_CORPUS)")
    out = []
    for name in TRACES:
        mine, unjoined = checks_for(name)
        assert not unjoined, f"{name}: peer rows that joined no op of ours: {unjoined}"
        out += mine
    return out


def test_every_corpus_trace_with_a_peer_report_is_checked(checks):
    """A peer report added to the oracles folder is joined too, never silently left out."""
    reports = {d.name for d in ORACLES.iterdir() if (d / "unified_perf_summary.csv").is_file()}
    assert reports and reports == set(TRACES)
    assert {c.trace for c in checks} == set(TRACES)


@pytest.mark.parametrize("cls", CLASSES)
def test_class_matches_the_oracle_notes(checks, cls):
    mine = [c for c in checks if c.cls == cls]
    assert any(c.outcome != NOT_COMPARED for c in mine), f"no {cls} row compared"
    bad = [c.describe() for c in mine if c.outcome == "unexpected"]
    assert not bad, "\n".join(bad)


def test_every_class_the_notes_name_is_exercised(checks):
    """GEMM, attention (causal included), convolution and elementwise agree; norm bytes, memcpy copies and
    triton kernels disagree as the notes say."""
    outcomes = {(c.cls, c.metric, c.outcome) for c in checks}
    for cls in ("GEMM", "attention", "convolution", "elementwise"):
        assert (cls, "flops", AGREE) in outcomes and (cls, "bytes", AGREE) in outcomes, cls
    assert ("norm", "flops", AGREE) in outcomes
    assert ("norm", "bytes", "disagree as expected") in outcomes
    assert ("memcpy copy_", "bytes", "disagree as expected") in outcomes
    assert ("triton", "flops", "disagree as expected") in outcomes
    assert ("MoE", "flops", "disagree as expected") in outcomes  # the peer assumes intermediate = hidden
    causal = [c for c in checks if c.cls == "attention" and c.metric == "flops" and "Qwen" in c.trace]
    assert causal and all(c.outcome == AGREE for c in causal)  # the peer counts only the unmasked half


def test_peer_wrong_checks_hold_our_first_principles_value(checks):
    wrong = [c for c in checks if c.expect == PEER_WRONG]
    assert wrong
    for c in wrong:
        assert c.ours == pytest.approx(c.first_principles, rel=1e-9) if c.first_principles is not None \
            else c.ours is None, c.describe()
        assert c.peer is not None and c.ours != pytest.approx(c.peer, rel=1e-6), c.describe()


@pytest.mark.parametrize("metric,rel,floor", [("flops", 0.01, 0.995), ("bytes", 0.10, 0.985), ("bytes", 0.01, 0.985)])
def test_time_weighted_agreement_holds_its_floor(checks, metric, rel, floor):
    """Weighted by the peer's kernel time, where the peer is right and both give a figure."""
    share, total = agreement_share(checks, metric, rel)
    assert total > 0
    assert share >= floor, f"{metric} within {rel:.0%} on {share:.2%} of {total / 1e3:.1f} ms (floor {floor:.1%})"
