"""Weight transforms hoisted out of kernels: `lower(..., given=...)` reads a stage's buffer as a
parameter instead of computing it, and `plan_hoist` finds the weight-only stages at root of the
conv algorithms (blocked weights of "nchwc", Winograd's U) and splits the kernel into a prologue
and a kernel that reads its result; both together compute numpy's answer on odd shapes."""
import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune.codegen import build_module
from autotune.errors import ScheduleError
from autotune.ir.functor import walk
from autotune.ir.hoist import plan_hoist
from autotune.ir.nodes import Allocate, Store
from autotune.testing import legal_configs

RNG = np.random.default_rng(3)


def _nodes(func, cls):
    out = []
    walk(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _scaled_weight(n=13):
    """Y = X + P with P = 2 W (at root, split with a tail): P reads only W."""
    X, W = te.placeholder((n,), name="X"), te.placeholder((n,), name="W")
    P = te.compute((n,), lambda i: W[i] * 2.0, name="P")
    Y = te.compute((n,), lambda i: X[i] + P[i], name="Y")
    s = te.create_schedule(Y.op)
    s[P].split(P.op.axis[0], 4)
    return s, X, W, P, Y


def test_a_given_stage_is_a_parameter_read_and_never_computed():
    s, X, W, P, Y = _scaled_weight()
    func = autotune.lower(s, [X, P, Y], name="k", given=[P])
    assert [b.name for b in func.params] == ["X", "P", "Y"] and func.attrs["outputs"] == (2,)
    assert not _nodes(func, Allocate) and {st.buffer.name for st in _nodes(func, Store)} == {"Y"}
    x, p = (RNG.standard_normal(13).astype(np.float32) for _ in range(2))
    y = np.empty(13, np.float32)
    build_module(func)(x, p, y)
    np.testing.assert_array_equal(y, x + p)
    whole = autotune.lower(s, [X, W, Y])                # without `given`, P is computed in the function
    assert [a.buffer.name for a in _nodes(whole, Allocate)] == ["P"]


def test_only_a_stage_at_root_that_is_not_an_output_can_be_given():
    s, X, W, P, Y = _scaled_weight()
    with pytest.raises(ValueError, match="given P is missing from args"):
        autotune.lower(s, [X, Y], given=[P])
    with pytest.raises(ValueError, match="input W is read but missing"):
        autotune.lower(s, [X, Y])
    with pytest.raises(ScheduleError, match=r"given Y: .* it is an output"):
        autotune.lower(s, [X, W, Y], given=[Y])
    s[P].compute_inline()
    with pytest.raises(ScheduleError, match=r"given P: .* it is inlined"):
        autotune.lower(s, [X, P, Y], given=[P])
    s, X, W, P, Y = _scaled_weight()
    s[P].compute_at(s[Y], Y.op.axis[0])
    with pytest.raises(ScheduleError, match=r"given P: .* it is attached with compute_at"):
        autotune.lower(s, [X, P, Y], given=[P])


def _split_run(task, index, consts=(1,)):
    """Run config `index` split into prologue + kernel; returns (plan, output, numpy's output)."""
    plan = plan_hoist(*task.instantiate(index), consts)
    inputs = task.make_inputs(RNG)
    want = task.reference(inputs)[0]
    if plan is None:
        return None, None, want
    prologue = build_module(plan.prologue("prologue"))
    hoisted = [np.empty(t.shape, t.dtype) for t in plan.tensors]
    prologue(*(inputs[i] for i in plan.prologue_inputs), *hoisted)
    out = np.full(want.shape, np.nan, want.dtype)
    build_module(plan.kernel("kernel"))(*(inputs[i] if k == "input" else hoisted[i] for k, i in plan.sources), out)
    return plan, out, want


CONV = dict(N=1, C=13, H=11, W=9, F=19, KH=3, KW=3, stride=1, padding=1)
GROUPED = dict(N=1, C=14, H=9, W=11, F=18, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=2)
DEPTHWISE = dict(N=1, C=17, H=11, W=9, F=17, KH=3, KW=3, stride=2, padding=1, dilation=1, groups=17)


def _configs(task, algorithm, chunk=None):
    """The first legal config of this algorithm and one more (Winograd: kernel_chunk 0 or > 0)."""
    where = {"algorithm": [algorithm]}
    if chunk is not None:
        where["winograd_kernel_chunk"] = [8, 16, 32, 64] if chunk else [0]
    return legal_configs(task, 1, where=where)


@pytest.mark.parametrize("op, params, algorithm, chunk, hoisted", [
    ("conv2d", CONV, "nchwc", None, ("kernel_vec",)),
    ("conv2d", CONV, "winograd", False, ("wino_U",)),
    ("conv2d", CONV, "winograd", True, ()),          # U made per chunk where the GEMM uses it: stays
    ("conv2d", CONV, "gemm", None, ()),               # W read in place
    ("conv2d", CONV, "nchw", None, ()),
    ("conv2d_grouped", GROUPED, "nchwc", None, ("kernel_vec",)),
    ("conv2d_grouped", DEPTHWISE, "nchwc", None, ("kernel_vec",)),
], ids=["nchwc", "winograd", "winograd-chunked", "gemm", "nchw", "grouped-nchwc", "depthwise-nchwc"])
def test_conv_weight_transforms_are_hoisted_and_the_split_computes_the_conv(op, params, algorithm, chunk, hoisted):
    task = autotune.create_task(op, **params)
    configs = _configs(task, algorithm, chunk)
    assert configs, f"no legal {algorithm} config sampled"
    for index in configs:
        plan, out, want = _split_run(task, index)
        assert (tuple(t.name for t in plan.tensors) if plan else ()) == hoisted
        if plan is None:
            continue
        assert plan.sources == (("input", 0), ("hoisted", 0)) and plan.prologue_inputs == (1,)
        kernel = plan.kernel("kernel")
        assert [b.name for b in kernel.params][:2] == ["X", hoisted[0]]
        assert hoisted[0] not in {a.buffer.name for a in _nodes(kernel, Allocate)}
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_what_is_hoisted_follows_which_inputs_are_constant():
    task = autotune.create_task("conv2d", **CONV)
    index = _configs(task, "nchwc")[0]
    assert plan_hoist(*task.instantiate(index), ()) is None
    plan = plan_hoist(*task.instantiate(index), (0,))     # X constant, W not: X's repack is hoisted
    assert [t.name for t in plan.tensors] == ["data_vec"] and plan.sources == (("hoisted", 0), ("input", 1))
    with pytest.raises(ValueError, match="positions of inputs"):
        plan_hoist(*task.instantiate(index), (2,))


def test_dense_weight_packing_is_hoisted_and_the_prepacked_kernels_have_nothing_left_to_pack():
    dense = autotune.create_task("dense", M=7, N=37, K=29)
    plan, out, want = _split_run(dense, 0, consts=(1, 2))
    assert [t.name for t in plan.tensors] == ["packedB"] and plan.prologue_inputs == (1,)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    for op in ("dense_packed", "matmul_packed"):
        task = autotune.create_task(op, M=7, N=37, K=29, panel=16)
        assert plan_hoist(*task.instantiate(0), range(1, task.num_inputs)) is None
