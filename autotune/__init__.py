"""autotune: a schedule-search autotuner for tensor programs, in the style of Apache TVM."""
from . import te
from .build import build
from .ir.lower import lower

__version__ = "0.1.0"
__all__ = ["te", "lower", "build", "__version__"]
