"""Pytest fixtures shared by all tests."""
import pytest

from .corpus import CORPUS, need_corpus


@pytest.fixture
def corpus():
    """The real-trace corpus folder; skips the test when it is absent."""
    need_corpus()
    return CORPUS


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """Tests never write into the user's cache directory (summaries, memoised estimates)."""
    import os

    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
