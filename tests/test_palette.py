"""The shared palette (frontend/src/palette.ts) keeps its promise: colours drawn together stay apart for normal,
deuteranopic and protanopic vision (Machado et al. 2009 simulation at full severity, CIE76 dE in CIELAB), for the
kernel classes with the idle causes (the Overview stacks them in one bar) and for the first 16 ranks; and no tab
defines category colours of its own any more."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).resolve().parent.parent / "frontend" / "src"
MACHADO = {
    "deutan": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "protan": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
}


def _block(name: str) -> str:
    text = (SRC / "palette.ts").read_text()
    start = text.index(f"export const {name}")
    return text[start: text.index("};" if "Record" in text[start: start + 120] else "];", start)]


def _hexes(name: str) -> dict:
    """key -> colour of a `Record` block (keys quoted or bare), or index -> colour of a list."""
    block = _block(name)
    pairs = re.findall(r'^\s*"?([\w ]+?)"?:\s*"(#[0-9A-Fa-f]{6})"', block, re.M)
    if pairs:
        return dict(pairs)
    return dict(enumerate(re.findall(r'"(#[0-9A-Fa-f]{6})"', block)))


def _lab(rgb: np.ndarray) -> np.ndarray:
    xyz = rgb @ np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]).T
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], -1)


def _min_distance(colours) -> float:
    srgb = np.array([[int(c[i: i + 2], 16) for i in (1, 3, 5)] for c in colours]) / 255.0
    lin = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    worst = np.inf
    for m in [np.eye(3)] + [np.array(v) for v in MACHADO.values()]:
        lab = _lab(np.clip(lin @ m.T, 0, 1))
        d = np.sqrt(((lab[:, None] - lab[None]) ** 2).sum(-1))
        np.fill_diagonal(d, np.inf)
        worst = min(worst, float(d.min()))
    return worst


def test_classes_and_idle_causes_stay_apart_for_colour_blind_eyes():
    classes = {k: v for k, v in _hexes("KERNEL_CLASS_COLORS").items() if k != "CPU op"}
    causes = _hexes("IDLE_CAUSE_COLORS")
    assert set(classes) == {"GEMM", "attention", "conv", "elementwise", "reduction", "norm", "communication", "memcpy",
                            "memset", "other"}
    from tb_gpuinsight.analysis.kernels.names import CLASSES
    assert set(CLASSES) <= set(classes)
    assert _min_distance(list(classes.values()) + list(causes.values())) >= 14


def test_sixteen_ranks_are_told_apart():
    ranks = list(_hexes("RANK_COLORS").values())
    assert len(ranks) >= 16 and len(set(ranks)) == len(ranks)
    assert _min_distance(ranks[:16]) >= 11.5
    assert _min_distance(ranks[:8]) >= 16


@pytest.mark.parametrize("path", ["views/timeline/canvas.ts", "views/overview/charts.ts",
                                  "views/criticalPath/api.ts", "views/distributed/charts.ts"])
def test_tabs_take_category_colours_from_the_palette(path):
    text = (SRC / path).read_text()
    assert re.search(r'from "(\.\./)+palette"', text), path
    # no map of category keys to colour literals of its own
    assert not re.search(r'^\s*"?(GEMM|gemm|cpu_op|data_loading|"data loading")"?:\s*"#', text, re.M), path
