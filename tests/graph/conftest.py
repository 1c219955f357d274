"""Shared by the graph tests: one private kernel cache for the session (the tests compile the
same small kernels many times) and no tuning database, so kernels run their default configs."""
import warnings

import pytest

from autotune import runtime


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernel-cache")


@pytest.fixture(autouse=True)
def env(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(cache_dir))
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "absent.db"))
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "1")
    runtime.clear_caches()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autotune: no tuned record")
        yield tmp_path
