"""autotune: a schedule-search autotuner for tensor programs, in the style of Apache TVM.

Public API: te, lower, build, template, create_task, create_task_from_te, tune, load, ops,
__version__.
"""
from typing import Any

from . import te
from .build import build
from .ir.lower import lower
from .schedules.from_te import create_task_from_te
from .schedules.task import create_task, template

__version__ = "0.1.0"
__all__ = ["te", "lower", "build", "template", "create_task", "create_task_from_te", "tune", "load", "ops", "__version__"]


def tune(*args: Any, **kwargs: Any) -> Any:
    """Tune a task: search its config space, measure on this machine, keep every result in the
    database (see `autotune.search.tune.tune`; imported on first use to keep `import autotune` light)."""
    from .search.tune import tune as _tune

    return _tune(*args, **kwargs)


def load(*args: Any, **kwargs: Any) -> Any:
    """The best known kernel for an op at a shape (see `autotune.runtime.load`)."""
    from .runtime import load as _load

    return _load(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "ops":
        import importlib

        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
