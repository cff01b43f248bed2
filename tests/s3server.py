"""An S3-compatible server (moto's standalone server) on 127.0.0.1 for the object-storage tests: no network beyond
the loopback, real HTTP, real s3fs / boto3 clients."""
from __future__ import annotations

import json
import os
import socket
import urllib.request
from contextlib import contextmanager
from typing import Dict, Iterator

import pytest

KEY = SECRET = "testing"


@contextmanager
def s3_server() -> Iterator[Dict[str, str]]:
    """Start the server on a free port; yields {"endpoint", "env"}: `env` holds the variables a child process (a
    TensorBoard) needs to reach it through fsspec/s3fs. fsspec in this process is configured too, and restored."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tb_gpuinsight[s3]')")
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    import fsspec.config

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # moto keeps its buckets in process-wide state: every server starts empty (no bucket of an earlier test)
    urllib.request.urlopen(urllib.request.Request(endpoint + "/moto-api/reset", method="POST"), timeout=30).close()
    conf = {"endpoint_url": endpoint, "key": KEY, "secret": SECRET}
    saved = fsspec.config.conf.get("s3")
    fsspec.config.conf["s3"] = conf
    env = {"FSSPEC_S3": json.dumps(conf), "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "S3_ENDPOINT": endpoint, "AWS_ENDPOINT_URL": endpoint}
    try:
        yield {"endpoint": endpoint, "env": env}
    finally:
        if saved is None:
            fsspec.config.conf.pop("s3", None)
        else:
            fsspec.config.conf["s3"] = saved
        _clear_instances()
        server.stop()


def _clear_instances() -> None:
    """s3fs caches file system instances (and their listings) per configuration: a later server on another port
    must not be answered from a stale one."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


def upload(endpoint: str, bucket: str, local_dir: str, prefix: str) -> None:
    """Create `bucket` (if needed) and copy every file under `local_dir` to `prefix/` in it."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                          region_name="us-east-1")
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for dirpath, _, files in os.walk(local_dir, followlinks=True):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, local_dir).replace(os.sep, "/")
            client.upload_file(path, bucket, f"{prefix}/{rel}")
