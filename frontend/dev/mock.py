"""Mock data for the dev harness: the plugin's JSON routes, answered from made-up but realistic numbers.

Kernel names come from a real BERT-on-H100 profile (samples/bert_h100), plus one hostile name to prove that no
string from a trace is ever parsed as HTML.
"""
from __future__ import annotations

import hashlib
import math
import random
import time
from typing import Any, Dict, List, Optional, Tuple

HOSTILE = '<img src=x onerror="window.__xss=1"> & <script>window.__xss=2</script> kernel<float, 4>'

# (kernel name, kind, launching ops): kind picks the made-up efficiency profile.
KERNELS: List[Tuple[str, str, List[str]]] = [
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
     "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)", "gemm", ["aten::addmm"]),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>"
     "(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)", "gemm", ["aten::addmm"]),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
     "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, "
     "false, false, false, true, false>(pytorch_flash::Flash_fwd_params)", "attn", ["aten::_flash_attention_forward"]),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     "gemm", ["aten::addmm", "aten::mm"]),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
     "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", "norm",
     ["aten::native_layer_norm"]),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)", "gemm", ["aten::addmm"]),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "elt",
     ["aten::add", "aten::add_"]),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>"
     "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, "
     "unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
     "gather", ["aten::index_select"]),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
     "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
     "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)", "gelu", ["aten::gelu"]),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, "
     "at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() "
     "const::{lambda(bool, bool)#1}>, unsigned int, bool, 4, 4> >(at::native::ReduceOp<bool, "
     "at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() "
     "const::{lambda()#12}::operator()() const::{lambda(bool, bool)#1}>, unsigned int, bool, 4, 4>)", "reduce",
     ["aten::all"]),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<long, long, bool, "
     "at::native::(anonymous namespace)::CompareEqFunctor<long> >, std::array<char*, 2ul> >(int, "
     "at::native::AUnaryFunctor<long, long, bool, at::native::(anonymous namespace)::CompareEqFunctor<long> >, "
     "std::array<char*, 2ul>)", "elt", ["aten::eq"]),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>"
     "(at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, "
     "unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)",
     "elt", ["aten::native_dropout"]),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
     "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
     "{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::"
     "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda("
     "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
     "{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::"
     "{lambda(int)#1})", "copy", ["aten::copy_", "aten::contiguous"]),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 7, false, false>"
     "(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)", "norm", ["aten::_softmax"]),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "gemm", ["aten::mm", "aten::bmm"]),
    ("void at::native::unrolled_elementwise_kernel<at::native::MulScalarFunctor<c10::BFloat16, float>, "
     "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
     "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
     "at::native::MulScalarFunctor<c10::BFloat16, float>, std::array<char*, 2ul>, TrivialOffsetCalculator<1, "
     "unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
     "at::native::memory::StoreWithCast<1>)", "elt", ["aten::mul"]),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "comm", ["nccl:all_reduce"]),
    ("Memset (Device)", "memset", []),
    (HOSTILE, "elt", ["custom::<op>&friends"]),
]

GEMM_DIMS = [[512, 768], [768, 3072], [3072]]


def _rng(*key: Any) -> random.Random:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


H100 = {
    "name": "NVIDIA H100 SXM5 80GB", "vendor": "nvidia",
    "peak_tflops": {"fp64": 67, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9},
    "dram_gbps": 3350, "source": "https://www.nvidia.com/en-us/data-center/h100/",
}
A100 = {
    "name": "NVIDIA A100 SXM4 40GB", "vendor": "nvidia",
    "peak_tflops": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624},
    "dram_gbps": 1555,
    "source": {"url": "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/a100-datasheet.pdf",
               "note": "A100 datasheet, SXM4 40GB column"},
}


