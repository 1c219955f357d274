"""Generated CUDA run on the CPU with real threads (tests/cuda_emulator.py): what the GPU would
compute, barriers, warp shuffles, thread guards and virtual threads included, against numpy.
The serial reading of the same kernels is checked elsewhere; this checks the CUDA translation."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "schedules"))
from cuda_checks import TARGET, check_numerics, legal_configs  # noqa: E402
from cuda_emulator import EmulatedKernel, emulate, gxx_path  # noqa: E402
from test_cuda import elementwise, row_reduction, tiled_matmul  # noqa: E402

import autotune  # noqa: E402
from autotune.codegen.cuda import emit_cuda  # noqa: E402
from autotune.ir.lower import lower  # noqa: E402

pytestmark = pytest.mark.skipif(gxx_path() is None, reason="g++ (C++20) is needed to emulate CUDA on the CPU")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("emu"))


def test_elementwise_with_float4(workdir):
    s, args, ref = elementwise(1003, 64, 4)
    a = np.random.default_rng(0).standard_normal(1003).astype("float32")
    b = np.full(1003, np.nan, "float32")
    emulate(lower(s, args), workdir)(a, b)
    np.testing.assert_allclose(b, ref(a), rtol=1e-5)


def test_tiled_matmul_with_barriers(workdir):
    s, args = tiled_matmul(131, 97, 75)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((131, 75)).astype("float32"), rng.standard_normal((75, 97)).astype("float32")
    c = np.full((131, 97), np.nan, "float32")
    emulate(lower(s, args), workdir)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [8, 64, 512])
def test_warp_shuffle_reductions(threads, workdir):
    s, args = row_reduction(9, 1301, threads, autotune.te.max)
    a = np.random.default_rng(2).standard_normal((9, 1301)).astype("float32")
    b = np.full(9, np.nan, "float32")
    emulate(lower(s, args), workdir)(a, b)
    np.testing.assert_array_equal(b, a.max(axis=1))


def test_double_buffered_matmul_template(workdir):
    task = autotune.create_task("matmul", target=TARGET, M=67, N=45, K=39)
    knobs = dict(task.config(0).to_json()["knobs"], double_buffer=1)
    index = task.config({"knobs": knobs}).index
    s, args = task.instantiate(index)
    a, b = task.make_inputs(np.random.default_rng(8))
    c = np.full((67, 45), np.nan, "float32")
    emulate(lower(s, args), workdir)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_a_barrier_some_threads_skip_is_reported(workdir):
    s, args = tiled_matmul(64, 64, 16)
    func = lower(s, args)
    src, shape = emit_cuda(func)
    broken = src.replace("__syncthreads();", "if (threadIdx.x < 4) __syncthreads();", 1)
    a, b = np.ones((64, 16), "float32"), np.ones((16, 64), "float32")
    with pytest.raises(RuntimeError, match="met at different barriers"):
        EmulatedKernel(broken, func, shape, workdir)(a, b, np.zeros((64, 64), "float32"))


# (op, shape params, configs: the default and this many seeded legal others)
TEMPLATES = [
    ("matmul", {"M": 67, "N": 45, "K": 39}, 2),
    ("matmul", {"M": 256, "N": 256, "K": 24}, 0),     # the large-shape default: 4 vthreads along x
    ("softmax", {"M": 3, "N": 1000}, 0),              # 256 threads: shuffles, then a shared exchange
    ("dense", {"M": 37, "N": 53, "K": 29}, 1),
    ("softmax", {"M": 13, "N": 149}, 1),
    ("layer_norm", {"M": 7, "N": 301}, 1),
    ("add", {"a_shape": (37, 149), "b_shape": (149,)}, 1),
    ("var", {"shape": (5, 1000), "axes": 1, "keepdims": 0}, 1),
    ("conv2d", {"N": 1, "C": 5, "H": 13, "W": 13, "F": 7, "KH": 3, "KW": 3, "stride": 1, "padding": 1}, 1),
    ("attention", {"batch": 1, "heads": 2, "seq_q": 37, "seq_k": 37, "head_dim": 16, "causal": 1}, 1),
]


@pytest.mark.parametrize("op,params,extra", TEMPLATES, ids=[f"{t[0]}-{i}" for i, t in enumerate(TEMPLATES)])
def test_templates_on_emulated_gpu(op, params, extra, workdir):
    task = autotune.create_task(op, target=TARGET, **params)
    for index in legal_configs(task, extra, seed=7):
        check_numerics(task, index, build=lambda func: emulate(func, workdir))
