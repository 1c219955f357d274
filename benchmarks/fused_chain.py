"""relu(x * w + b) written as three te computes: the fused-chain workload of the CPU and GPU op
benchmarks, which pass it to `create_task_from_te`."""
from __future__ import annotations

import numpy as np

from autotune import te


def relu_mul_add(n: int) -> tuple[te.Tensor, list[te.Tensor]]:
    """(output, [x, w, b]) of the chain over n float32 elements."""
    x, w, b = (te.placeholder((n,), "float32", name=name) for name in ("x", "w", "b"))
    m = te.compute((n,), lambda i: x[i] * w[i], name="mul")
    a = te.compute((n,), lambda i: m[i] + b[i], name="add")
    y = te.compute((n,), lambda i: te.maximum(a[i], te.const(0, "float32")), name="relu")
    return y, [x, w, b]


def relu_mul_add_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(x * w + b, 0)]
