"""The README's Python examples run as written, on the CPU, each as a plain script (no `__main__` guard) in a
fresh folder beside the samples; its links to files and images point at files that exist."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def _blocks():
    with open(README, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


def test_the_readme_has_its_examples():
    assert len(_blocks()) >= 4


@pytest.mark.parametrize("number", range(len(_blocks())))
def test_a_readme_example_runs_on_the_cpu(tmp_path, number):
    pytest.importorskip("torch")
    os.symlink(os.path.join(ROOT, "samples"), tmp_path / "samples")
    _run(tmp_path, _blocks()[number], f"example_{number}")


def _run(folder, code: str, name: str) -> None:
    script = folder / f"{name}.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": ROOT, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(script)], cwd=str(folder), env=env, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, f"README example failed:\n{code}\n{out.stderr[-3000:]}"


def test_links_point_at_files():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    targets = re.findall(r"\]\(((?:docs|samples|LICENSE)[^)#]*)\)", text)
    assert "docs/img/overview.png" in targets and "LICENSE" in targets
    for target in targets:
        assert os.path.exists(os.path.join(ROOT, target)), target
        if target.endswith(".png"):
            assert os.path.getsize(os.path.join(ROOT, target)) <= 120 * 1024, target
