"""Several spans combined (All ranks, all spans) rated against each span's own devices: a job may mix GPU models
(H100 ranks beside A100 ranks), and its ranks number their GPUs alike (rank 0 and rank 8 both on GPU 0 of their
node), so the device properties of the first span cannot rate them all.

- `rate_by_span`: every activity rated against the device its own span lists for its GPU id (as that span's own
  analysis rates it), by rating each set of spans that list the same devices under ids of their own.
- `props_by_device`: the device properties the combined selection's cards show: for each GPU id some span ran
  something on, the first such span's (in combine order); a GPU id shared by ranks of different models shows the
  first one's model and roofs, while each of its kernels keeps its own rank's rating.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

from ...estimate.devices import DeviceSpec
from ...trace.table import Table
from ..kernels.rating import DeviceReport, _device_reports, _only_model, _rate

Props = List[Dict[str, Any]]  # a span's device properties (`Efficiency.device_props`)


def listed(props: Props) -> Dict[int, Dict[str, Any]]:
    """A span's device properties by GPU id (as `rating._device_reports` reads them)."""
    return {int(d.get("id", i)): d for i, d in enumerate(props)}


def props_by_device(span_props: Sequence[Props], ran: Sequence[Iterable[int]]) -> Props:
    """The device properties of several spans combined (`span_props[i]` the i-th span's, `ran[i]` the GPU ids it
    ran something on): each GPU id that ran something as the first span that ran on it lists it, the first span's
    other devices as it lists them."""
    merged = {dev: {**d, "id": dev} for dev, d in listed(span_props[0]).items()} if span_props else {}
    seen = set()
    for props, ids in zip(span_props, ran):
        own = listed(props)
        for dev in sorted({int(d) for d in ids} - seen):
            if dev >= 0:
                seen.add(dev)
                merged[dev] = {**(own.get(dev) or _only_model(list(props), dev)), "id": dev}
    return [merged[d] for d in sorted(merged)]


def rate_by_span(acts: Table, span_props: Sequence[Props], rows: Sequence[DeviceSpec], dtype: str) -> bool:
    """Rate `acts` (a combined table: its `span` column the position in `span_props`) in place, each activity
    against its own span's device; False (nothing done) when every span lists the same devices, the usual case,
    which the caller rates as one."""
    if "span" not in acts.columns or len({_key(p) for p in span_props}) < 2:
        return False
    groups: Dict[str, int] = {}  # spans listing the same devices are rated as one
    group_of = np.array([groups.setdefault(_key(p), len(groups)) for p in span_props] + [0], dtype=np.int64)
    first: Dict[int, Props] = {}
    for g, props in zip(group_of.tolist(), span_props):
        first.setdefault(g, props)
    device = acts.columns["device"]
    stride = max(int(device.max()) + 1 if len(device) else 1, 1)  # group g's GPU d rated as id g * stride + d
    group = group_of[np.clip(acts["span"], 0, len(span_props))]
    ids = np.where(device >= 0, group * stride + device, -1)
    reports: Dict[int, DeviceReport] = {}
    for g, props in first.items():
        mine = Table("activities", {"device": device[group == g]}, {})
        for dev, report in _device_reports(props, mine, rows, None).items():
            reports[g * stride + dev] = report
    acts.columns["device"] = ids  # the rating reads the GPU of each activity from this column
    try:
        _rate(acts, reports, dtype)
    finally:
        acts.columns["device"] = device
    return True


def _key(props: Optional[Props]) -> str:
    return json.dumps(list(props or ()), sort_keys=True, default=str)


__all__ = ["props_by_device", "rate_by_span", "listed"]
