"""Fixtures shared across the test directories."""
import signal
import time

import pytest


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
