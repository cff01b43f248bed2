"""TensorTrace capture (CPU) and the tensor.trace reader: exact shapes, bytes and names; scope; malformed lines."""
from __future__ import annotations

import io
import os
import threading

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tb_gpuinsight import TensorTrace, read_tensor_trace  # noqa: E402
from tb_gpuinsight.logdir import TENSOR_TRACE, discover, sniff  # noqa: E402
from tb_gpuinsight.capture import tensortrace  # noqa: E402
from tb_gpuinsight.trace.tensortrace import parse_lines, parse_pointer  # noqa: E402


def _capture(fn, **kw):
    out = io.StringIO()
    with TensorTrace(stream=out, **kw):
        fn()
    return parse_lines(out.getvalue().splitlines())


def _records(parsed, kind="call"):
    df = parsed.to_pandas()
    df = df[df["kind"] == kind]
    return [(r.function, r.name, r.shape, int(r.bytes)) for r in df.itertuples()]


def test_matmul_operator_and_method_are_recorded_with_shapes_bytes_names():
    a, b = torch.randn(4, 8), torch.randn(8, 16)

    def body():
        torch.matmul(a, b)
        a @ b
        a.sum()

    parsed = _capture(body)
    assert not parsed.errors
    assert _records(parsed) == [
        ("torch.matmul", "a", "[4, 8]", 128), ("torch.matmul", "b", "[8, 16]", 512),
        ("Tensor.matmul", "a", "[4, 8]", 128), ("Tensor.matmul", "b", "[8, 16]", 512),
        ("Tensor.sum", "a", "[4, 8]", 128),
    ]
    assert _records(parsed, "ret") == [("torch.matmul", "return", "[4, 16]", 256),
                                       ("Tensor.matmul", "return", "[4, 16]", 256), ("Tensor.sum", "return", "[]", 4)]
    df = parsed.to_pandas()
    assert {os.path.abspath(f) for f in df["file"]} == {os.path.abspath(__file__)}  # relative to cwd when under it
    assert int(df["ptr"].map(lambda p: int(p, 16)).iloc[0]) == a.data_ptr()


def test_linear_module_and_sdpa_parameter_names_and_dtypes():
    lin = torch.nn.Linear(8, 3).to(torch.float64)
    x = torch.randn(5, 8, dtype=torch.float64)
    q = torch.randn(2, 4, 16, 32, dtype=torch.float16)

    def body():
        lin(x)
        F.scaled_dot_product_attention(q, key=torch.ones(2, 4, 16, 32, dtype=torch.float16), value=q.clone())

    calls = _records(_capture(body, returns=False))
    assert calls[:4] == [("Linear.forward", "x", "[5, 8]", 320), ("torch.nn.functional.linear", "x", "[5, 8]", 320),
                         ("torch.nn.functional.linear", "weight", "[3, 8]", 192),
                         ("torch.nn.functional.linear", "bias", "[3]", 24)]
    sdpa = [c for c in calls if c[0] == "torch.nn.functional.scaled_dot_product_attention"]
    # q is a caller variable; key and value are temporaries: their keyword names are used.
    assert sdpa == [("torch.nn.functional.scaled_dot_product_attention", "q", "[2, 4, 16, 32]", 8192),
                    ("torch.nn.functional.scaled_dot_product_attention", "key", "[2, 4, 16, 32]", 8192),
                    ("torch.nn.functional.scaled_dot_product_attention", "value", "[2, 4, 16, 32]", 8192)]


def test_positional_parameter_names_for_temporaries_and_lists():
    a = torch.randn(2, 3)
    calls = _records(_capture(lambda: (torch.matmul(a + 0, torch.ones(3, 2)), torch.cat([a, a * 2])), returns=False))
    assert ("torch.matmul", "input", "[2, 3]", 24) in calls and ("torch.matmul", "other", "[3, 2]", 24) in calls
    assert ("torch.cat", "a", "[2, 3]", 24) in calls and ("torch.cat", "tensors[1]", "[2, 3]", 24) in calls


