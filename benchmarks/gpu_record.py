"""Record GPU logdirs with the project's own capture, and the same ops under Nsight Compute, to check estimates.

    python benchmarks/gpu_record.py record OUT_LOGDIR      # runs: compile_default, compile_reduce_overhead,
                                                           #       compile_inference, moe_eager, moe_grouped,
                                                           #       eager_ops (one each)
    ncu --profile-from-start off ... python benchmarks/gpu_record.py ops   # the eager_ops run's ops, once each
    ncu --profile-from-start off ... python benchmarks/gpu_record.py ops-compiled   # compile_inference's kernels
    python benchmarks/gpu_record.py compare NCU_RAW.csv LOGDIR/eager_ops   # our FLOPs/bytes vs ncu's counters

Every run is recorded by `tb_gpuinsight.profile()` (Kineto trace + Execution Trace + tensor.trace per span).
The compiled runs: `compile_default` with Inductor's per-kernel `kernel_flop` / `kernel_num_gb` (recorded when
`torch._inductor.config.benchmark_kernel` is on at compile time), `compile_reduce_overhead` without them and under
CUDA graphs: its first span holds the graph capture (the launches, with their ops and shapes), its second only
replays, which is the capture + replay pair that the reader merges.
On a machine without CUDA `record` runs the same code on the CPU (a smoke test of the script).
"""
from __future__ import annotations

import csv
import json
import os
import re
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tb_gpuinsight  # noqa: E402  (the repo's own package, also when it is not installed)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DT = torch.bfloat16 if DEV == "cuda" else torch.float32
SMALL = DEV != "cuda"  # CPU smoke runs use tiny sizes


