"""Op dispatch: `autotune.ops.matmul(a, b)` runs the best known kernel for the arrays' shapes.

Each op checks its arguments (ndim, matching dimensions, dtype), names the op and the argument
in its errors, then goes through `autotune.load` (tuned, nearest tuned shape, or default config).
"""
from .linalg import batch_matmul, conv2d, dense, matmul

__all__ = ["batch_matmul", "conv2d", "dense", "matmul"]
