"""Compute definitions of the op library (te only), like TVM's topi."""
from . import conv, elementwise, movement, nn, pooling, reduction, winograd  # noqa: F401
