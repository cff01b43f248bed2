"""The Triton kernels Inductor generated in this process, kept beside the traces that launch them.

A Triton kernel's launch op records the file Inductor wrote it to (``kernel_file``, ``<kernel_hash>.py`` in the
compiling machine's cache, often a temporary folder). A model compiled before profiling started records no
``kernel_num_gb``; its kernels' bytes are then exact only from that file (estimate/inductor_source.py), so each span
copies the kernel files loaded so far into ``{logdir}/inductor_kernels/<hash[1:3]>/<hash>.py`` (the cache's own
layout, where the analysis looks). Files already there are not copied again; a kernel file is a few KB.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Iterable, Set

FOLDER = "inductor_kernels"
_HASH = re.compile(r"^c[a-z0-9]{16,80}$")
_MAX_BYTES = 4 << 20


def loaded_kernel_files() -> Iterable[str]:
    """Paths of the generated modules Inductor has loaded in this process (kernels and wrappers alike)."""
    try:
        from torch._inductor.codecache import PyCodeCache
    except Exception:  # a torch build without Inductor
        return []
    modules = list(getattr(PyCodeCache, "modules", []) or []) + list(
        (getattr(PyCodeCache, "modules_no_attr", {}) or {}).values())
    return [f for f in (getattr(m, "__file__", None) for m in modules) if isinstance(f, str)]


def keep_kernel_sources(logdir: str, files: Iterable[str], done: Set[str]) -> int:
    """Copy every Triton kernel among `files` not in `done` into the logdir's kernel folder; returns how many were
    copied. `done` (the stems seen, copied or not) is updated, so each file is read once per process. A file that
    cannot be read or written is skipped: keeping sources never fails a profile."""
    copied = 0
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem in done or not _HASH.match(stem) or not path.endswith(".py"):
            continue
        done.add(stem)
        try:
            if os.path.getsize(path) > _MAX_BYTES:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                if "@triton.jit" not in f.read():
                    continue  # a wrapper or a C++ kernel's module: no Triton kernel to size
            target = os.path.join(logdir, FOLDER, stem[1:3], stem + ".py")
            if not os.path.exists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(path, target)
                copied += 1
        except OSError:
            continue
    return copied
