"""build: lower a schedule and compile it for a target into a callable function."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .ir.lower import lower
from .schedules.schedule import Schedule
from .target import Target
from .te.tensor import Tensor


def build(s: Schedule, args: Sequence[Tensor], target: str | Target = "llvm", name: str = "main") -> Any:
    """Compile `s` into a function called with arrays in the order of `args` (outputs written in place).

    target "llvm": the host CPU. "cuda": the GPU through PyCUDA (called with numpy arrays, copied
    to and from the device, or with GPU arrays used in place); "cuda -arch=sm_90" picks the arch."""
    target = Target.parse(target)
    func = lower(s, args, name=name)
    if target.kind == "cuda":
        from .codegen.cuda_module import CudaFunction

        arch = target.resolved().arch
        assert arch is not None   # resolved() fills in the arch of a cuda target
        return CudaFunction.build(func, arch)
    from .codegen import build_module

    return build_module(func)
