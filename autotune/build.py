"""build: lower a schedule and compile it for a target into a callable function."""
from __future__ import annotations

from typing import Any, Sequence

from .ir.lower import lower
from .schedules.schedule import Schedule
from .te.tensor import Tensor

TARGETS = ("llvm", "cuda")


def build(s: Schedule, args: Sequence[Tensor], target: str = "llvm", name: str = "main") -> Any:
    """Compile `s` into a function called with arrays in the order of `args` (outputs written in place).

    target "llvm": the host CPU. "cuda": the GPU through PyCUDA (called with numpy arrays, copied
    to and from the device, or with GPU arrays used in place); "cuda -arch=sm_90" picks the arch."""
    kind = str(target).split()[0] if target else ""
    if kind not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    func = lower(s, args, name=name)
    if kind == "cuda":
        from .codegen.cuda_device import cuda_target_key, parse_target
        from .codegen.cuda_module import CudaFunction

        arch = parse_target(cuda_target_key(target))["arch"]
        return CudaFunction.build(func, arch)
    from .codegen import build_module

    return build_module(func)
