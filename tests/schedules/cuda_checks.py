"""Shared by the CUDA template tests: picking legal configs and checking one against numpy with
the kernel read serially on the CPU (`serialize_threads`)."""
from __future__ import annotations


import numpy as np

from autotune.codegen import build_module
from autotune.codegen.cuda import emit_cuda
from autotune.ir.lower import lower
from autotune.ir.passes.gpu import serialize_threads
from autotune.testing import legal_configs

TARGET = "cuda -arch=sm_80"


def run_serially(func):
    return build_module(serialize_threads(func))


def check_numerics(task, index: int, build=run_serially) -> str:
    """Build config `index` (by default serially for the CPU; `build(func)` gives the callable),
    compare with numpy; returns the CUDA source."""
    s, args = task.instantiate(index)
    func = lower(s, args, name=f"{task.name}_kernel")
    src, shape = emit_cuda(func)
    assert shape.threads <= 1024 and shape.shared_bytes <= 48 * 1024
    fn = build(func)
    inputs = task.make_inputs(np.random.default_rng(index))
    if task.name in ("log", "sqrt", "rsqrt"):
        inputs = [np.abs(x) + np.float32(0.5) for x in inputs]
    outs = [np.full(shp, np.nan, dtype=np.float32 if dt == "float32" else dt)
            for shp, dt in task.arg_specs[task.num_inputs:]]
    fn(*inputs, *outs)
    for got, want in zip(outs, task.reference(inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{task} config {task.config(index).to_json()['knobs']}")
    return src


def check_rejected(op: str, params: dict, knobs: dict, match: str) -> None:
    """The default config with `knobs` changed is refused at instantiation, naming `match`."""
    import pytest

    from autotune.errors import InstantiationError
    from autotune.schedules.task import create_task

    task = create_task(op, target=TARGET, **params)
    default = task.config(0).to_json()
    config = task.config({"index": 0, "knobs": {**default["knobs"], **knobs}})
    with pytest.raises(InstantiationError, match=match):
        task.instantiate(config)
    assert not task.is_valid(config.index)
