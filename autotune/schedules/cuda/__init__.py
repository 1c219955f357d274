"""CUDA templates, one module per op family; importing a module registers its templates.

`load(op)` imports only the module of `op`; `load()` imports them all. MODULE_OF_OP names every
op a module registers for target "cuda" (tests/schedules/test_cuda_templates.py checks it
against the registry). The shared schedule pieces are in `generic` (no templates of its own).
"""
from __future__ import annotations

import importlib

_OPS_OF_MODULE: dict[str, tuple[str, ...]] = {
    "matmul": ("matmul", "dense"),
    "reduction": ("max", "mean", "min", "sum", "var"),
    "nn": ("layer_norm", "log_softmax", "rms_norm", "softmax"),
    "conv2d": ("conv2d",),
    "attention": ("attention",),
    "elementwise": ("abs", "add", "ceil", "cos", "div", "erf", "exp", "floor", "gelu", "gelu_tanh", "hard_swish",
                    "log", "maximum", "minimum", "mul", "neg", "power", "reciprocal", "relu", "round", "rsqrt",
                    "sigmoid", "sign", "silu", "sin", "softplus", "sqrt", "sub", "tanh", "where"),
}
MODULE_OF_OP: dict[str, str] = {op: module for module, ops in _OPS_OF_MODULE.items() for op in ops}


def load(op: str | None = None) -> None:
    """Register the CUDA template of `op` (every CUDA template when op is None or not a built-in)."""
    module = MODULE_OF_OP.get(op) if op is not None else None
    for name in [module] if module else _OPS_OF_MODULE:
        importlib.import_module(f"{__name__}.{name}")
