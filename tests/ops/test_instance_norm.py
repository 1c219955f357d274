"""instance_norm: several configs vs numpy on odd shapes of spatial rank 1 to 3, ONNX's
InstanceNormalization through onnx's reference evaluator, and bad input."""
import numpy as np
import pytest

import autotune
from autotune import ops

from .onnx_reference import run_node


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 5, 13), (2, 2, 3, 5, 17)])
def test_instance_norm_matches_numpy_at_several_configs(check_configs, shape):
    check_configs("instance_norm", n_random=3, shape=shape, eps=1e-3)


def test_the_plane_statistics_run_as_vector_lanes_and_old_records_as_one():
    task = autotune.create_task("instance_norm", shape=(1, 64, 56, 56))
    lanes = 2 * task.target.cpu.vector_bytes // 4      # the rule: two vectors of partial sums
    assert task.config(0)["lanes"].val == lanes
    assert f"sum.part[ramp(0, 1, {lanes})] = (sum.part[ramp(0, 1, {lanes})] + X[ramp(" in str(task.lower(0))
    old = task.config_space.from_json({"knobs": {"tile_j": [-1, 16], "parallel": 1}})
    assert old["lanes"].val == 1


def test_instance_norm_follows_onnx():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 11, 7)) * 2 + 1).astype(np.float32)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    (want,) = run_node("InstanceNormalization", [x, scale, bias], epsilon=1e-4)
    np.testing.assert_allclose(ops.instance_norm(x, scale, bias, eps=1e-4), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("args, error, message", [
    ((np.ones((2, 3), np.float32), np.ones(3, np.float32), np.ones(3, np.float32)), ValueError,
     r"instance_norm: argument x must be \(N, C, \*spatial\)"),
    ((np.ones((2, 3, 4), np.float32), np.ones(4, np.float32), np.ones(3, np.float32)), ValueError,
     r"instance_norm: argument scale must have shape \(3,\)"),
    ((np.ones((2, 3, 4), np.int32), np.ones(3, np.int32), np.ones(3, np.int32)), TypeError,
     "instance_norm: argument x, scale, bias must be float32 or float64"),
])
def test_bad_input_names_the_argument(args, error, message):
    with pytest.raises(error, match=message):
        ops.instance_norm(*args)