def test_nothing_outside_the_block_and_hooks_restored_on_exception():
    a = torch.randn(3, 3)
    out = io.StringIO()
    torch.matmul(a, a)
    with pytest.raises(ValueError):
        with TensorTrace(stream=out):
            torch.matmul(a, a)
            raise ValueError("boom")
    torch.matmul(a, a)
    torch.nn.Linear(3, 3)(a)
    parsed = parse_lines(out.getvalue().splitlines())
    assert len(parsed) == 3  # two args and one return of the one call inside
    assert torch.overrides._get_current_function_mode_stack() == []
    assert not tensortrace._RECORDERS  # the process-wide module hooks stay installed, idle


def test_compiled_model_stays_compiled_across_recorded_windows():
    """Recording windows around a torch.compile'd model add no graph break and at most one recompile (the function
    mode's presence), however many windows: otherwise Dynamo hits its recompile limit and runs the model eagerly."""
    import torch._dynamo.utils as dynamo_utils

    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), backend="eager")
    x = torch.randn(4, 8)
    model(x)
    for _ in range(12):
        with TensorTrace(stream=io.StringIO()):
            model(x)
    assert not dynamo_utils.counters["graph_break"]
    assert dynamo_utils.counters["stats"]["unique_graphs"] <= 2


def test_nesting_and_threads():
    a = torch.randn(2, 2)
    outer, inner = io.StringIO(), io.StringIO()
    other_thread = threading.Thread(target=lambda: [torch.matmul(a, a) for _ in range(50)])
    with TensorTrace(stream=outer, returns=False):
        torch.mm(a, a)
        other_thread.start()
        with TensorTrace(stream=inner, returns=False):
            torch.matmul(a, a)
        other_thread.join()
        torch.nn.ReLU()(a)
    outer_fns = [c[0] for c in _records(parse_lines(outer.getvalue().splitlines()))]
    inner_fns = [c[0] for c in _records(parse_lines(inner.getvalue().splitlines()))]
    assert inner_fns == ["torch.matmul", "torch.matmul"]
    assert outer_fns == ["torch.mm", "torch.mm", "torch.matmul", "torch.matmul", "ReLU.forward",
                         "torch.nn.functional.relu"]
    tt = TensorTrace(stream=io.StringIO())
    with tt:
        with pytest.raises(RuntimeError):
            tt.start()


def test_stderr_and_directory_outputs_pair_with_discovery(tmp_path, capsys):
    a = torch.randn(2, 2)
    with TensorTrace():
        a.sum()
    assert capsys.readouterr().err.startswith("[call]  ")
    run = tmp_path / "run"
    run.mkdir()
    (run / "w.1700000000000000000.pt.trace.json").write_text('{"traceEvents": []}')
    with TensorTrace(run, worker="w") as tt:
        a.sum()
    with TensorTrace(str(run) + "/", worker="w", stamp=1700000000000000000):
        a.sum()
    assert tt.path == str(run / "w.tensor.trace") and tt.lines == 2
    assert sniff(tt.path).kind == TENSOR_TRACE
    found = discover(tmp_path)[0]
    assert [os.path.basename(e.path) for e in found.tensor_traces] == ["w.tensor.trace"]
    assert [os.path.basename(e.path) for e in found.workers["w"][0].tensor_traces] == [
        "w.1700000000000000000.tensor.trace"]


# ---------------------------------------------------------------------------------------------- reader

GOOD = [
    "[call]  1700000000000000001  torch.Size([4, 32, 4096, 64])  67108864  139872101154816  q  attention  m.py:10",
    "[call]  1700000000000000001  torch.Size([4, 32])  512  0x7f3a00001000  mask  attention  /p/with  space.py:11",
    "[ret]  1700000000000000002  torch.Size([])  4  7f3a00002000  return  attention  m.py",
]


