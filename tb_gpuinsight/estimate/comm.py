"""Communication ops that are torch ops (the collective kernels themselves are rated on the interconnect by the
analysis, from the bytes recorded on ``record_param_comms``): custom all-reduce and symmetric-memory collectives.
They do no floating-point work worth rating (a reduction adds, but the bound is the link), so their FLOPs are 0;
bytes: the input read and the output written in device memory.
"""
from __future__ import annotations

from .registry import register

register("*::all_reduce *::custom_all_reduce *::one_shot_all_reduce *::two_shot_all_reduce *::multimem_all_reduce_ "
         "*::multimem_one_shot_all_reduce *::multimem_all_gather_out *::one_shot_all_reduce_out "
         "*::two_shot_all_reduce_ *::reduce_scatter_out *::all_gather_into_tensor *::reduce_scatter_tensor "
         "*::all_to_all_single *::all_gather_into_tensor_out *::qr_all_reduce *::outplace_all_reduce "
         "*::inplace_all_reduce", "comm", zero_flops=True,
         source="symm_mem / vLLM / SGLang custom all-reduce schemas: input read, output written")
