"""The reader's tables stay what they were: every column of every table, decoded (string categories, shape and
collective codes as the values they stand for), and what the load counted (categories, coerced and dropped
fields, malformed events, time range), on real traces of every era and vendor and on a real trace with malformed
fields, against digests recorded before the reader was made faster (tests/data/reader_golden.json).

A column new to a table is allowed (it has no recorded digest); a recorded one that changes or disappears fails.
Regenerate only on purpose: `python -m tests.test_reader_golden` (it writes the digests of the current code).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

import tb_gpuinsight

from .corpus import corpus_path

GOLDEN = Path(__file__).parent / "data" / "reader_golden.json"
TRACES = ["tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "kineto/worker0.1623143089861.pt.trace.json.gz", "hta/inference_rank_1.json.gz",
          "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "hta/df_index_resolver.json.gz",
          "tracelens/vllm_decode_full__graph_execution.json.gz", "tracelens/mi210__gpu_only_trace.json.gz"]
MALFORMED = "malformed:hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def malformed_copy(rel: str, out_dir: Path) -> Path:
    """A real trace with malformed fields, as ROCm and broken writers make them: copy sizes written as strings
    ("bytes": "1"), a kernel's correlation that is no number, a name that is a number, an entry that is no object."""
    with gzip.open(corpus_path(rel), "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    for e in copies[:2]:
        e["args"]["bytes"] = str(e["args"].get("bytes", 4096))
    kernels[0]["args"]["correlation"] = "eleven"
    kernels[1]["name"] = 12345
    events.insert(len(events) // 2, "not an event")
    path = out_dir / "malformed.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


def _digest(values) -> str:
    return hashlib.sha256(repr(values).encode()).hexdigest()[:24]


def digests(trace) -> Dict[str, str]:
    """table.column -> digest of its decoded values; meta.<field> -> digest of what the load counted."""
    out = {}
    for name, table in trace.tables().items():
        for col, arr in table.columns.items():
            if col in table.strings:
                values = table.values(col)
            elif col == "shape":
                values = [trace.shapes[c] if c >= 0 else None for c in arr.tolist()]
            elif col == "comm":
                values = [trace.comms[c] if c >= 0 else None for c in arr.tolist()]
            else:
                values = (str(arr.dtype), np.nan_to_num(arr, nan=-7.25).tobytes() if arr.dtype.kind == "f"
                          else arr.tobytes())
            out[f"{name}.{col}"] = _digest(values)
    m = trace.meta
    for key in ("event_count", "malformed_events", "malformed_args", "coerced_fields", "dropped_fields",
                "category_counts", "start_us", "end_us", "era", "vendor", "record_shapes", "has_external_ids"):
        value = getattr(m, key)
        out[f"meta.{key}"] = _digest(sorted(value.items()) if isinstance(value, dict) else value)
    return out


def _load(key: str, tmp: Path):
    if key.startswith("malformed:"):
        return tb_gpuinsight.load(malformed_copy(key.split(":", 1)[1], tmp))
    return tb_gpuinsight.load(corpus_path(key))


@pytest.mark.parametrize("key", TRACES + [MALFORMED])
def test_tables_equal_the_recorded_ones(key, tmp_path):
    expected = json.loads(GOLDEN.read_text())[key]
    got = digests(_load(key, tmp_path))
    changed = sorted(k for k, v in expected.items() if got.get(k) != v)
    assert not changed, f"{key}: changed {changed}"


def test_the_malformed_copy_is_read_leniently(tmp_path):
    meta = _load(MALFORMED, tmp_path).meta
    assert meta.coerced_fields.get("arg 'bytes': string read as number") == 2
    assert meta.malformed_events == 1 and meta.malformed_args >= 1


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        GOLDEN.write_text(json.dumps({k: digests(_load(k, Path(d))) for k in TRACES + [MALFORMED]}, indent=1,
                                     sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({os.path.getsize(GOLDEN)} bytes)")
