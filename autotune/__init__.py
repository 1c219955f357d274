"""autotune: a schedule-search autotuner for tensor programs, in the style of Apache TVM."""
from . import te
from .build import build
from .ir.lower import lower
from .schedules.task import create_task, template

__version__ = "0.1.0"


def tune(*args, **kwargs):
    """Tune a task (see `autotune.search.tune`); imported lazily so `import autotune` stays light."""
    from .search.tune import tune as _tune

    return _tune(*args, **kwargs)


tune.__doc__ = "Tune a task: search its config space, measure on this machine, keep every result in the database."
__all__ = ["te", "lower", "build", "template", "create_task", "tune", "__version__"]
