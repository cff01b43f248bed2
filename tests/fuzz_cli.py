"""The CLI side of the fuzz: every command of `tb-gpuinsight` over the mutated cases of tests/test_fuzz.py, run in
this process (`cli.main` with an argv, its streams captured) and, for a sample, as a real subprocess too.

The documented outcomes are exit 0, and exit 2 with one line on stderr; `summarize` alone may exit 1 (some trace of
its logdir failed, each listed on stdout). A traceback, a multi-line error, a raw control character in text output
(a trace's names must reach a terminal escaped), a partial output file left behind, or any other exit is a failure:
reported, and with `saved`, its files and argv kept under saved/<case>-<command>/ (benchmarks/fuzz.py). Every other
run repeated as a process writes its stdout to /dev/full: it must end in one line and exit 1 (or as documented).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from tests.test_fuzz import CASE_TIMEOUT_S, ROOT, Hang, _where, _write_group, make_case, seeds

# CLI outcomes: the documented ones are exit 0 and exit 2 with one line on stderr.
# `summarize` alone exits 1 when some trace of its logdir failed (each listed on stdout): a batch's partial success.
EXIT_0, EXIT_1, EXIT_2, TRACEBACK, NOT_ONE_LINE, RAW_CONTROL, OTHER = (
    "exit 0", "exit 1", "exit 2", "traceback", "not 1 line", "raw control", "other")
OUTCOMES = (EXIT_0, EXIT_2, EXIT_1, TRACEBACK, NOT_ONE_LINE, RAW_CONTROL, OTHER)
# What a terminal acts on: C0 controls but tab and newline, DEL, and C1 (as UTF-8), in text (not CSV) output.
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
DOCUMENTED_OUTCOMES = {EXIT_0, EXIT_2}


CLI_COMMANDS = ("info", "ls", "analyze", "augment", "diff", "shapes", "overview", "memory", "timeline",
                "critical-path", "graph", "ranks", "summarize", "export-parquet")


def cli_commands(folder: Path, reference: Path, out: Path) -> List[Tuple[str, List[str]]]:
    """(command, argv) for every CLI command over the case's files (the trace, its ET, its tensor.trace, the run).
    `export-parquet` reads the store the `summarize` before it wrote."""
    def first(pattern: str) -> Optional[str]:
        hit = next((p for p in sorted(folder.iterdir()) if pattern in p.name), None)
        return None if hit is None else str(hit)

    trace, et, tt = first(".pt.trace.json"), first(".et.json"), first(".tensor.trace")
    store = str(out / "store")
    cmds: List[Tuple[str, List[str]]] = [("ls", ["ls", str(folder)]), ("ranks", ["ranks", str(folder)]),
                                         ("summarize", ["summarize", str(folder), "--store", store, "--workers", "0"]),
                                         ("export-parquet", ["export-parquet", store, str(out / "parquet")])]
    if trace:
        cmds += [("info", ["info", trace]), ("analyze", ["analyze", trace, "--format", "json"]),
                 ("analyze", ["analyze", trace, "--by", "op", "--format", "csv"]),
                 ("augment", ["augment", trace, str(out / "augmented.json")]),
                 ("diff", ["diff", trace, str(reference)]), ("diff", ["diff", str(folder), str(folder), "--by", "op"]),
                 ("shapes", ["shapes", trace]), ("overview", ["overview", trace]), ("memory", ["memory", trace]),
                 ("timeline", ["timeline", trace, "--json", str(out / "timeline.json"), "--csv", str(out / "t.csv")]),
                 ("critical-path", ["critical-path", trace]), ("critical-path", ["critical-path", str(folder), "--json"])]
    if et:
        cmds += [("info", ["info", et]), ("graph", ["graph", et, "--json", str(out / "graph.json")]
                                          + (["--trace", trace] if trace else []))]
    if tt:
        cmds.append(("shapes", ["shapes", tt]))
    return cmds


def run_cli(argv: List[str]) -> Tuple[str, str]:
    """(outcome, detail) of one CLI run in this process: what escaped `main`, or its exit status and stderr."""
    from tb_gpuinsight.cli import main

    # Streams that encode strictly as UTF-8, like a terminal's: text that cannot be written fails here too.
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
            err.flush()
    except (Hang, KeyboardInterrupt):
        raise
    except SystemExit as exc:  # argparse
        return OTHER, f"SystemExit({exc.code})"
    except BaseException as exc:  # noqa: BLE001  (what the fuzzer hunts)
        return TRACEBACK, f"{type(exc).__name__} at {_where(exc)}: {str(exc)[:200]}"
    text = err.buffer.getvalue() + (b"" if "csv" in argv else out.buffer.getvalue())  # CSV keeps values raw
    raw = _CONTROL.search(text)
    if raw:
        return RAW_CONTROL, f"{raw.group()!r} at byte {raw.start()}: {text[max(0, raw.start() - 40):raw.end() + 40]!r}"
    return _outcome(code, err.buffer.getvalue())


def run_cli_subprocess(argv: List[str], full_disk: bool = False) -> Tuple[str, str]:
    """(outcome, detail) of the same run as `tb-gpuinsight` in a process of its own (this checkout's code); with
    `full_disk`, its stdout is /dev/full (every write fails with ENOSPC): one line and exit 1 is documented too."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open("/dev/full", "wb") if full_disk else contextlib.nullcontext(subprocess.PIPE) as stdout:
        try:
            done = subprocess.run([sys.executable, "-m", "tb_gpuinsight.cli", *argv], stdout=stdout,
                                  stderr=subprocess.PIPE, env=env, timeout=CASE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return OTHER, f"hang (over {CASE_TIMEOUT_S} s)"
    if b"Traceback (most recent call last)" in done.stderr:
        return TRACEBACK, done.stderr.decode("utf-8", "replace").strip().splitlines()[-1][:200]
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    if full_disk and done.returncode == 1 and lines and "cannot write the output" in lines[-1]:  # after its notes
        return EXIT_0, "write failure said in one line"
    return _outcome(done.returncode, done.stderr)


def _outcome(code: int, stderr: bytes) -> Tuple[str, str]:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    if code == 0:
        return EXIT_0, ""
    detail = f"exit {code}, {len(lines)} stderr lines: {' | '.join(lines)[:200]}"
    if code == 2:
        return (EXIT_2, lines[0][:200]) if len(lines) == 1 else (NOT_ONE_LINE, detail)
    return OTHER, detail


class CliFuzz:
    """Runs cases through the CLI, one command per case (the least run so far, so that every command gets its
    share), and keeps the tally: {command: {outcome: count}}, the slowest run, the subprocess checks (every
    `subprocess_every`-th run is repeated as a real process and must also end documented)."""

    def __init__(self, work: Path, saved: Optional[Path] = None, report: Callable[[str], None] = lambda line: None,
                 subprocess_every: int = 0) -> None:
        self.work, self.saved, self.report, self.subprocess_every = work, saved, report, subprocess_every
        self.reference = work / "ref" / "r.1700000000000000000.pt.trace.json"
        group = seeds()[0][1]
        _write_group(self.reference.parent, {self.reference.name: group[next(iter(group))]})
        self.table: Dict[str, Dict[str, int]] = {c: dict.fromkeys(OUTCOMES, 0) for c in CLI_COMMANDS}
        self.slowest: Tuple[float, str] = (0.0, "")
        self.subprocess_runs = self.subprocess_failures = 0

    def run(self, case: int, label: str, files: Dict[str, object], pick: Callable[[list], object]) -> None:
        """One case (`files`, from make_case) through one command; `pick` chooses among its argv variants."""
        folder, out = self.work / "case" / "fz", self.work / "out"
        _write_group(folder, files)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        options = cli_commands(folder, self.reference, out)
        available = [c for c in CLI_COMMANDS if any(c == cmd for cmd, _ in options)]
        command = min(available, key=lambda c: sum(self.table[c].values()))
        argv = pick([a for cmd, a in options if cmd == command])
        if command == "export-parquet":
            run_cli(next(a for cmd, a in options if cmd == "summarize"))
        start = time.perf_counter()
        outcome, detail = _timed(lambda: run_cli(argv))
        self.slowest = max(self.slowest, (time.perf_counter() - start, command))
        partial = [p.name for p in out.rglob("*") if p.name.endswith(".tmp")]
        if partial and outcome in DOCUMENTED_OUTCOMES | {OTHER}:
            outcome, detail = OTHER, f"partial file left: {partial[:3]}"
        self._record(case, label, command, argv, folder, outcome, detail)
        if self.subprocess_every and sum(sum(c.values()) for c in self.table.values()) % self.subprocess_every == 0:
            self.subprocess_runs += 1
            full_disk = self.subprocess_runs % 2 == 0
            outcome, detail = _timed(lambda: run_cli_subprocess(argv, full_disk))
            if outcome not in DOCUMENTED_OUTCOMES and not (command == "summarize" and detail.startswith("exit 1,")):
                self.subprocess_failures += 1
                self.report(f"case {case} ({label}) {command} as a process: {outcome}: {detail}")

    def _record(self, case: int, label: str, command: str, argv: List[str], folder: Path, outcome: str,
                detail: str) -> None:
        if command == "summarize" and outcome == OTHER and detail.startswith("exit 1,"):
            outcome = EXIT_1
        self.table[command][outcome] += 1
        if outcome not in DOCUMENTED_OUTCOMES | {EXIT_1}:
            self.report(f"case {case} ({label}) {command}: {outcome}: {detail}")
            if self.saved is not None:
                _save_reproducer(self.saved / f"{case:05d}-{command}", folder, argv, outcome, detail)


def _timed(run: Callable[[], Tuple[str, str]]) -> Tuple[str, str]:
    """`run()` under the case's time limit: a hang is an outcome, not a stuck fuzz."""
    signal.alarm(CASE_TIMEOUT_S)
    try:
        return run()
    except Hang:
        return OTHER, f"hang (over {CASE_TIMEOUT_S} s)"
    finally:
        signal.alarm(0)


@contextlib.contextmanager
def alarms() -> Iterator[None]:
    """SIGALRM raises Hang meanwhile (and deep inputs may recurse further)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)


def _alarm(signum, frame):
    raise Hang()


def fuzz_cli(cases: int, seed: int, work: Path, saved: Optional[Path] = None,
             report: Callable[[str], None] = lambda line: None) -> Dict[str, Dict[str, int]]:
    """`cases` CLI runs, each a fresh mutation of a seed group through one command: {command: {outcome: count}}."""
    import random

    rng = random.Random(seed)
    groups = seeds()
    fuzz = CliFuzz(work, saved, report)
    with alarms():
        for case in range(cases):
            label, group = groups[case % len(groups)]
            fuzz.run(case, label, make_case(group, rng, rename=True), rng.choice)
    return fuzz.table


def _save_reproducer(dest: Path, folder: Path, argv: List[str], outcome: str, detail: str) -> None:
    """The case's regular files, and the command with its outcome (paths under the case folder rewritten to ./);
    FIFOs and sparse files are named in COMMAND.txt, not copied."""
    shutil.rmtree(dest, ignore_errors=True)
    left: List[str] = []

    def ignore(directory: str, names: List[str]) -> List[str]:
        out = []
        for n in names:
            path = os.path.join(directory, n)
            if os.path.islink(path) or os.path.isdir(path):
                continue  # copied as they are (a link as a link)
            if not os.path.isfile(path) or os.path.getsize(path) > 100 << 20:
                out.append(n)
                left.append(ascii(n))
        return out

    shutil.copytree(folder, dest, symlinks=True, ignore=ignore)
    line = " ".join(a.replace(str(folder), ".") for a in argv)
    (dest / "COMMAND.txt").write_text(f"tb-gpuinsight {line}\n{outcome}: {detail}\nnot copied: {left}\n",
                                      encoding="utf-8", errors="backslashreplace")


