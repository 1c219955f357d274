"""The loop-nest IR and the lowering pipeline from schedules to it."""
from . import printer as _printer  # registers the loop-IR expression printers  # noqa: F401
