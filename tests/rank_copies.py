"""Runs of many ranks made of the 8 real DLRM ranks (corpus `param/dlrm_8ranks`), for the scale benchmark and the
tests of the Distributed tab past one page of ranks: rank file i is a link to real rank i % 8 named `rank{i}`, and
its summary is the real rank's summary with its identity and its distributedInfo rank / world size set to i / N
(what summarising the copy gives, without summarising thousands of files)."""
from __future__ import annotations

import io
import json
import os
from typing import Dict, List

import numpy as np

STAMP = "1700000000000"


def real_summaries(corpus_run: str, work: str) -> List[Dict[str, np.ndarray]]:
    """The real ranks' summaries (their arrays), in rank order, summarised once into `work`/real."""
    from tb_gpuinsight.store import envelope as cache
    from tb_gpuinsight.store import open_store
    from tb_gpuinsight.store.batch import summarize

    store = os.path.join(work, "real")
    summarize(corpus_run, store, workers=2)
    payloads = [data for _, data in open_store(store).summaries()]
    rank = [cache.load_summary(p).sections["distributed"].info["distributed"]["rank"] for p in payloads]
    return [_arrays(payloads[rank.index(r)]) for r in range(len(payloads))]


def _arrays(payload: bytes) -> Dict[str, np.ndarray]:
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def copied(arrays: Dict[str, np.ndarray], identity: Dict, rank: int, world: int) -> bytes:
    """A real summary (its arrays) as the summary of a copy: its identity, rank and world size (uncompressed)."""
    arrays = dict(arrays)
    header = json.loads(arrays["header"].tobytes())
    header["identity"] = identity
    header["sections"]["distributed"]["info"]["distributed"].update(rank=rank, world_size=world)
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def build(corpus_run: str, logdir: str, real: List[Dict[str, np.ndarray]], n: int, store_url: str) -> None:
    """`logdir`/job with n rank links, and `store_url` filled with their summaries (no rank index yet)."""
    from tb_gpuinsight.store import envelope as cache
    from tb_gpuinsight.logdir import discover
    from tb_gpuinsight.store import open_store
    from tb_gpuinsight.store.jobs import span_job

    run = os.path.join(logdir, "job")
    os.makedirs(run)
    sources = sorted(f for f in os.listdir(corpus_run) if f.endswith(".pt.trace.json.gz"))
    for i in range(n):
        os.symlink(os.path.join(corpus_run, sources[i % len(sources)]),
                   os.path.join(run, f"rank{i}.{STAMP}.pt.trace.json.gz"))
    store = open_store(store_url)
    if not store.remote:
        os.makedirs(store.directory, exist_ok=True)
    found = discover(logdir)
    for span in found[0].spans():
        job = span_job(logdir, found[0], span)
        i = int(span.worker[len("rank"):])
        data = copied(real[i % len(real)], job.identity, i, n)
        if store.remote:
            if not store.put(job.key, data):
                raise RuntimeError(f"cannot write {job.key} to {store_url}")
        else:  # test data: written plainly (a store's put also syncs each file to disk)
            with open(os.path.join(store.directory, job.key), "wb") as f:
                f.write(cache.seal(data))
