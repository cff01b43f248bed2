"""Every CLI command over hostile inputs: a short fixed-seed fuzz pass (benchmarks/fuzz.py runs the long one), each
targeted case of tests/fuzz_cases.py through every command, and the three cases that once crashed the CLI again
(a numSms of 10**400 in `analyze`, a baseTimeNanoseconds of 10**400 in `info`, durations of 1e308 in `diff`) as
real processes. The only outcomes allowed: exit 0, or exit 2 with one line on stderr."""
from __future__ import annotations

import json
import logging
import os
import random
from typing import Dict, List, Tuple

import pytest

from tests.fuzz_cases import HEADER_CASES, HUGE, WHOLE_FILES, Special
from tests.fuzz_cli import (CLI_COMMANDS, DOCUMENTED_OUTCOMES, EXIT_0, CliFuzz, alarms, cli_commands, run_cli,
                            run_cli_subprocess)
from tests.test_fuzz import SAMPLES, _dump, _write_group, make_case, seeds
from tests.test_hardening import _mm_trace

STEM = "w.1700000000000000000"


def test_cli_fuzz_every_command(tmp_path):
    """A short fixed-seed pass of every CLI command over mutated traces, ETs and tensor.traces; every fourth run
    is repeated as a real process."""
    logging.getLogger("tb_gpuinsight").setLevel(logging.CRITICAL)
    failures: List[str] = []
    runs = int(os.environ.get("TB_GPUINSIGHT_CLI_FUZZ_RUNS", str(2 * len(CLI_COMMANDS))))
    rng = random.Random(int(os.environ.get("TB_GPUINSIGHT_FUZZ_SEED", "12")))
    groups = seeds()
    fuzz = CliFuzz(tmp_path, report=failures.append, subprocess_every=4)
    with alarms():
        for case in range(runs):
            label, group = groups[case % len(groups)]
            fuzz.run(case, label, make_case(group, rng, rename=True), rng.choice)
    assert not failures, failures
    ran = {c for c, counts in fuzz.table.items() if sum(counts.values())}
    assert ran == set(CLI_COMMANDS), set(CLI_COMMANDS) - ran
    assert fuzz.subprocess_runs >= runs // 4


def _group() -> Dict[str, bytes]:
    """The CPU MLP sample's trace, ET and tensor.trace (small: every command runs in a blink), as one worker's."""
    files = sorted((SAMPLES / "cpu_mlp").iterdir())
    stem = files[0].name.split(".")[0] + "." + files[0].name.split(".")[1]
    return {p.name.replace(stem, STEM): p.read_bytes() for p in files if p.name.startswith(stem)}


def _targeted() -> Dict[str, Dict[str, object]]:
    """case name -> the files of the group with that case applied to its trace."""
    group = _group()
    name = f"{STEM}.pt.trace.json"
    cases: Dict[str, Dict[str, object]] = {}
    for header in (h for h in HEADER_CASES if "10 MB" not in h):  # a 10 MB name: the long fuzz (seconds a case)
        doc = json.loads(group[name])
        HEADER_CASES[header](doc)
        cases[header] = {**group, name: _dump(doc).replace(b'"@@HUGE@@"', HUGE.encode())}
    for data in WHOLE_FILES[:3]:
        cases[data.decode()] = {**group, name: data}
    for kind in Special.KINDS:
        cases[kind] = {**group, name: Special(kind, group[name][:65536])}
        cases[f"{kind} beside"] = {**group, f"v.{name[2:]}": Special(kind, group[name][:65536])}
    cases["invalid UTF-8 name"] = {f"w\udcff.{k[2:]}": v for k, v in group.items()}
    return cases


_CASES = _targeted()


@pytest.mark.parametrize("case", sorted(_CASES))
def test_every_command_answers_each_targeted_case(tmp_path, case):
    """The probe's reproducers and the filesystem oddities through every argv of every command: exit 0 or 2
    with one line. An insane header number or duration is dropped at read time: the trace still analyses."""
    folder, out = tmp_path / "fz", tmp_path / "out"
    _write_group(folder, _CASES[case])
    out.mkdir()
    reference = tmp_path / "ref" / "r.pt.trace.json"
    _write_group(reference.parent, {reference.name: _group()[f"{STEM}.pt.trace.json"]})
    failures = []
    with alarms():
        for command, argv in _first_of_each(cli_commands(folder, reference, out)):
            outcome, detail = run_cli(argv)
            if outcome not in DOCUMENTED_OUTCOMES and not (command == "summarize" and detail.startswith("exit 1,")):
                failures.append((command, argv[1:], outcome, detail))
            if case in HEADER_CASES and command in ("info", "analyze", "overview", "diff", "critical-path"):
                assert outcome == EXIT_0, (command, detail)  # the insane number goes, the trace stays
    assert not failures, failures


def _first_of_each(options: List[Tuple[str, List[str]]]) -> List[Tuple[str, List[str]]]:
    """One argv per command (its first variant): every command, at a CI budget."""
    seen: Dict[str, List[str]] = {}
    for command, argv in options:
        seen.setdefault(command, argv)
    return list(seen.items())


@pytest.mark.parametrize("command, mutation", [("analyze", "numSms 401 digits"),
                                               ("info", "baseTimeNanoseconds 401 digits"),
                                               ("diff", "durations 1e308")])
def test_cases_that_once_crashed_the_cli_answer_as_a_process(tmp_path, command, mutation):
    """Run as `tb-gpuinsight` itself on a trace of one aten::mm and its kernel: exit 0 and no traceback (the three
    regressions found after hardening)."""
    path = _mm_trace(tmp_path)
    doc = json.loads(path.read_bytes())
    HEADER_CASES[mutation](doc)
    path.write_bytes(_dump(doc).replace(b'"@@HUGE@@"', HUGE.encode()))
    argv = [command, str(path)] + ([str(path)] if command == "diff" else [])
    assert run_cli_subprocess(argv) == (EXIT_0, "")
