"""Execution Trace reader: every schema of the corpus, both layouts, and one-line errors for bad input."""
from __future__ import annotations

import gzip
import json

import pytest

from tb_gpuinsight.errors import TraceError
from tb_gpuinsight.trace.et import load_et, schema_supported, tensor_keys

from .corpus import corpus_path, plain_json

# file -> (schema, nodes): the counts the reference JSON reader finds.
ET_FILES = {
    "hta/benchmark_simple_add_et.json.gz": ("1.0.1", 38),
    "param/linear_et.json.gz": ("1.0.1", 931),
    "chakra/1.0.2-chakra.0.0.4.json": ("1.0.2-chakra.0.0.4", 263),
    "param/resnet_1gpu_et.1.0.3-chakra.0.0.4.json.gz": ("1.0.3-chakra.0.0.4", 14391),
    "param/hf_GPT2_et.json.gz": ("1.1.0-chakra.0.0.4", 27156),
    "param/pt2_et.json": ("1.1.1-chakra.0.0.4", 20),
}


@pytest.mark.parametrize("rel", sorted(ET_FILES))
def test_reads_every_corpus_schema(rel):
    path = corpus_path(rel)
    schema, count = ET_FILES[rel]
    et = load_et(path)
    ref = plain_json(path)
    assert (et.schema, len(et)) == (schema, count) == (ref["schema"], len(ref["nodes"]))
    # Every node but the process node has its parent; fields from `attrs` land in the same columns as 1.0.1's.
    assert (et.parent < 0).sum() == 1
    assert (et.cols["tid"] >= 0).all() and (et.cols["rf_id"] >= 0).all()
    by_id = {n["id"]: n for n in ref["nodes"]}
    for row in (0, len(et) // 2, len(et) - 1):
        node = by_id[int(et.ids[row])]
        assert et.names[row] == node["name"]
        values = node["inputs"] if isinstance(node["inputs"], list) else node["inputs"]["values"]
        assert et.inputs[row].values == values


def test_attrs_and_tensors():
    et = load_et(corpus_path("param/pt2_et.json"))
    triton = [r for r, n in enumerate(et.names) if n.startswith("triton_")]
    assert triton and et.attrs[triton[0]]["kernel_backend"] == "triton"
    assert et.inputs[triton[0]].strides is not None
    simple = load_et(corpus_path("hta/benchmark_simple_add_et.json.gz"))
    row = simple.names.index("aten::uniform_")
    assert tensor_keys(simple.inputs[row]) == [(6, 7)]


def _write(path, obj, gz=False):
    data = json.dumps(obj).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("obj, reason", [
    ({"schema": "2.0.0", "nodes": []}, "unsupported Execution Trace schema '2.0.0'"),
    ({"schema": "1.0.1"}, "no 'nodes' list"),
    ({"schema": "1.0.1", "nodes": [{"name": "x"}]}, "not a valid Execution Trace"),
    ({"traceEvents": []}, "no 'nodes' list"),
])
def test_bad_input_is_one_line(tmp_path, obj, reason):
    with pytest.raises(TraceError) as err:
        load_et(_write(tmp_path / "bad.et.json", obj))
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_truncated_and_corrupt(tmp_path):
    data = json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1, "name": "a"}] * 3}).encode()
    (tmp_path / "cut.json").write_bytes(data[:30])
    with pytest.raises(TraceError, match="truncated"):
        load_et(tmp_path / "cut.json")
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(data)[:20])
    with pytest.raises(TraceError, match="gzip"):
        load_et(tmp_path / "cut.json.gz")
    with pytest.raises(TraceError, match="no such file"):
        load_et(tmp_path / "missing.json")


def test_schema_versions():
    assert all(schema_supported(s) for s in ("1.0.1", "1.0.2-chakra.0.0.4", "1.0.3-chakra.0.0.4", "1.1.0-chakra.0.0.4",
                                             "1.1.1-chakra.0.0.4"))
    assert not any(schema_supported(s) for s in ("", "1.0", "1.2.0", "1.0.10"))


def test_self_parent_and_cycles_become_roots(tmp_path):
    nodes = [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "parent": 1},
             {"id": 2, "name": "a", "parent": 3}, {"id": 3, "name": "b", "parent": 2}]
    et = load_et(_write(tmp_path / "loop.json", {"schema": "1.0.1", "nodes": nodes}, gz=True))
    assert et.parent[0] == -1 and sorted(et.parent.tolist()).count(-1) == 2
