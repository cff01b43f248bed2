"""Cross-check against a peer: AMD TraceLens's published per-op reports (../shared/oracles/tracelens) for five corpus
traces, joined to our per-op FLOPs and bytes by op name + Input Dims + Input type + Concrete Inputs.

Each joined (row, metric) becomes a `Check` with what the oracle notes (../shared/oracles/README.md) expect:
- "agree": the peer is right; ours must be within 1 % of it;
- "peer wrong": ours must equal the first-principles value computed here (independently of estimate/) and differ
  from the peer's (LayerNorm bytes, copy_ that is only a D2H/H2D memcpy, Inductor triton kernels, the MoE GEMMs of
  triton_kernels, which the peer sizes by assuming intermediate = hidden).
A check is "not compared" (with the reason) where the peer publishes no figure or neither side can know it.
Used by tests/test_oracle.py and benchmarks/oracle.py (the agreement table).
"""
from __future__ import annotations

import ast
import csv
import functools
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .corpus import CORPUS

ORACLES = CORPUS.parent / "oracles" / "tracelens"
TRACES = (
    "h100__Falconsai_nsfw_image_detection__1016002",
    "h100__Qwen_Qwen1.5-0.5B-Chat__1016005",
    "h100__facebook_timesformer-base-finetuned-k400__1016002",
    "h100__gaunernst_bert-small-uncased__1016001",
    "torch_compile_triton__trace",
    "vllm_decode_full__graph_execution",
)
# A graph replay's report also joins the ops of the trace recorded while the graph was captured (the peer merges
# the two as we do: replayed kernels take the captured ops and shapes; eager ops stay in the replay trace).
OP_SOURCE = {"vllm_decode_full__graph_execution":
             "vllm_decode_full__capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"}
CLASSES = ("GEMM", "attention", "convolution", "elementwise", "norm", "memcpy copy_", "triton", "MoE")
AGREE, PEER_WRONG, NOT_COMPARED = "agree", "peer wrong", "not compared"
TOLERANCE = 0.01
MIB = 2 ** 20
# Pure data movement: no FLOPs by design (estimate/pointwise.py); the peer counts 1 per element.
DATA_MOVEMENT = ("aten::copy_", "aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d")
_ITEMSIZE = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "long int": 8, "int": 4, "bool": 1,
             "c10::Float8_e4m3fn": 1, "unsigned char": 1, "signed char": 1, "short int": 2}
_CLASS_OF_CATEGORY = {"GEMM": "GEMM", "SDPA_fwd": "attention", "SDPA_bwd": "attention", "CONV_fwd": "convolution",
                      "CONV_bwd": "convolution", "NORM_fwd": "norm", "NORM_bwd": "norm", "elementwise": "elementwise",
                      "reduce": "elementwise", "triton": "triton", "RMSNorm": "norm", "MoE_unfused": "MoE"}
# The peer's pseudo ops for triton_kernels' MoE GEMMs (vllm::moe_forward, whose expert weights are not arguments),
# joined to our kernels of that name in the replay merged with its capture. The peer assumes intermediate = hidden;
# the sub-ops the capture recorded say 32 tokens x top-4 = 128 rows, K = 3072, N = 5888 (gate and up of 2944, the
# swiglu output), 32 experts of mxfp4 weights two a byte with one scale byte per 32: kernel, FLOPs, bytes per call.
_MOE_UP = 32 * 1536 * 5888 + 32 * 3072 * 5888 // 32 + 32 * 3072 * 2 + 128 * 2944 * 2
_MOE_DOWN = 32 * 1472 * 3072 + 32 * 2944 * 3072 // 32 + 128 * 2944 * 2 + 128 * 3072 * 2
MOE_KERNELS = {
    "pseudo_op::moe_triton_unfused_up": ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
                                         2 * 128 * 5888 * 3072 + 2 * 128 * 2944, _MOE_UP),
    "pseudo_op::moe_triton_unfused_down": ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
                                           2 * 128 * 3072 * 2944, _MOE_DOWN)}
# Inductor kernels whose argument order decides every role (in_out_ptr* first, then in_ptr*, then out_ptr*; an
# output has xnumel elements): bytes by hand. constant_pad_nd(in [32, 2880] bf16) -> out [32, 3072], xnumel 98304:
# the first buffer is smaller than the iteration space, so it is an input and nothing is updated in place.
TRITON_ROLES = {"triton_poi_fused_constant_pad_nd_moe_forward_0": ((32 * 2880 + 32 * 3072) * 2,
                                                                   "pad: input read once, padded output written once")}


