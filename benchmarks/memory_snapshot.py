"""Reading and analysing a large CUDA memory snapshot: time and peak RSS of `report(load_snapshot(path))`.

    python benchmarks/memory_snapshot.py [--gb 1.0] [--frames 16] [--keep PATH]

Writes a synthetic snapshot of about `--gb` GB, shaped as torch writes one (protocol 4, every dict and list
memoized as pickle.dump does, frame dicts shared through the pickle memo, a list of frames per entry, alloc /
free_requested / free_completed entries with addresses, sizes, streams and microsecond times; 4,096 segments of
64 MiB with their blocks at the dump), opcode by opcode so that writing it takes no memory. Then reads and analyses
it in a fresh process (the safe reader, columns, replay, the report) and prints wall time, peak RSS and their ratio
to the file size.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _measure import measure  # noqa: E402

SEGMENT = 64 << 20
SLOTS = 4096
LIVE = 1000  # allocations alive at any time
BASE = 0x7F0000000000
SIZES = [512, 4096, 1 << 20, 2 << 20, 8 << 20, 24 << 20, 64 << 20]


class Writer:
    """Pickle opcodes by hand (protocol 4 without framing, which the unpickler accepts), strings memoized."""

    def __init__(self, f) -> None:
        self.f, self.memo, self.buf, self.count = f, {}, bytearray(), 0

    def flush(self) -> None:
        self.f.write(self.buf)
        self.buf = bytearray()

    def put(self) -> int:
        """LONG_BINPUT: memoize the object on top of the stack under the next index."""
        index, self.count = self.count, self.count + 1
        self.buf += b"r" + struct.pack("<I", index)
        return index

    def get(self, index: int) -> None:
        self.buf += b"j" + struct.pack("<I", index)

    def text(self, s: str) -> None:
        hit = self.memo.get(s)
        if hit is not None:
            return self.get(hit)
        data = s.encode()
        self.buf += (b"\x8c" + bytes([len(data)]) if len(data) < 256 else b"X" + struct.pack("<I", len(data))) + data
        self.memo[s] = self.put()

    def int(self, v: int) -> None:
        if 0 <= v < 256:
            self.buf += b"K" + bytes([v])
        elif -2 ** 31 <= v < 2 ** 31:
            self.buf += b"J" + struct.pack("<i", v)
        else:
            data = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            self.buf += b"\x8a" + bytes([len(data)]) + data

    def mapping(self, items, memo: bool = True) -> None:
        """A dict, memoized as pickle.dump memoizes every container (so the unpickler's memo holds every entry)."""
        self.buf += b"}"
        if memo:
            self.put()
        self.buf += b"("
        for k, v in items:
            self.text(k)
            v()
        self.buf += b"u"


def frames_pool(w: Writer, n_frames: int):
    """Memo ids of shared frame dicts: user frames first, then torch's."""
    ids = []
    for i in range(200):
        user = i < 120
        name = f"/home/user/project/model/layer_{i % 40}.py" if user else \
            f"/usr/lib/python3.11/site-packages/torch/nn/modules/mod_{i}.py"
        w.mapping([("filename", lambda n=name: w.text(n)), ("line", lambda i=i: w.int(10 + i)),
                   ("name", lambda i=i: w.text(f"fn_{i}"))], memo=False)
        ids.append(w.put())
        w.buf += b"0"  # POP: the frame stays in the memo only
    rng = random.Random(1)
    stacks = [[ids[120 + rng.randrange(80)]] + [ids[rng.randrange(120)] for _ in range(n_frames - 1)]
              for _ in range(500)]
    return stacks


def write_snapshot(path: str, target_bytes: int, n_frames: int) -> int:
    """Write the synthetic snapshot; returns its number of trace entries."""
    rng = random.Random(0)
    with open(path, "wb") as f:
        w = Writer(f)
        w.buf += b"\x80\x04}"  # PROTO 4, the top dict
        w.put()
        stacks = frames_pool(w, n_frames)
        w.text("device_traces")
        w.buf += b"]"  # the list of devices
        w.put()
        w.buf += b"(]"  # MARK, device 0's list
        w.put()
        w.buf += b"("
        live, sizes, t, n, k = {}, {}, 1_700_000_000_000_000, 0, 0
        while f.tell() + len(w.buf) < target_bytes:
            slot = k % SLOTS
            size = rng.choice(SIZES)
            for action, s in (("alloc", slot),) + ((("free_requested", (k - LIVE) % SLOTS),
                                                     ("free_completed", (k - LIVE) % SLOTS)) if k >= LIVE else ()):
                t += rng.randrange(1, 50)
                addr, sz = BASE + s * SEGMENT, (size if action == "alloc" else sizes[s])
                stack = stacks[s % len(stacks)]
                w.mapping([("action", lambda a=action: w.text(a)), ("addr", lambda a=addr: w.int(a)),
                           ("size", lambda z=sz: w.int(z)), ("stream", lambda: w.int(0)),
                           ("time_us", lambda x=t: w.int(x)), ("frames", lambda st=stack: _frames(w, st))])
                n += 1
                if n % 1000 == 0:
                    w.buf += b"e("  # APPENDS a batch, MARK the next
                    w.flush()
            sizes[slot] = size
            live[slot] = size
            if k >= LIVE:
                live.pop((k - LIVE) % SLOTS, None)
            k += 1
        w.buf += b"ees"  # last batch into device 0's list, that list into the devices list, SETITEM
        w.text("segments")
        w.buf += b"]"
        w.put()
        w.buf += b"("
        for s in range(SLOTS):
            addr = BASE + s * SEGMENT
            blocks = [(addr, live[s], "active_allocated"), (addr + live[s], SEGMENT - live[s], "inactive")] \
                if s in live else [(addr, SEGMENT, "inactive")]
            w.mapping([("device", lambda: w.int(0)), ("address", lambda a=addr: w.int(a)),
                       ("total_size", lambda: w.int(SEGMENT)), ("stream", lambda: w.int(0)),
                       ("blocks", lambda b=blocks: _blocks(w, b))])
        w.buf += b"es."  # APPENDS, SETITEM segments, STOP
        w.flush()
    return n


def _frames(w: Writer, stack) -> None:
    w.buf += b"]"
    w.put()
    w.buf += b"("
    for i in stack:
        w.get(i)
    w.buf += b"e"


def _blocks(w: Writer, blocks) -> None:
    w.buf += b"]"
    w.put()
    w.buf += b"("
    for addr, size, state in blocks:
        requested = size if state != "inactive" else 0
        w.mapping([("address", lambda a=addr: w.int(a)), ("size", lambda z=size: w.int(z)),
                   ("requested_size", lambda r=requested: w.int(r)), ("state", lambda x=state: w.text(x)),
                   ("frames", lambda: _frames(w, []))])
    w.buf += b"e"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="size of the synthetic snapshot (default 1 GB)")
    ap.add_argument("--frames", type=int, default=16, help="frames per entry's stack (default 16)")
    ap.add_argument("--keep", help="write the snapshot here and keep it (default: a temporary file)")
    args = ap.parse_args()
    path = args.keep or os.path.join(tempfile.mkdtemp(prefix="snapshot-bench-"), "big.pickle")
    try:
        entries = write_snapshot(path, int(args.gb * 1e9), args.frames)
        size = os.path.getsize(path)
        print(f"snapshot: {size / 1e9:.2f} GB, {entries:,} trace entries, {args.frames} frames each, "
              f"{SLOTS:,} segments")
        step = ("from tb_gpuinsight.analysis.memory.snapshot import report\n"
                "from tb_gpuinsight.analysis.memory.snapshot_model import load_snapshot\n"
                f"rep = report(load_snapshot({path!r}, limit=1 << 40))\n"
                "print(rep['peak_allocated_bytes'], len(rep['at_peak']), file=__import__('sys').stderr)")
        result = measure("import numpy", step)
        if "error" in result:
            print(f"failed: {result['error']}")
            return 1
        rss = result["peak_rss_kb"] * 1024
        print(f"read + report: {result['wall_s']:.1f} s wall, peak RSS {rss / 1e9:.2f} GB "
              f"({rss / size:.1f}x the file)")
    finally:
        if not args.keep and os.path.exists(path):
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
