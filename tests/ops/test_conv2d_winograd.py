"""Winograd conv2d (autotune/schedules/cpu/conv2d_winograd.py) against the numpy conv2d through a
template registered here: odd shapes (tiles, panels and channel vectors all with tails), padding
0, 1 and uneven, batch 2, with and without a bias + relu epilogue, both tile sizes and both places
of the kernel transform, within the tolerance autotune's own check uses."""
import itertools
import os
import warnings
from fractions import Fraction

import numpy as np
import pytest

import autotune
from autotune import te
from autotune.errors import InstantiationError
from autotune.measure.check_data import tolerance
from autotune.measure.worker.run import compare
from autotune.schedules.cpu import conv2d_winograd as wino
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.testing import legal_configs
from autotune.topi.conv import conv2d_nchw_reference, conv_geometry
from autotune.topi.winograd import winograd_matrices

OP = "test_conv2d_winograd"


def _reference(x, w, *bias, padding, **_):
    y = conv2d_nchw_reference(x, w, 1, padding)
    return np.maximum(y + bias[0][None, :, None, None], 0) if bias else y


@autotune.template(OP, reference=_reference, description="test only: the winograd conv2d algorithm")
def winograd_template(cfg, N: int, C: int, H: int, W: int, F: int, padding, bias_relu: int, dtype="float32"):
    """The algorithm behind a one-value `algorithm` knob, as the conv2d dispatcher will run it."""
    g = conv_geometry("conv2d", C, F, (H, W), (3, 3), 1, padding, 1, 1)
    cfg.define_knob("algorithm", ["winograd"])
    wino.define_knobs(cfg, g, N, dtype, ("algorithm", ("winograd",)))
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C, 3, 3), dtype, name="W")
    extra = [te.placeholder((F,), dtype, name="bias")] if bias_relu else []

    def bias_relu_epilogue(v, i):
        return te.maximum(v + extra[0][i[1]], te.const(0, dtype))

    s, out = wino.build(cfg, X, Wt, g, bias_relu_epilogue if bias_relu else None, extra)
    return s, [X, Wt, *extra, out]


def _config(task, **values):
    """The config index with these knob values and every other knob at its default."""
    space = task.config_space
    return space.knob2point([[e.val for e in k.entities].index(values[name]) if name in values else 0
                             for name, k in space.knobs.items()])


def _check(task, index, inputs, want):
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a loop that fails to vectorize warns
        f = autotune.build(*task.instantiate(index))
    got = np.full(want.shape, np.nan, np.float32)
    f(*inputs, got)
    rtol, atol = tolerance("float32", task.reduction, {})
    wrong = compare("out", got, want, rtol, atol)
    assert wrong is None, f"config {task.config(index)}: {wrong}"


@pytest.mark.parametrize("N, C, H, W, F, padding", [
    (2, 5, 9, 11, 7, 1),            # 9x11 output: tails in both tile sizes; 7 filters: a panel tail
    (2, 3, 10, 7, 19, 0),           # 8x5 output; 19 filters: two vectors, the second a tail
    (1, 17, 6, 13, 5, (2, 1, 0, 3)),  # uneven padding, 17 channels: a vector of channels and a tail
])
def test_matches_numpy(N, C, H, W, F, padding):
    """The plain conv with both tile sizes, the kernel transform at root and in chunks; the bias +
    relu epilogue with the default and seeded random legal configs."""
    for bias_relu in (0, 1):
        task = autotune.create_task(OP, N=N, C=C, H=H, W=W, F=F, padding=padding, bias_relu=bias_relu)
        inputs = task.make_inputs(np.random.default_rng(3))
        want = task.reference(inputs)[0]
        if bias_relu:
            configs = legal_configs(task, extra=2, seed=N + C)
        else:
            configs = [_config(task, winograd_m=m, winograd_kernel_chunk=k) for m in (2, 4) for k in (0, 8)]
        for index in configs:
            _check(task, index, inputs, want)


def test_long_reduction_within_tolerance():
    """F(4x4, 3x3) loses more float32 precision than the direct conv; over 160 channels it stays
    within the tolerance the measurement's check allows."""
    task = autotune.create_task(OP, N=1, C=160, H=6, W=6, F=16, padding=1, bias_relu=0)
    inputs = task.make_inputs(np.random.default_rng(0))
    want = task.reference(inputs)[0]
    for chunk in (0, 32):
        _check(task, _config(task, winograd_m=4, winograd_kernel_chunk=chunk), inputs, want)


@pytest.mark.parametrize("m", [2, 4])
def test_matrices_compute_the_correlation_exactly(m):
    """A^T [(G g) * (B^T d)] is y[i] = sum_j d[i + j] g[j], in exact rational arithmetic."""
    at, g, bt = winograd_matrices(m)
    d = [Fraction(v) for v in (3, -1, 4, 1, -5, 9)[:m + 2]]
    w = [Fraction(2), Fraction(-7), Fraction(1, 3)]
    gw = [sum(row[j] * w[j] for j in range(3)) for row in g]
    bd = [sum(row[k] * d[k] for k in range(m + 2)) for row in bt]
    y = [sum(at[i][k] * gw[k] * bd[k] for k in range(m + 2)) for i in range(m)]
    assert y == [sum(d[i + j] * w[j] for j in range(3)) for i in range(m)]


