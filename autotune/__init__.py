"""autotune: a schedule-search autotuner for tensor programs, in the style of Apache TVM.

Public API: te, lower, build, template, create_task, create_task_from_te, tune, tune_tasks, load,
compile_model, tune_model, ops, __version__.

Names beyond build and lower load on first use: measurement workers (which import
`autotune.measure.worker`) never load the template, search or runtime machinery.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .build import build  # also the name of its module: bound here, so `autotune.build` is the function
from .ir.lower import lower

if TYPE_CHECKING:
    from . import ops, te
    from .graph.executor import compile_model
    from .graph.tuning import tune_model
    from .runtime import load
    from .schedules.from_te import create_task_from_te
    from .schedules.task import create_task, template
    from .search.tune import tune, tune_tasks

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "build",
    "compile_model",
    "create_task",
    "create_task_from_te",
    "load",
    "lower",
    "ops",
    "te",
    "template",
    "tune",
    "tune_model",
    "tune_tasks",
]

_WHERE = {"te": (".te", None), "ops": (".ops", None),
          "create_task_from_te": (".schedules.from_te", "create_task_from_te"),
          "create_task": (".schedules.task", "create_task"), "template": (".schedules.task", "template"),
          "tune": (".search.tune", "tune"), "tune_tasks": (".search.tune", "tune_tasks"),
          "load": (".runtime", "load"), "compile_model": (".graph.executor", "compile_model"),
          "tune_model": (".graph.tuning", "tune_model")}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    module, attr = _WHERE[name]
    value = importlib.import_module(module, __name__)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
