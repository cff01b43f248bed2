"""What the Kineto reader reads from each event: categories and the tables they go to, and the typed schema of
the event args the tables use (msgspec decodes only these fields; every other key is skipped in C)."""
from __future__ import annotations

import functools

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
    ("strides", "Input Strides", msgspec.Raw),  # kept only where an input is a broadcast view (strides.py)
    ("grid", "grid", msgspec.Raw),
    ("block", "block", msgspec.Raw),
    ("registers", "registers per thread", Optional[int]),
    ("graph_node", "graph node id", Union[int, str, None]),  # CUPTI's node of a graph-replayed kernel (CUDA 12+)
    ("shared_mem", "shared memory", Optional[int]),
    ("blocks_per_sm", "blocks per SM", Optional[float]),
    ("warps_per_sm", "warps per SM", Optional[float]),
    ("occupancy", "est. achieved occupancy %", Optional[float]),
    ("occupancy_legacy", "theoretical occupancy %", Optional[float]),
    ("nbytes", "bytes", Optional[int]),
    ("bandwidth", "memory bandwidth (GB/s)", Optional[float]),
    ("kernel_flop", "kernel_flop", Optional[float]),
    ("kernel_num_gb", "kernel_num_gb", Optional[float]),
    ("kernel_file", "kernel_file", Optional[str]),  # the Inductor-generated source of a Triton kernel's launch
    ("stack", "Call stack", Optional[str]),  # Python frames of an op (with_stack, 2021-22 releases)
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


_SHAPE_ATTRS = ("dims", "dims_legacy", "types", "concrete", "strides")
# The args each table reads (besides the External id every activity table has); a table's args are decoded only
# for the events that go to it, into a struct of these fields alone.
TABLE_ARGS: Dict[str, Tuple[str, ...]] = {
    "ops": ("ext", "ext_legacy", "rf_id", "seq", "fwd_tid", "kernel_flop", "kernel_num_gb", "kernel_file", "stack",
            "module")
    + _SHAPE_ATTRS + _COMM_ATTRS,
    "kernels": ("ext", "ext_legacy", "device", "stream", "correlation", "registers", "shared_mem", "blocks_per_sm",
                "warps_per_sm", "occupancy", "occupancy_legacy", "grid", "block", "graph_node") + _COMM_ATTRS,
    "memops": ("ext", "ext_legacy", "device", "stream", "correlation", "nbytes", "bandwidth"),
    "launches": ("ext", "ext_legacy", "correlation", "device", "stream", "wait_stream", "wait_corr"),
    "annotations": ("ext", "ext_legacy") + _SHAPE_ATTRS + _COMM_ATTRS,
    "memory": ("device_type", "device_id", "addr", "alloc_bytes", "total_allocated", "total_reserved"),
    "modules": (),
}


# An absent raw arg: one object shared by every struct, so that "none of these args" is an identity test in C.
NO_RAW = msgspec.Raw()
# An event without args reads as one with empty args: a chunk's args then join without a check per event.
_NO_ARGS = msgspec.Raw(b"{}")


@functools.lru_cache(maxsize=32)
def _make_schema(extra_args: Tuple[str, ...]) -> Tuple[type, Dict[str, type]]:
    """Typed structs for one load: the event (its args left raw) and, per table, the args that table reads plus
    the caller's extra args (those the schema does not name stay raw JSON). Made once per set of extra args:
    loads share the types and so their decoders (repair.typed_decoder), which a folder of small traces would
    otherwise rebuild for every file. Read-only: callers do not change the returned dict."""
    specs = {attr: (name, typ) for attr, name, typ in _ARG_FIELDS}
    extra = []
    for i, name in enumerate(extra_args):
        attr = _ARG_NAMES.get(name, f"x{i}")
        specs.setdefault(attr, (name, msgspec.Raw))
        extra.append(attr)
    # gc=False: events hold no references that could form cycles, so the collector need not track the millions
    # of them a big trace makes (tracking made every collection walk them all).
    args_types = {}
    for table, attrs in TABLE_ARGS.items():
        fields = []
        for attr in dict.fromkeys(attrs + tuple(extra)):
            name, typ = specs[attr]
            default = NO_RAW if typ is msgspec.Raw else None
            fields.append((attr, typ, msgspec.field(default=default, name=name)))
        args_types[table] = msgspec.defstruct(f"{table.capitalize()}Args", fields, gc=False)
    event_type = msgspec.defstruct("Event", [
        ("ph", str, ""),
        ("cat", str, ""),
        ("name", str, ""),
        ("pid", Union[int, str, None], None),
        ("tid", Union[int, str, None], None),
        ("ts", Optional[float], None),
        ("dur", float, 0.0),
        ("args", msgspec.Raw, msgspec.field(default=_NO_ARGS)),
    ], gc=False)
    return event_type, args_types