@dataclass
class Check:
    """One metric of one peer row next to ours."""
    trace: str
    op: str
    dims: str
    cls: str
    metric: str  # "flops" or "bytes", per call
    ours: Optional[float]
    peer: Optional[float]
    expect: str  # AGREE, PEER_WRONG or NOT_COMPARED
    first_principles: Optional[float] = None
    note: str = ""
    time_us: float = 0.0  # the peer's kernel time of this op class: weights the agreement shares

    @property
    def outcome(self) -> str:
        """"agree", "disagree as expected", "not compared" or "unexpected"."""
        if self.expect == NOT_COMPARED:
            return NOT_COMPARED
        if self.expect == AGREE:
            return AGREE if _close(self.ours, self.peer, TOLERANCE) else "unexpected"
        right = self.ours == self.first_principles if self.ours is None or self.first_principles is None else \
            _close(self.ours, self.first_principles, 1e-9)
        return "disagree as expected" if right and not _close(self.ours, self.peer, 1e-6) else "unexpected"

    def describe(self) -> str:
        return (f"{self.trace[:30]} {self.op} {self.dims[:60]} {self.metric}: ours {self.ours} peer {self.peer} "
                f"first principles {self.first_principles} ({self.expect}) {self.note}")


def _close(a: Optional[float], b: Optional[float], rel: float) -> bool:
    if a is None or b is None:
        return False
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0) or (a == b == 0)


