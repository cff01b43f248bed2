"""Helpers for the real-trace corpus in ../shared/traces, skipped with a clear message when absent."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("TB_GPUINSIGHT_CORPUS", ROOT.parent / "shared" / "traces"))


def corpus_files():
    """Every trace file of the corpus (empty when the corpus folder is absent); not the manifest, vLLM's capture
    index (`execution_details.json`, which names capture traces and is none itself) nor the CUDA memory snapshots
    (pickles, read by the snapshot reader and its own tests)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*")
                  if p.is_file() and p.name not in ("MANIFEST.md", "execution_details.json")
                  and not p.name.endswith((".pickle", ".pickle.gz")))


def need_corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"real-trace corpus not found at {CORPUS} (set TB_GPUINSIGHT_CORPUS)")


def corpus_path(rel: str) -> Path:
    need_corpus()
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"{rel} not in the corpus")
    return path


def plain_json(path: Path):
    """The stdlib's reading of a file, as the independent reference."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return json.load(f)


def corpus_logdir(tmp_path: Path, rel: str, run: str) -> Path:
    """A logdir under `tmp_path` whose one run, `run`, is the corpus folder `rel` (linked, never copied)."""
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(corpus_path(rel), logdir / run)
    return logdir
