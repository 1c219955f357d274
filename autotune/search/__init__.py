"""Search: tuners propose configs; `tune` measures them and keeps every result."""
from .tune import TUNERS, make_tuner, tune
from .tuner import Progress, Tuner, TuneResult

__all__ = ["TUNERS", "Progress", "TuneResult", "Tuner", "make_tuner", "tune"]
