"""The GPU this process uses: PyCUDA (imported lazily, an optional extra), the device's primary
context, and its arch and name (from which `autotune.target` makes a key when the target names
no arch).

Without PyCUDA or without a GPU, everything CPU-side works; asking for the device raises a
BuildError that says what is missing. A target that names its arch ("cuda -arch=sm_80") needs
no GPU: kernels for it can be generated and compiled with nvcc alone.
"""
from __future__ import annotations

import atexit
import functools
from typing import Any

from ..errors import BuildError
from ..target import Target

INSTALL_HINT = "install it with pip install 'autotune[cuda]' (PyCUDA, built against your CUDA toolkit)"


def driver() -> Any:
    """`pycuda.driver` with device 0's primary context current in this thread."""
    drv = _init()
    if drv.Context.get_current() is None:
        _context().push()
    return drv


@functools.cache
def _init() -> Any:
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        raise BuildError(f"target 'cuda' needs PyCUDA, which is not importable ({exc}); {INSTALL_HINT}") from None
    try:
        drv.init()
        count = drv.Device.count()
    except drv.Error as exc:
        raise BuildError(f"target 'cuda': the CUDA driver could not start ({exc}); is there a GPU?") from None
    if count == 0:
        raise BuildError("target 'cuda': the CUDA driver sees no GPU on this machine")
    return drv


@functools.cache
def _context() -> Any:
    drv = _init()
    ctx = drv.Device(0).retain_primary_context()
    atexit.register(_release, ctx)
    return ctx


def _release(ctx: Any) -> None:
    try:
        while _init().Context.get_current() is not None:
            _init().Context.pop()
        ctx.detach()
    except Exception:  # noqa: BLE001  (the process is exiting; the driver frees the context anyway)
        pass


def device_info() -> dict[str, Any]:
    """Name, arch and limits of device 0 (starts the driver)."""
    drv = driver()
    dev = drv.Device(0)
    major, minor = dev.compute_capability()
    attr = drv.device_attribute
    return {"name": dev.name(), "arch": f"sm_{major}{minor}",
            "shared_bytes_per_block": dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK),
            "max_threads_per_block": dev.get_attribute(attr.MAX_THREADS_PER_BLOCK)}


def gpu_available() -> bool:
    """Whether this process can run CUDA kernels (PyCUDA imports and the driver sees a GPU)."""
    try:
        device_info()
    except Exception:  # noqa: BLE001  (no PyCUDA, no driver, no device, or a driver error: no usable GPU)
        return False
    return True


def check_measurable(target: Target) -> None:
    """BuildError unless this machine's GPU can run kernels for `target` (tuning measures
    every candidate on it: without one, every candidate would fail)."""
    try:
        here = device_info()["arch"]
    except BuildError as exc:
        raise BuildError(f"tuning for {str(target)!r} measures kernels on the GPU: {exc}") from None
    if target.resolved().arch != here:
        raise BuildError(f"tuning for {target.key!r} measures kernels on the GPU, but this GPU is {here}")
