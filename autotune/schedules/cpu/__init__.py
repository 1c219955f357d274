"""CPU templates, one module per op family; importing a module registers its templates.

`load(op)` imports only the module of `op` (a program that loads one tuned kernel pays for one
template module, not the whole op library); `load()` imports them all. MODULE_OF_OP must name
every op a module registers: tests/schedules/test_space.py checks it against the registry.
"""
from __future__ import annotations

import importlib

_OPS_OF_MODULE: dict[str, tuple[str, ...]] = {
    "matmul": ("dense", "dense_packed", "matmul", "matmul_packed"),
    "batch_matmul": ("batch_matmul",),
    "conv2d": ("conv2d", "conv2d_grouped"),
    "conv_transpose": ("conv_transpose2d", "conv_transpose3d"),
    "conv": ("conv1d", "conv2d_bias_relu", "conv2d_bn", "conv2d_nhwc", "dense_gelu"),
    "nn": ("attention", "batch_norm", "cross_entropy", "instance_norm", "layer_norm", "log_softmax", "rms_norm",
           "softmax"),
    "elementwise": ("abs", "add", "ceil", "cos", "div", "erf", "exp", "floor", "gelu", "gelu_tanh", "hard_swish",
                    "log", "maximum", "minimum", "mul", "neg", "power", "reciprocal", "relu", "round", "rsqrt",
                    "sigmoid", "sign", "silu", "sin", "softplus", "sqrt", "sub", "tanh", "where"),
    "reduction": ("argmax", "argmin", "max", "mean", "min", "sum", "var"),
    "pooling": ("avg_pool2d", "global_avg_pool", "max_pool2d", "max_pool2d_indices"),
    "activations": ("clip", "elu", "hard_sigmoid", "leaky_relu"),
    "logic": ("cast", "equal", "greater", "greater_equal", "less", "less_equal", "logical_not"),
    "resize": ("resample", "resize"),
    "movement": ("border_pad", "concat", "expand", "pad", "slice", "take", "transpose"),
}
MODULE_OF_OP: dict[str, str] = {op: module for module, ops in _OPS_OF_MODULE.items() for op in ops}


def load(op: str | None = None) -> None:
    """Register the template of `op` (every CPU template when op is None or not a built-in)."""
    module = MODULE_OF_OP.get(op) if op is not None else None
    for name in [module] if module else _OPS_OF_MODULE:
        importlib.import_module(f"{__name__}.{name}")
