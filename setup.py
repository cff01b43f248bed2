"""Packaging for tb_gpuinsight: a TensorBoard plugin that rates every GPU kernel of a PyTorch profile."""
import re

from setuptools import find_packages, setup

VERSION = re.search(r'__version__ = "([^"]+)"', open("tb_gpuinsight/version.py", encoding="utf-8").read()).group(1)

setup(
    name="tb_gpuinsight",
    version=VERSION,
    description="TensorBoard plugin: FLOPs, bytes and efficiency of every GPU kernel in PyTorch profiler traces",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.9",
    packages=find_packages(include=["tb_gpuinsight", "tb_gpuinsight.*"]),
    package_data={"tb_gpuinsight": ["static/*", "estimate/*.json", "analysis/kernels/*.json"]},
    install_requires=[
        # msgspec: typed JSON decode that skips unneeded fields; the reader's speed and memory rest on it.
        "msgspec>=0.18",
        "numpy>=1.22",
        # fsspec: one small pure-Python package through which logdirs and summary stores on object storage are
        # read (the protocol packages themselves are the s3/gcs extras).
        "fsspec>=2023.1",
        "pandas>=1.4",
        "tensorboard>=2.11",
        "werkzeug>=2.0",
        # cpp-demangle: the gimli-rs Rust Itanium demangler as an abi3 wheel (~0.4 MB). It reads current manglings
        # (`DF16b` bfloat16 in ROCm CK kernels) that the system's libstdc++ (cxxfilt) and the pure-Python
        # itanium_demangler reject. No wheel for Linux aarch64: there names stay raw (`demangled` is None).
        "cpp-demangle>=0.1.2; platform_machine in 'x86_64 AMD64 arm64'",
        # pycxxfilt: LLVM's demangler (~0.15 MB abi3 wheel) for the clang 18+ manglings cpp-demangle rejects
        # (template parameter declarations, `Tn...`, in current hipcc kernels); without it those show their qualified name.
        "pycxxfilt>=1.2; python_version >= '3.11'",
    ],
    extras_require={
        # torch for recording (tb_gpuinsight.profile, TensorTrace). Reading traces needs no torch: the estimates'
        # formulas and op schemas ship with the package; torch is asked only about ops another torch added.
        "torch": ["torch>=2.1"],
        # Object-store logdirs and summary stores (s3://, gs://), and batch summarising on a Dask cluster.
        "s3": ["s3fs>=2023.1"],
        "gcs": ["gcsfs>=2023.1"],
        "cluster": ["dask[distributed]>=2023.1"],
        # export-parquet: pandas writes Parquet through pyarrow (about 40 MB; most users never need it).
        "parquet": ["pyarrow>=12"],
        # `tb-gpuinsight mcp`: the Model Context Protocol server for coding assistants (the official SDK, 2.x API).
        "mcp": ["mcp>=2.3; python_version >= '3.10'"],
        # ISA-L's inflate: gzipped traces read about 1.5x faster (zlib otherwise).
        "fast": ["isal>=1.6"],
        # benchmarks/peers.py's peers (HTA brings Jupyter along: never part of the tests).
        "bench": ["orjson>=3.9", "HolisticTraceAnalysis>=0.5"],
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "orjson>=3.9", "playwright>=1.40", "torch>=2.1",
                 "moto[server]>=5", "mcp>=2.3; python_version >= '3.10'"],
    },
    entry_points={
        "console_scripts": ["tb-gpuinsight=tb_gpuinsight.cli:main"],
        "tensorboard_plugins": ["gpuinsight=tb_gpuinsight.plugin:GpuInsightLoader"],
    },
)