def peer_rows(trace: str) -> List[Dict[str, str]]:
    with open(ORACLES / trace / "unified_perf_summary.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _freeze(x: Any) -> Any:
    return tuple(_freeze(i) for i in x) if isinstance(x, (list, tuple)) else x


def _number(text: str) -> Optional[float]:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def checks_for(trace_name: str) -> Tuple[List[Check], List[str]]:
    """Every check of one trace, and the peer rows (of the compared classes) that joined no op of ours."""
    import tb_gpuinsight
    from tb_gpuinsight.estimate.flops import estimate_op

    sources = []
    for name in (f"{trace_name}.json.gz",) + ((OP_SOURCE[trace_name],) if trace_name in OP_SOURCE else ()):
        loaded = tb_gpuinsight.load(CORPUS / "tracelens" / name)
        analysed = tb_gpuinsight.analyze(loaded, execution_traces=[], capture=[])
        sources.append((loaded, analysed, _op_index(loaded), _memcpys(analysed)))
    checks, unjoined = [], []
    for row in peer_rows(trace_name):
        cls = _CLASS_OF_CATEGORY.get(row["op category"])
        if cls is None:
            continue
        if cls == "MoE":  # pseudo ops: joined by kernel name, not by op
            checks.extend(_moe_checks(trace_name, row))
            continue
        dims, types, concrete = (_freeze(ast.literal_eval(row[k])) for k in ("Input Dims", "Input type",
                                                                             "Concrete Inputs"))
        found = next(((t, e, rows, m) for t, e, index, m in sources
                      for rows in [index.get((row["name"], dims, types, concrete))
                                   or index.get((row["name"], dims, types, None))] if rows), None)
        if found is None:
            unjoined.append(f"{row['name']} {row['Input Dims']}")
            continue
        trace, eff, op_rows, (memcpy_bytes, memcpy_only) = found
        op_row = op_rows[0]
        est = eff.op_estimates.get(op_row)
        if est is None:  # a parent op (convolution, layer_norm...): its children launch the kernels
            est = estimate_op(row["name"], *(_freeze(x) for x in trace.shape(int(trace.ops["shape"][op_row]))))
        peer_flops = _number(row["GFLOPS"])
        peer_bytes = _number(row["Data Moved (MB)"])
        peer_flops = None if peer_flops is None else peer_flops * 1e9
        peer_bytes = None if peer_bytes is None else peer_bytes * MIB
        base = dict(trace=trace_name, op=row["name"], dims=row["Input Dims"],
                    time_us=_number(row["Kernel Time (µs)_sum"]) or 0.0)
        if row["name"] == "aten::copy_" and all(r in memcpy_only for r in op_rows):
            ours = sum(memcpy_bytes[r] for r in op_rows) / len(op_rows)
            checks.append(Check(**base, cls="memcpy copy_", metric="bytes", ours=ours, peer=peer_bytes,
                                expect=PEER_WRONG if peer_bytes is not None else NOT_COMPARED,
                                first_principles=_numel(dims[0]) * _ITEMSIZE[types[0]],
                                note="a D2H/H2D memcpy moves its bytes once over the bus"))
            continue
        metrics = _metric_checks(base, cls, row["name"], dims, types, est, peer_flops, peer_bytes, trace, op_row)
        if row["name"] == "aten::copy_" and peer_bytes is not None:
            _broadcast_copy(metrics[-1], dims, types, row.get("Input Strides", ""))
        checks.extend(metrics)
    return checks, unjoined


def _broadcast_copy(check: Check, dims, types, strides_text: str) -> None:
    """copy_(dst, src) from an expanded src (stride 0 on a dim of size > 1) reads src's stored elements once; the
    peer charges its logical numel."""
    strides = _freeze(ast.literal_eval(strides_text)) if strides_text else ()
    src, src_strides = dims[1], strides[1] if len(strides) > 1 else ()
    if len(src) != len(src_strides) or not any(s == 0 and d > 1 for d, s in zip(src, src_strides)):
        return
    stored = _numel(tuple(d for d, s in zip(src, src_strides) if s != 0))
    check.expect, check.note = PEER_WRONG, "a broadcast (stride-0) source is read once per stored element"
    check.first_principles = _numel(dims[0]) * _ITEMSIZE[types[0]] + stored * _ITEMSIZE[types[1]]


def _metric_checks(base, cls, name, dims, types, est, peer_flops, peer_bytes, trace, op_row) -> List[Check]:
    ours_f, ours_b = est.flops, est.bytes
    if cls == "triton":
        kernel_flop = float(trace.ops["kernel_flop"][op_row])
        kernel_gb = float(trace.ops["kernel_num_gb"][op_row])
        fp_f = None if math.isnan(kernel_flop) else kernel_flop
        fp_b = None if math.isnan(kernel_gb) else kernel_gb * 1e9
        flops = Check(**base, cls=cls, metric="flops", ours=ours_f, peer=peer_flops,
                      expect=PEER_WRONG if peer_flops is not None else NOT_COMPARED,
                      first_principles=fp_f, note="Inductor's kernel_flop when the trace carries it, else unknown")
        if fp_b is None and name in TRITON_ROLES:
            fp_b, roles_note = TRITON_ROLES[name]
        else:
            roles_note = "Inductor's kernel_num_gb" if fp_b is not None else \
                "no kernel_num_gb, and the argument order leaves the in-place buffer open (ours: a lower bound)"
        nbytes = Check(**base, cls=cls, metric="bytes", ours=ours_b, peer=peer_bytes,
                       expect=PEER_WRONG if fp_b is not None else NOT_COMPARED, first_principles=fp_b,
                       note=roles_note)
        return [flops, nbytes]
    flops = Check(**base, cls=cls, metric="flops", ours=ours_f, peer=peer_flops,
                  expect=AGREE if peer_flops is not None else NOT_COMPARED,
                  note="" if peer_flops is not None else "the peer publishes no FLOPs")
    if name in DATA_MOVEMENT:
        flops.expect, flops.note = NOT_COMPARED, "data movement, no arithmetic: we count none, the peer 1 per element"
    if cls == "norm" and name == "aten::layer_norm":
        nbytes = Check(**base, cls=cls, metric="bytes", ours=ours_b, peer=peer_bytes, expect=PEER_WRONG,
                       first_principles=_layer_norm_bytes(dims, types),
                       note="reads x, weight, bias and writes y once")
    else:
        nbytes = Check(**base, cls=cls, metric="bytes", ours=ours_b, peer=peer_bytes,
                       expect=AGREE if peer_bytes is not None else NOT_COMPARED,
                       note="" if peer_bytes is not None else "the peer publishes no bytes")
    return [flops, nbytes]


def _moe_checks(trace_name: str, row: Dict[str, str]) -> List[Check]:
    """The peer's MoE GEMM pseudo op against our kernels of that name (none for a row without a known kernel)."""
    if row["name"] not in MOE_KERNELS:
        return []
    kernel, fp_flops, fp_bytes = MOE_KERNELS[row["name"]]
    acts = _merged(trace_name).activities
    rows = [i for i, code in enumerate(acts["name"].tolist()) if acts.strings["name"][code] == kernel]
    base = dict(trace=trace_name, op=row["name"], dims=row["Input Dims"], cls="MoE",
                time_us=_number(row["Kernel Time (µs)_sum"]) or 0.0, expect=PEER_WRONG,
                note="the peer assumes intermediate = hidden; the capture's sub-ops give the sizes")
    out = []
    for metric, peer, scale, fp in (("flops", row["GFLOPS"], 1e9, fp_flops), ("bytes", row["Data Moved (MB)"], MIB,
                                                                            fp_bytes)):
        values = {float(v) for v in acts[metric][rows].tolist()}
        ours = values.pop() if len(values) == 1 else None  # every call the same, or no single figure
        peer_value = _number(peer)
        out.append(Check(**base, metric=metric, ours=ours, peer=None if peer_value is None else peer_value * scale,
                         first_principles=float(fp)))
    return out


@functools.lru_cache(maxsize=None)
def _merged(trace_name: str):
    """The replay analysed with its capture, as a user gets it (discovered beside the trace)."""
    import tb_gpuinsight

    return tb_gpuinsight.analyze(CORPUS / "tracelens" / f"{trace_name}.json.gz", execution_traces=[])


def _numel(shape: Tuple[int, ...]) -> int:
    return math.prod(shape)


def _layer_norm_bytes(dims, types) -> float:
    """layer_norm(x, normalized_shape, weight, bias): x and y once each, weight and bias once."""
    x, w, b = dims[0], dims[2], dims[3]
    item = _ITEMSIZE[types[0]]
    return 2 * _numel(x) * item + _numel(w) * _ITEMSIZE[types[2]] + _numel(b) * _ITEMSIZE[types[3]]


def _op_index(trace) -> Dict[tuple, List[int]]:
    """(name, dims, types, concrete) and (name, dims, types, None) -> op rows."""
    index: Dict[tuple, List[int]] = {}
    names = trace.ops.values("name")
    for row, code in enumerate(trace.ops["shape"].tolist()):
        if code < 0:
            continue
        dims, types, concrete = (_freeze(x) for x in trace.shape(code))
        index.setdefault((names[row], dims, types, concrete), []).append(row)
        index.setdefault((names[row], dims, types, None), []).append(row)
    return index


def _memcpys(eff) -> Tuple[Dict[int, float], set]:
    """Per op row: the bytes of its memcpy activities, and the ops whose activities are all memcpys."""
    acts = eff.activities
    kinds = acts.strings["kind"]
    per_op: Dict[int, float] = {}
    kinds_of: Dict[int, set] = {}
    for op, kind, nbytes in zip(acts["op"].tolist(), acts["kind"].tolist(), acts["bytes"].tolist()):
        if op < 0:
            continue
        kinds_of.setdefault(op, set()).add(kinds[kind])
        if kinds[kind] == "memcpy":
            per_op[op] = per_op.get(op, 0.0) + nbytes
    return per_op, {op for op, k in kinds_of.items() if k == {"memcpy"}}


def available() -> bool:
    return ORACLES.is_dir() and all((CORPUS / "tracelens" / f"{t}.json.gz").exists() for t in TRACES)


def agreement_share(checks: List[Check], metric: str, rel: float) -> Tuple[float, float]:
    """Of the kernel time where the peer is right and both sides give a figure: the share within `rel` of the
    peer, and that time (us)."""
    both = [c for c in checks if c.metric == metric and c.expect == AGREE and c.ours is not None
            and c.peer is not None]
    total = sum(c.time_us for c in both)
    within = sum(c.time_us for c in both if _close(c.ours, c.peer, rel))
    return (within / total if total else 1.0), total


def agreement_table(checks: List[Check]) -> List[str]:
    """Per class: rows compared, agree, disagree as expected, unexpected, not compared."""
    head = f"{'class':<14}{'compared':>9}{'agree':>7}{'disagree-as-expected':>22}{'unexpected':>12}" \
           f"{'not compared':>14}"
    lines = [head, "-" * len(head)]
    for cls in CLASSES:
        mine = [c for c in checks if c.cls == cls]
        out = [c.outcome for c in mine]
        compared = sum(o != NOT_COMPARED for o in out)
        lines.append(f"{cls:<14}{compared:>9}{out.count(AGREE):>7}{out.count('disagree as expected'):>22}"
                     f"{out.count('unexpected'):>12}{out.count(NOT_COMPARED):>14}")
    lines.append("")
    for metric, rel in (("flops", 0.01), ("bytes", 0.01), ("bytes", 0.10)):
        share, total = agreement_share(checks, metric, rel)
        lines.append(f"{metric} within {rel:.0%} of the peer (where it is right): {share:.2%} of "
                     f"{total / 1e3:,.1f} ms kernel time")
    return lines
