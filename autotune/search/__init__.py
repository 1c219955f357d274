"""Search: tuners propose configs; `tune` measures them and keeps every result."""
from .tune import TUNERS, make_tuner, tune
from .tuner import Progress, TuneResult, Tuner

__all__ = ["TUNERS", "make_tuner", "tune", "Progress", "TuneResult", "Tuner"]
