"""CPU templates, one module per op family; importing this package registers them."""
from . import batch_matmul, conv2d, matmul  # noqa: F401
