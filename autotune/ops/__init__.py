"""Op dispatch: `autotune.ops.matmul(a, b)` runs the best known kernel for the arrays' shapes.

Each op checks its arguments (ndim, matching dimensions, dtype), names the op and the argument
in its errors, then goes through `autotune.load` (tuned, nearest tuned shape, or default config).
One module per op family; `sum`, `max`, `min`, `abs` and `slice` shadow Python's builtins here,
as in numpy.
"""
from .conv import (conv1d, conv2d_bias_relu, conv2d_bn, conv2d_grouped, conv2d_nhwc, dense_gelu,
                   depthwise_conv2d, fold_batch_norm)
from .elementwise import (abs, add, div, exp, gelu, log, maximum, minimum, mul, neg, power, reciprocal,  # noqa: A004
                          relu, rsqrt, sigmoid, silu, sqrt, sub, tanh, where)
from .linalg import batch_matmul, conv2d, dense, matmul
from .movement import concat, embedding, pad, permute, slice, take, transpose  # noqa: A004
from .nn import attention, batch_norm, cross_entropy, layer_norm, log_softmax, rms_norm, softmax
from .pooling import avg_pool2d, global_avg_pool, max_pool2d
from .reduction import argmax, max, mean, min, sum, var  # noqa: A004

__all__ = [
    "conv1d", "conv2d_bias_relu", "conv2d_bn", "conv2d_grouped", "conv2d_nhwc", "dense_gelu", "depthwise_conv2d",
    "fold_batch_norm", "abs", "add", "div", "exp", "gelu", "log", "maximum", "minimum", "mul", "neg", "power",
    "reciprocal", "relu", "rsqrt", "sigmoid", "silu", "sqrt", "sub", "tanh", "where", "batch_matmul", "conv2d",
    "dense", "matmul", "concat", "embedding", "pad", "permute", "slice", "take", "transpose", "attention",
    "batch_norm", "cross_entropy", "layer_norm", "log_softmax", "rms_norm", "softmax", "avg_pool2d",
    "global_avg_pool", "max_pool2d", "argmax", "max", "mean", "min", "sum", "var",
]