class Mock:
    """State of the fake server: runs, their loading progress, and the per-device kernel tables."""

    def __init__(self, scenario: str = "default") -> None:
        self.scenario = scenario
        self.started = time.monotonic()

    def restart_loading(self) -> None:
        """Start reading "exp/llama_8b" again (the check uses it to see the progress view, then the table)."""
        self.started = time.monotonic()

    # ---- runs -------------------------------------------------------------------------------------------------
    def runs(self) -> Dict[str, Any]:
        if self.scenario == "empty":
            return {"runs": [], "scan_interval_s": 10}
        elapsed = time.monotonic() - self.started
        loading_total = 6
        loading_done = min(loading_total, int(elapsed / 2))
        loading_ready = loading_done >= loading_total and self.scenario != "stuck"
        runs = [
            {
                "run": "bert_h100", "status": "ready",
                "progress": {"files_done": 2, "files_total": 2, "bytes_done": 9_871_234, "bytes_total": 9_871_234},
                "errors": [],
                "workers": [{"worker": "h100-node", "spans": [
                    {"span": "h100-node.1751410836000000000.pt.trace.json.gz", "stamp": 1751410836000000000, "status": "ready"},
                    {"span": "h100-node.1751410899000000000.pt.trace.json.gz", "stamp": 1751410899000000000, "status": "ready"},
                ]}],
            },
            {
                "run": "exp/<a&b> two gpus", "status": "ready",
                "progress": {"files_done": 3, "files_total": 3, "bytes_done": 3_400_000, "bytes_total": 3_400_000},
                "errors": [{"file": "worker1.1695835599000.pt.trace.json", "reason": "JSON ends early at byte 1048576 (truncated file?)"}],
                "workers": [
                    {"worker": "worker0", "spans": [
                        {"span": "worker0.1695835535000.pt.trace.json", "stamp": 1695835535000, "status": "ready"}]},
                    {"worker": "worker1", "spans": [
                        {"span": "worker1.1695835536000.pt.trace.json", "stamp": 1695835536000, "status": "ready"}]},
                ],
            },
            {
                "run": "exp/llama_8b", "status": "ready" if loading_ready else "loading",
                "progress": {"files_done": loading_done, "files_total": loading_total,
                             "bytes_done": int(7_300_000_000 * loading_done / loading_total),
                             "bytes_total": 7_300_000_000},
                "errors": [],
                "workers": [{"worker": f"rank{r}", "spans": [
                    {"span": f"rank{r}.1751500000000000000.pt.trace.json.gz", "stamp": 1751500000000000000,
                     "status": "ready" if loading_ready else "loading"}]} for r in range(2)],
            },
            {
                "run": "broken", "status": "error", "progress": None,
                "errors": [
                    {"file": "a.pt.trace.json.gz", "reason": "not a gzip file (bad magic bytes 7b 22)"},
                    {"file": "b.pt.trace.json", "reason": "JSON ends early at byte 52 (truncated file?)"},
                ],
                "workers": [],
            },
        ]
        return {"runs": runs, "scan_interval_s": 10}

    # ---- devices ----------------------------------------------------------------------------------------------
    def devices(self, run: str) -> List[Dict[str, Any]]:
        if run.startswith("exp/<a&b>"):
            return [
                {"id": 0, "trace_name": "NVIDIA A100-SXM4-40GB", "matched": True, "spec": A100,
                 "how": 'trace name "NVIDIA A100-SXM4-40GB" matched the datasheet pattern a100-sxm4-40gb'},
                {"id": 1, "trace_name": "Mystery GPU <rev 2> & co", "matched": False, "spec": None,
                 "how": 'no datasheet row matches "Mystery GPU <rev 2> & co" (compute capability 9.0, 132 SMs)'},
            ]
        return [{"id": 0, "trace_name": "NVIDIA H100 80GB HBM3", "matched": True, "spec": H100,
                 "how": 'trace name "NVIDIA H100 80GB HBM3" matched the datasheet pattern "h100 80gb hbm3"'}]

    def device(self, run: str, device: int) -> Optional[Dict[str, Any]]:
        return next((d for d in self.devices(run) if d["id"] == device), None)

    def devices_with_summary(self, q: Dict[str, str]) -> List[Dict[str, Any]]:
        out = []
        for dev in self.devices(q["run"]):
            base = self._base_rows(q["run"], q["worker"], q.get("span", "all"), dev["id"])
            rated = [self._rate(b, dev["spec"], "auto") for b in base]
            kt = sum(r["total_us"] for r in rated)
            flop_t = sum(r["total_us"] for r in rated if r["flops"] is not None)
            byte_t = sum(r["total_us"] for r in rated if r["bytes"] is not None)
            eff_parts = [(r["total_us"], max(r["pct_peak"] or 0, r["pct_dram"] or 0)) for r in rated
                         if r["pct_peak"] is not None or r["pct_dram"] is not None]
            eff = sum(t * min(e, 1) for t, e in eff_parts) / sum(t for t, _ in eff_parts) if eff_parts else None
            summary = {"gpu_busy_us": kt * 1.04, "kernel_time_us": kt, "memop_time_us": kt * 0.06,
                       "kernel_count": sum(b["count"] for b in base), "flop_time_share": flop_t / kt,
                       "byte_time_share": byte_t / kt, "efficiency": eff if dev["matched"] else None}
            out.append(dict(dev, summary=summary))
        return out

    # ---- kernels ----------------------------------------------------------------------------------------------
    def _base_rows(self, run: str, worker: str, span: str, device: int) -> List[Dict[str, Any]]:
        rows = []
        for name, kind, ops in KERNELS:
            r = _rng(run, worker, span, device, name)
            calls = r.choice([1, 2, 4, 10, 12, 24, 48, 96])
            mean = {"gemm": 40, "attn": 60, "comm": 300, "memset": 2}.get(kind, 8) * r.uniform(0.3, 3)
            total = calls * mean
            row = {"name": name, "kind": kind, "ops": ops, "count": calls, "total_us": total, "mean_us": mean,
                   "min_us": mean * r.uniform(0.6, 0.95), "max_us": mean * r.uniform(1.05, 2.5),
                   "occupancy": None if kind == "memset" else round(r.uniform(3, 100), 1),
                   "registers": None if kind == "memset" else r.choice([24, 32, 40, 88, 128, 168, 255]),
                   "grid": None if kind == "memset" else f"[{r.randint(1, 512)}, {r.randint(1, 8)}, 1]",
                   "block": None if kind == "memset" else f"[{r.choice([128, 256, 384])}, 1, 1]",
                   "dtype": None if kind in ("comm", "memset") else ("fp32" if kind == "reduce" else "bf16")}
            if kind in ("gemm", "attn"):
                row["frac"] = r.uniform(0.05, 0.75)
                row["intensity"] = r.uniform(40, 600)
            elif kind in ("comm", "memset", "gelu"):
                row["frac"] = None
                row["intensity"] = None
            else:
                row["frac"] = r.uniform(0.02, 0.85)  # of DRAM
                row["intensity"] = r.uniform(0.08, 1.5)
            row["reason"] = {"comm": "communication kernel: no FLOPs", "memset": "memset: no FLOPs",
                             "gelu": "no FLOP formula for aten::gelu"}.get(kind, "")
            rows.append(row)
        return rows

    def _rate(self, row: Dict[str, Any], spec: Optional[Dict[str, Any]], dtype: str) -> Dict[str, Any]:
        use = row["dtype"] if dtype == "auto" else dtype
        peak = spec["peak_tflops"].get(use) if spec and use else None
        dram = spec["dram_gbps"] if spec else None
        out = {k: row[k] for k in ("name", "count", "total_us", "mean_us", "min_us", "max_us", "occupancy",
                                    "registers", "grid", "block")}
        out["dtype"] = use if row["dtype"] else None
        secs = row["total_us"] * 1e-6
        ref_peak, ref_dram = 989.4, 3350.0
        if row["frac"] is None:
            out.update(flops=None, bytes=None, tflops=None, gbps=None, intensity=None, pct_peak=None, pct_dram=None,
                       flops_reason=row["reason"], bound="unknown")
            if row["kind"] == "gelu":  # bytes known, FLOPs not
                gb = 0.4 * ref_dram
                out.update(bytes=gb * 1e9 * secs, gbps=gb, pct_dram=gb / dram if dram else None)
            return out
        if row["intensity"] > 10:
            tflops = row["frac"] * ref_peak
            gbps = tflops * 1000 / row["intensity"]
        else:
            gbps = row["frac"] * ref_dram
            tflops = gbps * row["intensity"] / 1000
        out.update(flops=tflops * 1e12 * secs, bytes=gbps * 1e9 * secs, tflops=tflops, gbps=gbps,
                   intensity=row["intensity"], flops_reason="",
                   pct_peak=tflops / peak if peak else None, pct_dram=gbps / dram if dram else None)
        ridge = peak * 1000 / dram if peak and dram else None
        out["bound"] = "unknown" if ridge is None else ("compute" if row["intensity"] >= ridge else "memory")
        return out

    def kernels(self, q: Dict[str, str]) -> Dict[str, Any]:
        run, worker, span = q["run"], q["worker"], q.get("span", "all")
        device = int(q.get("device", "0"))
        dtype = q.get("dtype", "auto")
        group = q.get("group", "name")
        dev = self.device(run, device)
        if dev is None:
            raise KeyError(f"no device {device} in this selection")
        base = self._base_rows(run, worker, span, device)
        kernel_total = sum(r["total_us"] for r in base)
        rows = []
        for b in base:
            rated = self._rate(b, dev["spec"], dtype)
            if group == "op":
                ops = b["ops"] or [None]
                for i, op in enumerate(ops):
                    part = dict(rated, op=op)
                    share = 1.0 / len(ops) if len(ops) == 1 else (0.7 if i == 0 else 0.3 / (len(ops) - 1))
                    for k in ("total_us", "flops", "bytes"):
                        if part.get(k) is not None:
                            part[k] = part[k] * share
                    part["count"] = max(1, round(b["count"] * share))
                    rows.append(part)
            else:
                rows.append(rated)
        for r in rows:
            r["time_share"] = r["total_us"] / kernel_total
        text = q.get("filter", "").lower()
        if text:
            rows = [r for r in rows if text in r["name"].lower()]
        op = q.get("op", "")
        if op:
            names = {b["name"] for b in base if op in b["ops"]}
            rows = [r for r in rows if r["name"] in names and (group != "op" or r.get("op") == op)]
        sort = q.get("sort", "total_us")
        desc = q.get("order", "desc") == "desc"
        known = [r for r in rows if r.get(sort) is not None]
        unknown = [r for r in rows if r.get(sort) is None]
        known.sort(key=lambda r: r[sort] if not isinstance(r[sort], str) else r[sort].lower(), reverse=desc)
        rows = known + unknown  # unknown last, both ways
        offset, limit = int(q.get("offset", "0")), int(q.get("limit", "200"))
        return {"total": len(rows), "dtype": dtype, "rows": rows[offset:offset + limit]}

    def roofline(self, q: Dict[str, str]) -> Dict[str, Any]:
        run, device, dtype = q["run"], int(q.get("device", "0")), q.get("dtype", "auto")
        dev = self.device(run, device)
        if dev is None:
            raise KeyError(f"no device {device} in this selection")
        spec = dev["spec"]
        use = "bf16" if dtype == "auto" else dtype
        peak = spec["peak_tflops"].get(use) if spec else None
        dram = spec["dram_gbps"] if spec else None
        rows = self.kernels(dict(q, group="name", offset="0", limit="100000"))["rows"]
        return {
            "dtype": use, "peak_tflops": peak, "dram_gbps": dram,
            "ridge": peak * 1000 / dram if peak and dram else None,
            "points": [{"name": r["name"], "intensity": r["intensity"], "tflops": r["tflops"], "total_us": r["total_us"],
                        "count": r["count"], "pct_peak": r["pct_peak"]} for r in rows],
        }

    def kernel_ops(self, q: Dict[str, str]) -> Dict[str, Any]:
        name = q.get("name", "")
        match = next((k for k in KERNELS if k[0] == name), None)
        if match is None:
            raise KeyError(f"no kernel named {name!r} in this selection")
        _, kind, ops = match
        r = _rng("ops", name)
        out = []
        for op in ops:
            calls = r.choice([1, 2, 4, 12])
            if kind == "gemm":
                dims: Optional[list] = [[512, 768], [768, 3072], [3072]] if op != "aten::bmm" else [[12, 128, 64], [12, 64, 128]]
                types = ["c10::BFloat16"] * len(dims)
                concrete: Optional[list] = [""] * len(dims)
                if op == "aten::addmm":
                    dims = [[3072], [512, 768], [768, 3072], [], []]
                    types = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]
                    concrete = ["", "", "", "1", "1"]
                flops = 2 * 512 * 768 * 3072 * calls
                reason = ""
            elif kind == "comm":
                dims, types, concrete, flops, reason = [[1, 4096]], ["c10::BFloat16"], None, None, "communication: no FLOPs"
            else:
                dims = [[4, 128, 768], [4, 128, 768]]
                types = ["c10::BFloat16", "c10::BFloat16"]
                concrete = ["", ""]
                flops = None if kind == "gelu" else 4 * 128 * 768 * calls
                reason = "no FLOP formula for aten::gelu" if kind == "gelu" else ""
            out.append({"op": op, "count": calls, "total_us": calls * r.uniform(5, 80), "flops": flops,
                        "flops_reason": reason, "input_dims": dims, "input_types": types, "concrete_inputs": concrete})
        return {"name": name, "ops": out}


def check_selection(mock: Mock, q: Dict[str, str]) -> Optional[str]:
    """The one-line error the real server would answer for a bad selection, or None."""
    runs = {r["run"]: r for r in mock.runs()["runs"]}
    run = runs.get(q.get("run", ""))
    if run is None:
        return f"no run named {q.get('run', '')!r}"
    if run["status"] != "ready":
        return f"run {run['run']!r} is {run['status']}"
    worker = next((w for w in run["workers"] if w["worker"] == q.get("worker")), None)
    if worker is None:
        return f"no worker named {q.get('worker', '')!r} in run {run['run']!r}"
    span = q.get("span", "all")
    if span != "all" and not any(s["span"] == span for s in worker["spans"]):
        return f"no span named {span!r}"
    if math.isnan(float(q.get("device", "0"))):
        return "device must be a number"
    return None
