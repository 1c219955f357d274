"""CUDA templates: every template's default and a few seeded legal configs compute the numpy
reference (the kernel read serially on the CPU, `serialize_threads`), compile with nvcc for
sm_80 and sm_90, and illegal points are rejected at instantiation, never at build."""
from __future__ import annotations

import os
import sys

import pytest

import autotune.schedules.cuda as cuda_templates
from autotune.codegen.cuda import emit_cuda
from autotune.codegen.nvcc import compile_cuda, nvcc_path
from autotune.ir.lower import lower
from autotune.schedules.task import TEMPLATES, create_task
sys.path.insert(0, os.path.dirname(__file__))
from cuda_checks import (TARGET, TEMPLATE_CASES as CASES, check_numerics, check_rejected, guards_of_stores,  # noqa: E402
                         legal_configs)

cuda_templates.load()

ELEMENTWISE = sorted(op for op, m in cuda_templates.MODULE_OF_OP.items() if m == "elementwise")


def test_registry_matches_module_table():
    registered = {name for name, target in TEMPLATES if target == "cuda" and not name.startswith("testing.")}
    assert set(cuda_templates.MODULE_OF_OP) <= registered


@pytest.mark.parametrize("op,params,extra", CASES, ids=[c[0] for c in CASES])
def test_configs_match_numpy(op, params, extra):
    task = create_task(op, target=TARGET, **params)
    configs = legal_configs(task, extra)
    assert len(configs) == extra + 1, f"{task}: too few legal configs"
    for index in configs:
        check_numerics(task, index)


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_every_elementwise_op_default(op):
    params = ({"cond_shape": (5, 7), "a_shape": (5, 7), "b_shape": (7,)} if op == "where" else
              {"shape": (5, 67)} if op not in ("add", "sub", "mul", "div", "maximum", "minimum", "power")
              else {"a_shape": (5, 67), "b_shape": (67,)})
    task = create_task(op, target=TARGET, **params)
    if op == "power":
        pytest.skip("power of negative bases is nan in both; checked by the cpu tests")
    check_numerics(task, 0)


@pytest.mark.parametrize("op", ["matmul", "dense"])
@pytest.mark.parametrize("knobs", [{}, {"tile_y": [-1, 4, 16, 1], "tile_x": [-1, 4, 8, 1], "tile_k": [-1, 16],
                                       "fetch_vec": 4, "unroll_k": 1, "double_buffer": 1}])
def test_gemm_tails_cost_only_the_fetch_and_the_store(op, knobs):
    """At prime sizes the operands are fetched as zero beyond their bounds, so the inner product
    accumulates guard-free (only the double buffer's odd last step is a branch there) and the
    store alone tests M and N."""
    M, N, K = 67, 53, 41
    task = create_task(op, target=TARGET, M=M, N=N, K=K)
    index = task.config({"index": 0, "knobs": {**task.config(0).to_json()["knobs"], **knobs}}).index
    s, args = task.instantiate(index)
    func = lower(s, args, name="mm")
    accumulate = guards_of_stores(func.body, "C.local")
    assert accumulate
    for guards in accumulate:
        assert not any(f"< {n})" in g for g in guards for n in (M, N, K)), guards
    stores = guards_of_stores(func.body, args[-1].name)
    assert stores and all(any(f"< {M})" in g for g in guards) and any(f"< {N})" in g for g in guards)
                          for guards in stores)
    check_numerics(task, index)


def test_default_configs_for_large_shapes():
    """The defaults are the configs meant for big problems (and legal for them)."""
    mm = create_task("matmul", target=TARGET, M=4096, N=4096, K=4096)
    assert mm.config(0).to_json()["knobs"]["tile_y"] == [-1, 1, 16, 8]
    assert mm.config(0).to_json()["knobs"]["tile_k"] == [-1, 8]
    s, args = mm.instantiate(0)
    src, shape = emit_cuda(lower(s, args, name="mm"))
    assert shape.block == (16, 16, 1) and shape.grid == (32, 32, 1)
    assert "float4" in src                 # the aligned shared fetch is vectorized
    sm = create_task("softmax", target=TARGET, M=4096, N=4096)
    assert sm.is_valid(0)


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc (CUDA toolkit) not installed")
@pytest.mark.parametrize("op,params", [(c[0], c[1]) for c in CASES if c[0] in ("matmul", "softmax", "layer_norm",
                                                                                 "relu", "where")])
def test_nvcc_compiles(op, params):
    task = create_task(op, target=TARGET, **params)
    configs = legal_configs(task, 1)
    for arch, index in zip(("sm_80", "sm_90"), configs):
        s, args = task.instantiate(index)
        src, _ = emit_cuda(lower(s, args, name=f"{op}_kernel"))
        compile_cuda(src, arch)
    s, args = task.instantiate(configs[0])
    compile_cuda(emit_cuda(lower(s, args, name=f"{op}_kernel"))[0], "sm_90")


@pytest.mark.parametrize("op,params,knobs,match", [
    ("matmul", {"M": 512, "N": 512, "K": 64},
     {"tile_y": [-1, 1, 8, 16], "tile_x": [-1, 1, 8, 16]}, "register tile"),
    ("matmul", {"M": 512, "N": 512, "K": 64},
     {"tile_y": [-1, 2, 16, 16], "tile_x": [-1, 2, 16, 16], "tile_k": [-1, 32]}, "shared"),
    ("matmul", {"M": 64, "N": 64, "K": 64}, {"tile_y": [-1, 1, 4, 1], "tile_x": [-1, 1, 4, 1]}, "warp"),
    ("softmax", {"M": 8, "N": 20000}, {"cache_row": 1}, "shared memory"),
    ("relu", {"shape": (1000,)}, {"per_thread": 8}, "fewer than 2 blocks"),
])
def test_illegal_points_rejected_at_instantiation(op, params, knobs, match):
    check_rejected(op, params, knobs, match)


def test_create_task_from_te_fuses_injective_chain():
    """relu(x * w + b) from three computes tunes as one CUDA kernel."""
    from autotune import te
    from autotune.schedules.from_te import create_task_from_te

    x = te.placeholder((37, 149), name="x")
    w = te.placeholder((149,), name="w")
    b = te.placeholder((149,), name="b")
    m = te.compute(x.shape, lambda i, j: x[i, j] * w[j], name="m")
    a = te.compute(x.shape, lambda i, j: m[i, j] + b[j], name="a")
    y = te.compute(x.shape, lambda i, j: te.maximum(a[i, j], te.const(0.0, "float32")), name="y")
    task = create_task_from_te(y, [x, w, b], "test_cuda_fused_relu", target=TARGET)
    assert len(task.config_space) > 1
    for index in legal_configs(task, 2):
        src = check_numerics(task, index)
        assert src.count("__global__") == 1


def test_row_statistics_reduce_with_warp_shuffles():
    task = create_task("softmax", target=TARGET, M=37, N=149)
    s, args = task.instantiate(0)
    src, shape = emit_cuda(lower(s, args, name="sm"))
    assert src.count("__shfl_xor_sync") == 2 * 5      # max and sum, 128 threads: 5 butterfly steps
    assert shape.block == (128, 1, 1)

def test_reductions_that_keep_the_innermost_axis_are_refused_at_task_creation():
    with pytest.raises(ValueError, match="reduces the trailing axes only"):
        create_task("sum", target=TARGET, shape=(7, 9), axes=0, keepdims=0)