def test_reader_decimal_and_hex_pointers_and_ret_lines(tmp_path):
    path = tmp_path / "x.tensor.trace"
    path.write_text("\n".join(GOOD) + "\n\n")
    parsed = read_tensor_trace(path)
    assert not parsed.errors and len(parsed) == 3 and parsed.lines == 4
    df = parsed.to_pandas()
    assert list(df["kind"]) == ["call", "call", "ret"]
    assert list(df["ptr"]) == [hex(139872101154816), "0x7f3a00001000", "0x7f3a00002000"]
    assert list(df["shape"]) == ["[4, 32, 4096, 64]", "[4, 32]", "[]"]
    assert list(df["numel"]) == [4 * 32 * 4096 * 64, 128, 1]
    assert list(df["file"]) == ["m.py", "/p/with  space.py", "m.py"] and list(df["line"]) == [10, 11, -1]


@pytest.mark.parametrize("line, reason", [
    ("garbage", "expected 8 fields"),
    ("[call]  12  torch.Size([2,x])  8  1  a  f  m.py:1", "bad shape"),
    ("[call]  -5  torch.Size([2])  8  1  a  f  m.py:1", "bad timestamp"),
    ("[call]  1_0  torch.Size([2])  8  1  a  f  m.py:1", "bad timestamp"),
    ("[call]  12  torch.Size([2])  eight  1  a  f  m.py:1", "bad byte count"),
    ("[call]  12  torch.Size([2])  8  0xZZ  a  f  m.py:1", "bad data pointer"),
    ("[call]  12  torch.Size([2])  8  0x1ffffffffffffffff  a  f  m.py:1", "bad data pointer"),
    ("[enter]  12  torch.Size([2])  8  1  a  f  m.py:1", "unknown record kind"),
])
def test_reader_reports_malformed_lines_with_numbers(line, reason):
    parsed = parse_lines([GOOD[0], line, GOOD[1]])
    assert len(parsed) == 2 and parsed.error_count == 1
    assert parsed.errors[0][0] == 2 and reason in parsed.errors[0][1]
    assert list(parsed.to_pandas()["lineno"]) == [1, 3]


def test_pointer_bases():
    assert parse_pointer("255") == 255 and parse_pointer("ff") == 255 and parse_pointer("0xFF") == 255
    assert parse_pointer("-1") is None and parse_pointer("") is None


def test_reader_io_error(tmp_path):
    from tb_gpuinsight.errors import TraceError

    with pytest.raises(TraceError):
        read_tensor_trace(tmp_path / "missing.tensor.trace")


def test_capture_round_trips_through_reader(tmp_path):
    a = torch.randn(3, 5)
    with TensorTrace(tmp_path / "t.tensor.trace") as tt:
        torch.matmul(a, a.t())
    parsed = read_tensor_trace(tt.path)
    # Tensor.t: call a, ret; torch.matmul: call a, call other, ret
    assert not parsed.errors and len(parsed) == 5
    assert set(parsed.to_pandas()["function"]) == {"Tensor.t", "torch.matmul"}


def test_a_new_run_folder_is_created_as_the_readme_shows(tmp_path, monkeypatch):
    """`TensorTrace("runs/my_run")` before the folder exists writes `runs/my_run/{host}_{pid}.tensor.trace`; a
    name with a suffix stays the file itself."""
    import socket

    monkeypatch.chdir(tmp_path)
    with TensorTrace("runs/my_run"):
        torch.ones(2, 2) @ torch.ones(2, 2)
    written = tmp_path / "runs" / "my_run" / f"{socket.gethostname()}_{os.getpid()}.tensor.trace"
    assert written.is_file() and written.read_text().startswith("[")
    with TensorTrace("runs/one.tensor.trace"):
        torch.ones(2) + 1
    assert (tmp_path / "runs" / "one.tensor.trace").is_file()


def test_shapes_report_says_why_it_has_no_tensors():
    import tb_gpuinsight as gi

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bare = gi.shapes(os.path.join(root, "samples", "bert_h100", "h100-node.1751410836000000000.pt.trace.json.gz"))
    assert bare.tensors is None and bare.tensors_note.startswith("no tensor.trace for h100-node.")
    paired = gi.shapes(os.path.join(root, "samples", "cpu_mlp", "cpu-worker.1795250381957840523.pt.trace.json"))
    assert paired.tensors is not None and paired.tensors_note == ""
