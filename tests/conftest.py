"""Fixtures shared across the test directories, and the hypothesis profile."""
import os
import signal
import time

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run ("ci"), so a run is reproducible: a random
# draw once hung a CI run in LLVM's loop vectorizer (`vputils::isSingleScalar` recursing for over
# ten minutes while optimizing a random softmax schedule), which an in-process build cannot time out.
# HYPOTHESIS_PROFILE=explore draws new examples each run, to look for such bugs.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _interrupt_when_measured(proc, db: str, timeout: float = 300.0) -> None:
    """Send SIGINT (a user's Ctrl-C) to `proc` once its tuning database `db` holds a record."""
    from tuning_db import TuningDB

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        try:
            if TuningDB(db, readonly=True).records():
                break
        except Exception:  # noqa: BLE001  (not created yet)
            pass
    proc.send_signal(signal.SIGINT)


@pytest.fixture
def interrupt_when_measured():
    return _interrupt_when_measured
