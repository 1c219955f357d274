"""A fake measurer for the search tests: deterministic seconds, nothing built."""
import time

import pytest

from autotune.measure.types import ErrorKind, MeasureResult


class IndexCost:
    """Seconds from the config index alone (any template)."""

    def measure(self, task, indices):
        return [MeasureResult((1e-3 * (1 + i % 7),) * 3, ErrorKind.OK, "", 0.01, time.time()) for i in indices]

    def close(self):
        pass


@pytest.fixture
def index_cost():
    return IndexCost()
