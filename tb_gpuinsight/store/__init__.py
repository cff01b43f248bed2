"""The summary store and the engines that fill it.

A store is a directory on any fsspec file system (a local path, `s3://bucket/prefix`, `gs://bucket/prefix`, ...).
The plugin's cache directory is a store on a local path; `tb-gpuinsight summarize` fills one on a local process
pool or a Dask cluster; TensorBoard (`--gpuinsight_store URL`) serves every tab from it without reading traces.

Format (layout 1):

    STORE/<key>.npz              one summary per trace version
    STORE/failures/<key>.json    one failure record per trace version that cannot be summarised

- `<key>` = the first 40 hex digits of SHA-256 over the trace identity `path|size|version|engine|options`:
  `path` relative to the logdir ("run/worker.stamp.pt.trace.json.gz", so one store serves the logdir wherever it
  is mounted), `size` in bytes, `version` the file's mtime in ns (local) or ETag (object stores), `engine`
  `ENGINE_VERSION`, `options` the extra event args kept and the companion Execution Traces (name:size:version).
  A changed trace, ET or engine gives a new key; old summaries are simply not asked for.
- A summary is `b"TBGI-SUMMARY-1\\n"`, the 32-byte SHA-256 of the payload, then the payload: a numpy `.npz`
  archive (read with `allow_pickle=False`) holding the unrated activity columns `c_<column>`, the views' section
  arrays `s_<section>__<array>`, and `header`, a UTF-8 JSON document with the string tables, device properties,
  shape signatures, trace metadata, the sections' info, the engine version and the identity (see
  `tb_gpuinsight.store.envelope`). A reader checks the checksum, the engine version and that the identity is the
  trace's; anything else is a miss that is recomputed.
- A failure record is JSON: `{"identity", "reason" (one line), "attempts", "time" (UTC ISO 8601), "engine"}`.
  The plugin shows the reason; `summarize` skips the trace on a rerun unless `--retry-failed`; a later summary of
  the same key deletes the record.
- Writes are atomic: locally a temporary file in the same directory, fsync, then rename; on an object store the
  object is written whole under its final key in one PUT, which S3 and GCS make visible all at once (no reader
  ever sees a partial object). Concurrent writers of one key write the same content; the last one wins.
"""
from __future__ import annotations

from .summaries import SummaryStore, open_store, summary_key, trace_identity

__all__ = ["SummaryStore", "open_store", "summary_key", "trace_identity"]
