"""Pytest fixtures shared by all tests."""
import threading
import weakref

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


@pytest.fixture(autouse=True, scope="session")
def _logdirs_link_the_corpus():
    """Test logdirs link the read-only corpus and samples rather than copy them: discovery follows those links
    (tests/test_confinement.py checks the default, which does not)."""
    import os

    os.environ["TB_GPUINSIGHT_FOLLOW_SYMLINKS"] = "1"
    yield


@pytest.fixture(scope="session")
def samples_tensorboard(tmp_path_factory):
    """The URL of one real TensorBoard over samples/ that the browser tests reading the samples share (each opens
    its own Chromium): the samples are analysed once per session rather than once per test."""
    from .browser import SAMPLES, need_browser, tensorboard

    need_browser()
    with tensorboard(SAMPLES, str(tmp_path_factory.mktemp("samples-tensorboard") / "cache")) as url:
        yield url


@pytest.fixture(scope="session")
def dlrm_logdir(tmp_path_factory):
    """(logdir, cache): a logdir whose one run, "dlrm", links the corpus's 8-rank DLRM step, and the summary cache
    that the tests serving it share, so that each rank is analysed once per session rather than once per test.
    Tests only read the logdir; a test that must see a rank analysed afresh uses its own cache."""
    from .corpus import corpus_logdir

    root = tmp_path_factory.mktemp("dlrm")
    return corpus_logdir(root, "param/dlrm_8ranks", "dlrm"), root / "cache"


SCANNER = "gpuinsight-scan"  # the name of a LogdirService's scanner thread


@pytest.fixture(autouse=True, scope="module")
def _no_scanner_outlives_its_module(request):
    """Every LogdirService a module's tests or fixtures started is stopped when the module ends (its fixtures have
    been torn down by then: this one, autouse, was set up first), and no scanner thread may outlive the module: a
    leaked scanner rescans a deleted folder every few tenths of a second for the rest of the session."""
    from tb_gpuinsight.service import LogdirService

    started = weakref.WeakSet()
    original = LogdirService.start

    def start(self):
        started.add(self)
        return original(self)

    LogdirService.start = start
    before = {t for t in threading.enumerate() if t.name == SCANNER}
    try:
        yield started
    finally:
        LogdirService.start = original
        for service in list(started):
            service.stop()
    alive = [t for t in threading.enumerate() if t.name == SCANNER and t not in before and t.is_alive()]
    assert not alive, f"{len(alive)} scanner thread(s) of {request.module.__name__} still running after stop()"