class Block(nn.Module):
    """A pre-norm transformer block: LayerNorm, causal SDPA, GELU MLP."""

    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MoE(nn.Module):
    """A top-k routed SwiGLU mixture of experts: a per-expert loop (eager, as most model code does it) or two
    grouped GEMMs over the tokens sorted by expert (`torch._grouped_mm`)."""

    def __init__(self, d: int, ffn: int, experts: int, topk: int) -> None:
        super().__init__()
        self.ffn, self.topk = ffn, topk
        self.router = nn.Linear(d, experts, bias=False)
        self.w13 = nn.Parameter(torch.randn(experts, d, 2 * ffn) / d ** 0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, d) / ffn ** 0.5)

    def route(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        weights, experts = torch.topk(torch.softmax(self.router(x).float(), dim=-1), self.topk, dim=-1)
        return (weights / weights.sum(-1, keepdim=True)).to(x.dtype), experts

    def forward(self, x: torch.Tensor, grouped: bool = False) -> torch.Tensor:
        weights, experts = self.route(x)
        return self._grouped(x, weights, experts) if grouped else self._loop(x, weights, experts)

    def _loop(self, x: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for e in range(self.w13.shape[0]):
            tok, slot = torch.where(experts == e)
            if tok.numel() == 0:
                continue
            h = x[tok] @ self.w13[e]
            h = F.silu(h[:, :self.ffn]) * h[:, self.ffn:]
            out.index_add_(0, tok, (h @ self.w2[e]) * weights[tok, slot, None])
        return out

    def _grouped(self, x: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        flat = experts.flatten()
        order = torch.argsort(flat)
        tok = order // self.topk
        offs = torch.cumsum(torch.bincount(flat, minlength=self.w13.shape[0]), 0).to(torch.int32)
        h = torch._grouped_mm(x[tok], self.w13, offs=offs)
        h = F.silu(h[:, :self.ffn]) * h[:, self.ffn:]
        y = torch._grouped_mm(h, self.w2, offs=offs) * weights.flatten()[order, None]
        return torch.zeros_like(x).index_add_(0, tok, y)


def _profiled(logdir: str, steps: int, step: Callable[[], None], **kw) -> None:
    with tb_gpuinsight.profile(logdir, use_gzip=True, worker_name="gpu0", **kw) as prof:
        for _ in range(steps):
            step()
            prof.step()
    if DEV == "cuda":
        torch.cuda.synchronize()


def record_compile(out: str, mode: str) -> None:
    d, heads, ffn, b, s = (64, 4, 128, 2, 32) if SMALL else (1024, 16, 4096, 8, 1024)
    model = nn.Sequential(Block(d, heads, ffn), Block(d, heads, ffn)).to(DEV, DT)
    x = torch.randn(b, s, d, device=DEV, dtype=DT)
    if mode == "default":
        import torch._inductor.config as inductor_config
        inductor_config.benchmark_kernel = True  # Inductor then records kernel_flop / kernel_num_gb per kernel
        compiled = torch.compile(model)
        opt = torch.optim.AdamW(model.parameters(), fused=DEV == "cuda")

        def step() -> None:
            compiled(x).float().square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for _ in range(2):  # compile outside the recorded windows
            step()
        _profiled(os.path.join(out, "compile_default"), 4, step, wait=0, warmup=1, active=3)
        inductor_config.benchmark_kernel = False
    else:
        compiled = torch.compile(model, mode="reduce-overhead")

        @torch.no_grad()
        def step() -> None:
            compiled(x)
        torch.compiler.cudagraph_mark_step_begin()
        step()  # compile and warm up outside; the first recorded span captures the graph, the second replays
        _profiled(os.path.join(out, "compile_reduce_overhead"), 8, lambda: (torch.compiler.cudagraph_mark_step_begin(),
                                                                          step()),
                  wait=0, warmup=1, active=3, repeat=2)


def _inference_block() -> Tuple[nn.Module, torch.Tensor]:
    d, heads, ffn, b, s = (64, 4, 128, 2, 32) if SMALL else (1024, 16, 4096, 8, 1024)
    torch.manual_seed(0)
    return Block(d, heads, ffn).to(DEV, DT).eval(), torch.randn(b, s, d, device=DEV, dtype=DT)


def compiled_inference() -> Callable[[], object]:
    """One transformer block compiled by Inductor (default mode) with its per-kernel figures recorded."""
    import torch._inductor.config as inductor_config
    inductor_config.benchmark_kernel = True
    model, x = _inference_block()
    compiled = torch.compile(model)

    @torch.no_grad()
    def step() -> object:
        return compiled(x)
    step()
    step()
    return step


def record_compiled_inference(out: str) -> None:
    _profiled(os.path.join(out, "compile_inference"), 2, compiled_inference(), wait=0, warmup=1, active=1)


def record_moe(out: str, grouped: bool) -> None:
    d, ffn, experts, topk, tokens = (64, 64, 4, 2, 64) if SMALL else (2048, 1408, 16, 4, 4096)
    moe = MoE(d, ffn, experts, topk).to(DEV, DT)
    x = torch.randn(tokens, d, device=DEV, dtype=DT)

    @torch.no_grad()
    def step() -> None:
        moe(x, grouped=grouped)
    step()
    _profiled(os.path.join(out, "moe_grouped" if grouped else "moe_eager"), 4, step, wait=0, warmup=1, active=3)


def eager_ops() -> List[Tuple[str, Callable[[], object]]]:
    """Single ops whose kernels we compare with Nsight Compute's counters (GEMM, FP8 GEMM, conv, attention,
    grouped GEMM, norm, softmax, copy, cat)."""
    n = 256 if SMALL else 4096
    a, b = torch.randn(n, n, device=DEV, dtype=DT), torch.randn(n, n, device=DEV, dtype=DT)
    x = torch.randn(8 if SMALL else 32, 64, 56, 56, device=DEV, dtype=DT)
    w = torch.randn(64, 64, 3, 3, device=DEV, dtype=DT)
    bh, s, hd = (2, 128, 64) if SMALL else (4, 2048, 128)
    q, k, v = (torch.randn(bh, 16, s, hd, device=DEV, dtype=DT) for _ in range(3))
    t = torch.randn(8192 if not SMALL else 256, 4096 if not SMALL else 256, device=DEV, dtype=DT)
    ln = nn.LayerNorm(t.shape[1]).to(DEV, DT)
    ops: List[Tuple[str, Callable[[], object]]] = [
        ("mm_bf16", lambda: a @ b),
        ("conv2d_3x3", lambda: F.conv2d(x, w, padding=1)),
        ("sdpa_causal", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        ("sdpa_full", lambda: F.scaled_dot_product_attention(q, k, v)),
        ("layer_norm", lambda: ln(t)),
        ("softmax", lambda: torch.softmax(t, dim=-1)),
        ("copy", lambda: t.clone()),
        ("cat", lambda: torch.cat([t, t], dim=0)),
    ]
    if DEV == "cuda" and torch.cuda.get_device_capability() >= (8, 9):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as cuBLASLt's FP8 GEMM needs
        one = torch.ones((), device=DEV)
        ops.append(("scaled_mm_fp8", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                              out_dtype=torch.bfloat16)))
    if DEV == "cuda" and hasattr(torch, "_grouped_mm"):
        xg = torch.randn(8192, 2048, device=DEV, dtype=DT)
        wg = torch.randn(8, 2048, 1408, device=DEV, dtype=DT)
        offs = torch.arange(1024, 8193, 1024, device=DEV, dtype=torch.int32)
        ops.append(("grouped_mm", lambda: torch._grouped_mm(xg, wg, offs=offs)))
    return ops


def run_ops(ops: List[Tuple[str, Callable[[], object]]], under_ncu: bool) -> List[str]:
    """Each op once after a warm-up; under ncu only the second call is inside the profiled range."""
    done = []
    for label, fn in ops:
        try:
            fn()
        except Exception as exc:  # an op this build lacks: say so and go on
            print(f"skip {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        done.append(label)
    if DEV == "cuda":
        torch.cuda.synchronize()
    kept = [(label, fn) for label, fn in ops if label in done]
    if under_ncu:
        torch.cuda.cudart().cudaProfilerStart()
    for label, fn in kept:
        if DEV == "cuda":
            torch.cuda.nvtx.range_push(label)
        fn()
        if DEV == "cuda":
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    if under_ncu:
        torch.cuda.cudart().cudaProfilerStop()
    return done


def record(out: str) -> None:
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    log: Dict[str, str] = {}
    jobs = [("compile_default", lambda: record_compile(out, "default")),
            ("compile_reduce_overhead", lambda: record_compile(out, "reduce-overhead")),
            ("compile_inference", lambda: record_compiled_inference(out)),
            ("moe_eager", lambda: record_moe(out, False)),
            ("moe_grouped", lambda: record_moe(out, True)),
            ("eager_ops", lambda: _profiled(os.path.join(out, "eager_ops"), 2,
                                            lambda: run_ops(eager_ops(), False), wait=0, warmup=1, active=1))]
    for name, job in jobs:
        start = time.time()
        try:
            job()
            log[name] = f"ok in {time.time() - start:.1f} s"
        except Exception as exc:  # record what failed; the other runs still count
            log[name] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        print(f"{name}: {log[name]}", flush=True)
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if DEV == "cuda" else "cpu",
           "cuda": torch.version.cuda, "runs": log}
    with open(os.path.join(out, "recording.json"), "w") as fh:
        json.dump(env, fh, indent=1)


# ----------------------------------------------------------------------------------------- ncu comparison

def ncu_figures(path: str) -> List[Dict[str, float]]:
    """Per profiled kernel of an `ncu --csv --page raw` file: name, FLOPs (tensor path ops + 2 x FMA + add + mul
    thread instructions), DRAM bytes read + written, duration."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    head = rows.index(next(r for r in rows if "Kernel Name" in r))
    cols, data = rows[head], rows[head + 2:]  # the row after the header holds units
    out = []
    for row in data:
        rec = dict(zip(cols, row))

        def num(key: str) -> float:
            try:
                return float(str(rec.get(key, "0")).replace(",", "") or 0)
            except ValueError:
                return 0.0
        tensor = sum(num(c) for c in cols if c.startswith("sm__ops_path_tensor_src_") and "sparsity" not in c)
        fma = sum(num(c) for c in cols if c.startswith("smsp__sass_thread_inst_executed_op_") and "fma" in c)
        addmul = sum(num(c) for c in cols if c.startswith("smsp__sass_thread_inst_executed_op_")
                     and ("add" in c or "mul" in c))
        out.append({"name": rec["Kernel Name"], "nvtx": rec.get("thread Domain:Push/Pop_Range:PL_Type:PL_Value:"
                                                                "CLR_Type:Color:Msg_Type:Msg", ""),
                    "flops": tensor + 2 * fma + addmul, "tensor_ops": tensor,
                    "dram_bytes": num("dram__bytes_read.sum") + num("dram__bytes_write.sum"),
                    "us": num("gpu__time_duration.sum") / 1e3})
    return out


def _base_name(name: str) -> str:
    """The kernel's own identifier (ncu and Kineto spell namespaces and template arguments differently)."""
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "", 1)
    head = re.split(r"[<(]", name, maxsplit=1)[0]
    return head.rsplit("::", 1)[-1].strip()


def compare(ncu_csv: str, run_dir: str) -> None:
    """Print our FLOPs and bytes beside ncu's for each profiled kernel, matched by kernel name in launch order."""
    measured = ncu_figures(ncu_csv)
    traces = sorted(p for p in os.listdir(run_dir) if p.endswith((".pt.trace.json", ".pt.trace.json.gz")))
    eff = tb_gpuinsight.analyze(os.path.join(run_dir, traces[-1]))
    acts = eff.activities.to_pandas()
    acts = acts[acts["kind"] == "kernel"] if "kind" in acts else acts
    acts = acts.assign(key=acts["name"].map(_base_name))
    used: Dict[str, int] = {}
    print(f"{'kernel':60} {'ours GFLOP':>11} {'ncu GFLOP':>10} {'ratio':>6} {'ours MB':>9} {'ncu DRAM MB':>11} "
          f"{'ratio':>6}")
    for m in measured:
        key = _base_name(m["name"])
        same = acts[acts["key"] == key]
        i = used.get(key, 0)
        used[key] = i + 1
        if len(same) <= i:
            print(f"{m['name'][:60]:60} (not in the trace)")
            continue
        ours = same.iloc[i]
        f, b = ours.get("flops"), ours.get("bytes")

        def ratio(x, y):
            return f"{x / y:6.3f}" if x == x and x is not None and y else "     -"
        print(f"{m['name'][:60]:60} {(f or 0) / 1e9:11.3f} {m['flops'] / 1e9:10.3f} {ratio(f, m['flops'])} "
              f"{(b or 0) / 1e6:9.2f} {m['dram_bytes'] / 1e6:11.2f} {ratio(b, m['dram_bytes'])}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "record"
    if cmd == "record":
        record(sys.argv[2] if len(sys.argv) > 2 else "gpu_runs")
    elif cmd == "ops":
        print("ran:", run_ops(eager_ops(), under_ncu=DEV == "cuda"))
    elif cmd == "ops-compiled":
        print("ran:", run_ops([("compiled_block", compiled_inference())], under_ncu=DEV == "cuda"))
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd!r}: record, ops or compare")
