"""What the Kineto reader reads from each event: categories and the tables they go to, and the typed schema of
the event args the tables use (msgspec decodes only these fields; every other key is skipped in C)."""
from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Tuple, Union

import msgspec

# Raw category -> canonical category. Legacy (2021) names map onto the 2022+ vocabulary.
CATEGORIES: Dict[str, str] = {
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset", "memset": "gpu_memset",
    "cuda_runtime": "cuda_runtime", "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "cuda_sync": "cuda_sync",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "python_function": "python_function",
    "cpu_instant_event": "cpu_instant_event",
    "overhead": "overhead",
    "trace": "trace",
    "cuda_profiler_range": "cuda_profiler_range",
    "ac2g": "flow", "async": "flow", "async_gpu": "flow", "async_cpu_to_gpu": "flow", "fwdbwd": "flow",
}
LEGACY_CATEGORIES = {"Operator", "Kernel", "Runtime", "Memcpy", "Memset"}

# Canonical category -> (table, kind within the table).
TABLE_OF: Dict[str, Tuple[str, str]] = {
    "cpu_op": ("ops", "cpu_op"),
    "kernel": ("kernels", "kernel"),
    "gpu_memcpy": ("memops", "memcpy"),
    "gpu_memset": ("memops", "memset"),
    "cuda_runtime": ("launches", "runtime"),
    "cuda_driver": ("launches", "driver"),
    "cuda_sync": ("launches", "sync"),
    "user_annotation": ("annotations", "cpu"),
    "gpu_user_annotation": ("annotations", "gpu"),
}
TABLES = ("ops", "kernels", "memops", "launches", "annotations", "memory", "modules")
# Allocation events (profile_memory=True): instant events named "[memory]", cat "cpu_instant_event" (2022+) or none
# (2021), whatever their category says.
MEMORY_EVENT = "[memory]"
# nn.Module calls (with_stack=True): python_function events named "nn.Module: Linear_0"; other Python frames are
# not kept.
MODULE_PREFIX = "nn.Module: "

_NO_ID = -1


# The event args every table may use: (attribute, arg name in the trace, type). Raw values stay undecoded bytes
# until a table interns them (shapes and grids repeat, so each distinct value is decoded once, later).
_ARG_FIELDS: Tuple[Tuple[str, str, Any], ...] = (
    ("ext", "External id", Optional[int]),
    ("ext_legacy", "external id", Optional[int]),
    ("correlation", "correlation", Optional[int]),
    ("rf_id", "Record function id", Optional[int]),
    ("seq", "Sequence number", Optional[int]),
    ("fwd_tid", "Fwd thread id", Optional[int]),
    ("device", "device", Optional[int]),
    ("stream", "stream", Union[int, str, None]),  # ROCm runtime events write "0x0"
    ("dims", "Input Dims", msgspec.Raw),
    ("dims_legacy", "Input dims", msgspec.Raw),
    ("types", "Input type", msgspec.Raw),
    ("concrete", "Concrete Inputs", msgspec.Raw),
    ("grid", "grid", msgspec.Raw),
    ("block", "block", msgspec.Raw),
    ("registers", "registers per thread", Optional[int]),
    ("shared_mem", "shared memory", Optional[int]),
    ("blocks_per_sm", "blocks per SM", Optional[float]),
    ("warps_per_sm", "warps per SM", Optional[float]),
    ("occupancy", "est. achieved occupancy %", Optional[float]),
    ("occupancy_legacy", "theoretical occupancy %", Optional[float]),
    ("nbytes", "bytes", Optional[int]),
    ("bandwidth", "memory bandwidth (GB/s)", Optional[float]),
    ("kernel_flop", "kernel_flop", Optional[float]),
    ("kernel_num_gb", "kernel_num_gb", Optional[float]),
    ("module", "Module Hierarchy", Optional[str]),
    ("addr", "Addr", Optional[int]),
    ("alloc_bytes", "Bytes", Optional[int]),
    ("total_allocated", "Total Allocated", Optional[int]),
    ("total_reserved", "Total Reserved", Optional[int]),
    ("device_type", "Device Type", Optional[int]),
    ("device_id", "Device Id", Optional[int]),
    # cuda_sync events (2024+): the stream and cudaEventRecord an event sync / stream wait waits on.
    ("wait_stream", "wait_on_stream", Optional[int]),
    ("wait_corr", "wait_on_cuda_event_record_corr_id", Optional[int]),
)
# Collective args (record_param_comms ops, c10d/NCCL kernels of newer builds), kept raw: their JSON types vary by
# release (sizes as numbers or strings, ranks as a list or its text). `KinetoTrace.comm(code)` decodes one set.
COMM_ARGS: Tuple[str, ...] = (
    "Collective name", "In msg nelems", "Out msg nelems", "In split size", "Out split size", "Group size", "dtype",
    "Process Group Name", "Process Group Description", "Process Group Ranks", "Process Group ID", "Rank", "Seq",
    "Comms Id", "Global rank start", "Global rank stride",
)
_ARG_FIELDS += tuple((f"comm{i}", name, msgspec.Raw) for i, name in enumerate(COMM_ARGS))
_COMM_ATTRS = tuple(f"comm{i}" for i in range(len(COMM_ARGS)))
_comm_values = operator.attrgetter(*_COMM_ATTRS)
_ARG_NAMES = {name: attr for attr, name, _ in _ARG_FIELDS}


def _make_schema(extra_args: Tuple[str, ...]):
    """Typed event struct for one load: the standard args plus the caller's extra args (as raw JSON)."""
    fields = []
    for attr, name, typ in _ARG_FIELDS:
        default = msgspec.Raw() if typ is msgspec.Raw else None
        fields.append((attr, typ, msgspec.field(default=default, name=name)))
    for i, name in enumerate(extra_args):
        if name not in _ARG_NAMES:
            fields.append((f"x{i}", msgspec.Raw, msgspec.field(default=msgspec.Raw(), name=name)))
    args_type = msgspec.defstruct("Args", fields)
    event_type = msgspec.defstruct("Event", [
        ("ph", str, ""),
        ("cat", str, ""),
        ("name", str, ""),
        ("pid", Union[int, str, None], None),
        ("tid", Union[int, str, None], None),
        ("ts", Optional[float], None),
        ("dur", float, 0.0),
        ("args", Optional[args_type], None),
    ])
    return args_type, event_type


def _other_destination(e, canon: Optional[str]) -> Optional[Tuple[str, str]]:
    """(table, kind) of a timed event that is not a complete event of a TABLE_OF category (memory instants,
    module events), None for events no table keeps."""
    if e.ts is None:
        return None
    if e.ph in ("i", "I"):
        return ("memory", "") if e.name == MEMORY_EVENT else None
    if e.ph == "X" and canon == "python_function" and e.name.startswith(MODULE_PREFIX):
        return ("modules", "")
    return None
