"""Graph capture merged into replay, on the corpus' vLLM decode pair, against the peer's merged report.

    python benchmarks/graph_capture.py [REPLAY CAPTURE]   (run from the project root; corpus from
                                                          $TB_GPUINSIGHT_CORPUS)

Prints the share of kernel time with FLOPs and with bytes without and with the capture, the peer's share of kernel
time with FLOPs, and per peer op class (name, Input Dims, Input type, Concrete Inputs) that a merged kernel's
captured op has too: our FLOPs and bytes per call beside the peer's (within 1 %: agree).
"""
from __future__ import annotations

import ast
import math
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tb_gpuinsight  # noqa: E402
from tb_gpuinsight.estimate.flops import estimate_op, freeze  # noqa: E402
from tests.corpus import CORPUS  # noqa: E402
from tests.oracle import MIB, ORACLES, peer_rows  # noqa: E402

PAIR = "vllm_decode_full__graph_execution"
REPLAY = CORPUS / "tracelens" / f"{PAIR}.json.gz"
CAPTURE = CORPUS / "tracelens" / "vllm_decode_full__capture_traces"


def kernel_time_shares(eff) -> Tuple[float, float]:
    """(share of kernel time with FLOPs, with bytes)."""
    acts = eff.activities
    kernel = acts["kind"] == acts.strings["kind"].index("kernel")
    dur = acts["dur"][kernel]
    total = float(dur.sum()) or 1.0
    return (float(dur[~np.isnan(acts["flops"][kernel])].sum()) / total,
            float(dur[~np.isnan(acts["bytes"][kernel])].sum()) / total)


def merged_classes(eff) -> Dict[tuple, Tuple[float, float]]:
    """(op name, dims, types, concrete) of every merged kernel's captured op -> our (FLOPs, bytes) per call."""
    acts = eff.activities
    from tb_gpuinsight.analysis.kernels.efficiency import SOURCES

    rows = np.flatnonzero((acts["source"] == SOURCES.index("capture")) & (acts["op_shape"] >= 0))
    out = {}
    for row in rows.tolist():
        name = acts.strings["op_name"][acts["op_name"][row]]
        dims, types, concrete = (freeze(x) for x in eff.shapes[int(acts["op_shape"][row])])
        key = (name, dims, types, concrete)
        if key not in out:
            est = estimate_op(name, dims, types, concrete)
            out[key] = out.setdefault((name, dims, types, None), (est.flops, est.bytes))
    return out


def _our_gemm(name: str, dims) -> Optional[Tuple[int, int, int]]:
    """(M, K, N) of an aten::addmm(bias, x, w) / aten::mm(x, w) class."""
    args = dims[1:3] if name == "aten::addmm" else dims[0:2] if name == "aten::mm" else None
    if not args or len(args[0]) != 2 or len(args[1]) != 2:
        return None
    return (args[0][0], args[0][1], args[1][1])


def _peer_gemm(name: str, dims) -> Optional[Tuple[int, int, int]]:
    """(M, K, N) of the peer's vLLM GEMM wrapper class (x, weight (N, K), [bias]): the same GEMM our innermost op
    (aten::addmm / mm) carries."""
    if name != "vllm::rocm_unquantized_gemm" or len(dims) < 2 or len(dims[0]) != 2 or len(dims[1]) != 2:
        return None
    return (dims[0][0], dims[0][1], dims[1][0])


def _close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=0.01)


def main(replay: str, capture: str) -> None:
    before = tb_gpuinsight.analyze(replay, capture=[])
    after = tb_gpuinsight.analyze(replay, capture=sorted(str(p) for p in Path(capture).glob("*.pt.trace.json*")))
    print("kernel time with FLOPs / bytes: before %.1f%% / %.1f%%, after %.1f%% / %.1f%%"
          % tuple(100 * x for x in kernel_time_shares(before) + kernel_time_shares(after)))
    if not (ORACLES / PAIR).is_dir():
        return
    peer = peer_rows(PAIR)
    kernel_us = float(after.activities["dur"][after.activities["kind"] == 0].sum())
    peer_flops_us = sum(float(r["Kernel Time (µs)_sum"] or 0) for r in peer if r["GFLOPS"] not in ("", "0", "0.0"))
    print(f"peer: kernel time with FLOPs {100 * peer_flops_us / kernel_us:.1f}% of our kernel time")
    ours = merged_classes(after)
    gemms = {_our_gemm(k[0], k[1]): v for k, v in ours.items() if _our_gemm(k[0], k[1])}
    joined = agree_f = agree_b = both_f = both_b = 0
    for row in peer:
        dims, types, concrete = (freeze(ast.literal_eval(row[k])) for k in ("Input Dims", "Input type",
                                                                             "Concrete Inputs"))
        hit = ours.get((row["name"], dims, types, concrete)) or ours.get((row["name"], dims, types, None)) or \
            gemms.get(_peer_gemm(row["name"], dims))
        if hit is None:
            continue
        joined += 1
        pf = float(row["GFLOPS"]) * 1e9 if row["GFLOPS"] else None
        pb = float(row["Data Moved (MB)"]) * MIB if row["Data Moved (MB)"] else None
        if hit[0] is not None and pf is not None:
            both_f += 1
            agree_f += _close(hit[0], pf)
        if hit[1] is not None and pb is not None:
            both_b += 1
            agree_b += _close(hit[1], pb)
        if "-v" in sys.argv:
            print(f"  {row['name']} {row['Input Dims'][:50]}: flops ours {hit[0]} peer {pf}; bytes ours {hit[1]} "
                  f"peer {pb}")
    print(f"peer op classes joined to merged kernels: {joined} of {len(peer)}; FLOPs within 1 %: {agree_f} of "
          f"{both_f} known on both sides; bytes within 1 %: {agree_b} of {both_b}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "-v"]
    main(*(args if len(args) == 2 else (str(REPLAY), str(CAPTURE))))
