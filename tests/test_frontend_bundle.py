"""The committed frontend bundle: present, an ES module exporting render(), offline, small, and up to date."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "tb_gpuinsight" / "static" / "index.js"
LICENSES = ROOT / "tb_gpuinsight" / "static" / "THIRD_PARTY_LICENSES.txt"
FRONTEND = ROOT / "frontend"
# ECharts, Tabulator and Cytoscape are most of it; Tabulator's export, download and frozen-column modules (CSV/JSON
# export, sticky first column) and cytoscape-dagre (the graph's layered layout) add about 45 KB each; the Trends
# view, the memory snapshot panel and the Timeline's flows about 40 KB together.
MAX_BYTES = 1_700_000
CDN_WORDS = ("cdn", "googleapis", "gstatic", "unpkg", "jsdelivr")


@pytest.fixture(scope="module")
def bundle_text() -> str:
    assert BUNDLE.is_file(), f"{BUNDLE} is missing: run `npm ci && npm run build` in frontend/"
    return BUNDLE.read_text(encoding="utf-8")


def test_bundle_is_an_es_module_exporting_render(bundle_text):
    exports = re.findall(r"\bexport\s*\{([^}]*)\}", bundle_text)
    names = {part.strip().split(" as ")[-1].strip() for block in exports for part in block.split(",")}
    direct = re.search(r"\bexport\s+(?:async\s+)?function\s+render\s*\(", bundle_text)
    assert "render" in names or direct, "index.js must be an ES module that exports render()"
    assert not re.search(r"\brequire\s*\(\s*['\"]", bundle_text), "index.js must not need a CommonJS require()"


def test_bundle_loads_nothing_from_the_internet(bundle_text):
    hosts = re.findall(r"(?:https?:)?//([A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2,})", bundle_text)
    bad = sorted({h for h in hosts if any(word in h.lower() for word in CDN_WORDS)})
    assert not bad, f"index.js refers to CDN hosts: {bad}"
    remote = re.findall(r"""(?:\bimport\s*\(|\bfetch\s*\(|\bfrom\s*)\s*["'`]https?://""", bundle_text)
    assert not remote, "index.js imports or fetches an absolute http(s) URL; TensorBoard's CSP allows only 'self'"


def test_bundle_is_small(bundle_text):
    size = BUNDLE.stat().st_size
    assert size < MAX_BYTES, f"index.js is {size} bytes, over {MAX_BYTES}"


def test_bundled_licenses_are_shipped():
    text = LICENSES.read_text(encoding="utf-8")
    for pkg in ("tabulator-tables", "echarts", "zrender", "cytoscape-dagre", "@dagrejs/dagre"):
        assert pkg in text, f"THIRD_PARTY_LICENSES.txt lacks {pkg}"


def test_sources_never_write_html():
    """Kernel names contain <, > and &: the sources must build DOM with textContent, never innerHTML."""
    offenders = [
        str(p.relative_to(ROOT))
        for p in (FRONTEND / "src").rglob("*.ts")
        if re.search(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write", p.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"HTML written from code in {offenders}"


def test_bundle_matches_sources():
    """`npm run check` rebuilds into a temp folder and compares byte for byte with the committed bundle."""
    npm = shutil.which("npm")
    if not shutil.which("node") or not npm:
        pytest.skip("node/npm not installed: cannot rebuild the frontend bundle to compare")
    if not (FRONTEND / "node_modules").is_dir():
        pytest.skip("frontend/node_modules missing (run `npm ci` in frontend/): cannot rebuild the bundle to compare")
    proc = subprocess.run([npm, "run", "--silent", "check"], cwd=FRONTEND, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip() and not ln.startswith("npm warn")]
    assert proc.returncode == 0, lines[-1] if lines else f"npm run check exited with {proc.returncode}"
