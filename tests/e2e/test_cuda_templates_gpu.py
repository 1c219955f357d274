"""Every CUDA template on the real GPU (skipped without one): the default and seeded legal configs
of the template tests' odd shapes, compiled for the device's own arch, launched through PyCUDA and
compared with numpy. The CPU-side tests read the same kernels serially or on an emulator; this is
where threads really race, barriers really wait and shuffles really cross lanes."""
from __future__ import annotations

import os
import sys

import pytest

import autotune.schedules.cuda as cuda_templates
from autotune.codegen.cuda_device import gpu_available
from autotune.schedules.task import create_task

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "schedules"))
from cuda_checks import CONV_ATTENTION_CASES, TEMPLATE_CASES, check_numerics, legal_configs  # noqa: E402

pytestmark = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU (or PyCUDA) on this machine")

cuda_templates.load()
CASES = ([(op, params, extra, 0) for op, params, extra in TEMPLATE_CASES]
         + [(op, params, 3, seed) for op, params, seed in CONV_ATTENTION_CASES])


def on_the_gpu(func):
    from autotune.codegen.cuda_device import device_info
    from autotune.codegen.cuda_module import CudaFunction

    return CudaFunction.build(func, device_info()["arch"])


@pytest.mark.parametrize("op,params,extra,seed", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_configs_match_numpy_on_the_gpu(op, params, extra, seed):
    task = create_task(op, target="cuda", **params)
    configs = legal_configs(task, extra, seed)
    assert len(configs) == extra + 1, f"{task}: too few legal configs"
    for index in configs:
        check_numerics(task, index, build=on_the_gpu)
