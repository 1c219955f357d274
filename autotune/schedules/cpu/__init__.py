"""CPU templates, one module per op family; importing this package registers them."""
from . import batch_matmul, conv2d, matmul  # noqa: F401
from . import nn  # noqa: F401  (normalization, softmax family, attention, loss)
from . import conv  # noqa: F401  (conv1d, conv2d_nhwc, conv2d_bias_relu, conv2d_bn, dense_gelu)
from . import elementwise, movement, pooling, reduction  # noqa: F401  (generic-schedule ops)
