"""Shared by the CUDA template tests: picking legal configs and checking one against numpy with
the kernel read serially on the CPU (`serialize_threads`)."""
from __future__ import annotations


import numpy as np

from autotune.codegen import build_module
from autotune.codegen.cuda import emit_cuda
from autotune.ir.lower import lower
from autotune.ir.nodes import IfThenElse, Seq, Store
from autotune.ir.passes.gpu import serialize_threads
from autotune.testing import legal_configs

TARGET = "cuda -arch=sm_80"

# (op, shape params, configs checked numerically: the default and this many seeded legal others)
TEMPLATE_CASES = [
    ("matmul", {"M": 67, "N": 45, "K": 39}, 4),
    ("dense", {"M": 37, "N": 53, "K": 29}, 3),
    ("softmax", {"M": 37, "N": 149}, 4),
    ("log_softmax", {"M": 11, "N": 301}, 2),
    ("layer_norm", {"M": 37, "N": 149}, 4),
    ("rms_norm", {"M": 7, "N": 1031}, 2),
    ("relu", {"shape": (37, 149)}, 3),
    ("sum", {"shape": (7, 37, 41), "axes": (1, 2), "keepdims": 0}, 2),
    ("max", {"shape": (13, 301), "axes": -1, "keepdims": 1}, 2),
    ("var", {"shape": (5, 1000), "axes": 1, "keepdims": 0}, 2),
    ("gelu", {"shape": (1031,)}, 1),
    ("add", {"a_shape": (37, 149), "b_shape": (149,)}, 2),
    ("where", {"cond_shape": (13, 1), "a_shape": (13, 31), "b_shape": (31,)}, 1),
]

CONV = {"N": 1, "C": 5, "H": 13, "W": 13, "F": 7, "KH": 3, "KW": 3, "stride": 1, "padding": 1}
ATTN = {"batch": 2, "heads": 3, "seq_q": 37, "seq_k": 37, "head_dim": 16}

# (op, shape params, seed): the default and 3 seeded legal configs of each are checked
CONV_ATTENTION_CASES = [
    ("conv2d", CONV, 0),
    ("conv2d", {**CONV, "stride": 2}, 1),
    ("conv2d", {**CONV, "N": 2, "H": 11, "W": 9, "KH": 1, "KW": 3, "padding": 0}, 2),
    ("attention", {**ATTN, "causal": 0}, 3),
    ("attention", {**ATTN, "causal": 1}, 4),
    ("attention", {**ATTN, "seq_q": 19, "seq_k": 150, "head_dim": 12, "causal": 1}, 5),
    ("attention", {**ATTN, "seq_k": 5, "causal": 0}, 6),
]


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


def guards_of_stores(stmt, buffer_name, ifs=()):
    """The conditions of the branches around each store to `buffer_name`."""
    if isinstance(stmt, Store):
        return [ifs] if stmt.buffer.name == buffer_name else []
    if isinstance(stmt, IfThenElse):
        inside = ifs + (str(stmt.cond),)
        return (guards_of_stores(stmt.then_case, buffer_name, inside)
                + (guards_of_stores(stmt.else_case, buffer_name, inside) if stmt.else_case else []))
    if isinstance(stmt, Seq):
        return [g for x in stmt.stmts for g in guards_of_stores(x, buffer_name, ifs)]
    body = getattr(stmt, "body", None)
    return guards_of_stores(body, buffer_name, ifs) if body is not None else []


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
