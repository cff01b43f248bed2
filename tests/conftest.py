"""Pytest fixtures shared by all tests."""
import pytest

from .corpus import CORPUS, need_corpus


@pytest.fixture
def corpus():
    """The real-trace corpus folder; skips the test when it is absent."""
    need_corpus()
    return CORPUS