def test_applies_to_stride_1_dilation_1_ungrouped_only():
    def geometry(stride=1, dilation=1, groups=1):
        return conv_geometry("conv2d", 4, 4, (9, 9), (3, 3), stride, 1, dilation, groups)

    assert wino.APPLIES(geometry())
    assert not any(wino.APPLIES(geometry(**kw)) for kw in (dict(stride=2), dict(dilation=2), dict(groups=2)))


def test_build_refuses_other_kernels():
    g = conv_geometry("conv2d", 4, 4, (9, 9), (5, 5), 1, 2, 1, 1)
    space = ConfigSpace(Target.parse("llvm"))
    space.define_knob("algorithm", ["winograd"])
    wino.define_knobs(space, g, 1, "float32", ("algorithm", ("winograd",)))
    X, Wt = te.placeholder((1, 4, 9, 9), name="X"), te.placeholder((4, 4, 5, 5), name="W")
    with pytest.raises(InstantiationError, match="3x3"):
        wino.build(space.get(0), X, Wt, g, None, [])


def test_default_rule_follows_the_shape():
    """m: 4 has fewer multiplies except on tiny outputs; the kernel transform is made in chunks
    inside the GEMM when there are few tiles (deep layers), at root when there are many."""

    def defaults(C, H, N=1):
        g = conv_geometry("conv2d", C, C, (H, H), (3, 3), 1, 1, 1, 1)
        space = ConfigSpace(Target.parse("llvm"))
        space.define_knob("algorithm", ["winograd", "other"])
        wino.define_knobs(space, g, N, "float32", ("algorithm", ("winograd",)))
        return {name: space[name].val for name in space.knobs}

    assert defaults(16, 2)["winograd_m"] == 2 and defaults(16, 9)["winograd_m"] == 4
    assert defaults(512, 7)["winograd_kernel_chunk"] > 0
    assert defaults(64, 56)["winograd_kernel_chunk"] == 0
    space_names = [n for n in defaults(16, 9) if n != "algorithm"]
    assert all(n.startswith("winograd_") for n in space_names)


def test_knobs_are_read_only_for_winograd():
    g = conv_geometry("conv2d", 8, 8, (9, 9), (3, 3), 1, 1, 1, 1)
    space = ConfigSpace(Target.parse("llvm"))
    space.define_knob("algorithm", ["other", "winograd"])
    wino.define_knobs(space, g, 1, "float32", ("algorithm", ("winograd",)))
    dims = [range(len(k)) for k in space.knobs.values()]
    legal = [p for p in itertools.product(*dims) if space.canonical(list(p)) == list(p)]
    assert sum(1 for p in legal if p[0] == 0) == 1        # "other" reads none of them


PAGE_FAULTS = """
import resource
import numpy as np
import autotune
task = autotune.create_task("conv2d", N=1, C=64, H=56, W=56, F=64, KH=3, KW=3, stride=1, padding=1)
knobs = {**task.config(0).to_json()["knobs"], "algorithm": "winograd"}
f = autotune.build(*task.instantiate(task.config_space.from_json({"knobs": knobs}).index))
inputs = task.make_inputs(np.random.default_rng(0))
out = np.empty((1, 64, 56, 56), np.float32)
for _ in range(20):
    f(*inputs, out)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    f(*inputs, out)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
np.testing.assert_allclose(out, task.reference(inputs)[0], rtol=1e-3, atol=1e-3)
"""


def test_heap_buffers_are_not_page_faulted_in_on_every_call(tmp_path):
    """Winograd's transformed input and products are local buffers of 2.4 MB, allocated and freed
    by every call (inside libgomp's threads too). With glibc's default thresholds each call
    faulted them in afresh (1246 page faults a call here, 0.37x onnxruntime); the C heap now
    keeps them mapped. Counted in a fresh process, after 20 calls: the first few calls fault
    while the threads' heaps settle (up to 3800 faults in the 5 calls after 3), and how many
    depends on the heap a process already has, so in the suite's own process it varied with
    the tests before it. With glibc's default thresholds the 5 calls still fault 8000 times."""
    import subprocess
    import sys
    env = {**os.environ, "AUTOTUNE_CACHE": str(tmp_path), "AUTOTUNE_NUM_THREADS": "2"}
    run = subprocess.run([sys.executable, "-c", PAGE_FAULTS], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    faults = int(run.stdout.split()[-1])
    assert faults < 100, f"{faults} page faults in 5 calls"


def test_the_output_is_stored_along_columns_not_scattered_across_channels():
    """The NCHW output is written a vector of columns at a time from the channels-last results
    (a transposed block), not a vector of channels at a stride of the image: on a 64 x 64 image
    that stride is 16 KiB and a scattered store's lanes shared one L1 set (2.4x slower)."""
    from autotune.ir.functor import walk
    from autotune.ir.nodes import Ramp, Store
    task = autotune.create_task("conv2d", N=1, C=16, H=64, W=64, F=32, KH=3, KW=3, stride=1, padding=1)
    knobs = {**task.config(0).to_json()["knobs"], "algorithm": "winograd"}
    func = task.lower(task.config_space.from_json({"knobs": knobs}).index)
    out = func.params[-1]
    stores = []
    walk(func.body, lambda n: stores.append(n) if isinstance(n, Store) and n.buffer is out else None)
    strides = {int(s.index.stride.value) for s in stores if isinstance(s.index, Ramp)}
    assert stores and strides == {1}, strides
