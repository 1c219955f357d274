"""Stage.prefetch: Prefetch statements at the top of the loop, each cache line of the region the
body reads `offset` iterations later, results unchanged; illegal uses raise ScheduleError."""
from __future__ import annotations

import platform

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autotune
from autotune import te
from autotune.errors import ScheduleError
from autotune.ir.functor import walk
from autotune.ir.nodes import For, Prefetch
from autotune.schedules.task import create_task


def matvec(M: int, K: int):
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K,), "float32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M,), lambda i: te.sum(A[i, k] * B[k], axis=[k]), name="C")
    return A, B, C


def prefetches_under(body, loop_name: str) -> list[Prefetch]:
    """The Prefetch statements directly at the top of each loop named `loop_name`."""
    found: list[Prefetch] = []

    def visit(n):
        if isinstance(n, For) and n.var.name == loop_name:
            stmts = getattr(n.body, "stmts", (n.body,))
            found.extend(s for s in stmts if isinstance(s, Prefetch))

    walk(body, visit)
    return found


def test_each_iteration_fetches_the_lines_read_offset_iterations_later():
    A, B, C = matvec(8, 256)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(C.op.reduce_axis[0], 32)      # 32 floats: two 64-byte lines per iteration
    s[C].prefetch(A, ko, 3)
    f = autotune.lower(s, [A, B, C])
    fetched = prefetches_under(f.body, ko.var.name)
    assert [p.buffer.name for p in fetched] == ["A", "A"]
    text = str(f)
    assert "prefetch A[(((i * 256) + (k.outer * 32)) + 96)]" in text       # 3 iterations of 32 ahead
    assert "prefetch A[(((i * 256) + (k.outer * 32)) + 112)]" in text      # the second line of them


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 9), K=st.integers(1, 70), factor=st.integers(1, 17), offset=st.integers(1, 40))
def test_results_do_not_change_on_any_split_with_a_tail(M, K, factor, offset):
    A, B, C = matvec(M, K)
    s = te.create_schedule(C.op)
    ko, _ = s[C].split(C.op.reduce_axis[0], factor)
    s[C].prefetch(A, ko, offset)
    s[C].prefetch(B, ko, offset)
    f = autotune.build(s, [A, B, C])
    rng = np.random.default_rng(M * 100 + K)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal(K, dtype=np.float32)
    c = np.zeros(M, np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 prefetch instruction")
def test_the_cpu_code_prefetches():
    A, B, C = matvec(4, 64)
    s = te.create_schedule(C.op)
    ko, _ = s[C].split(C.op.reduce_axis[0], 16)
    s[C].prefetch(A, ko, 2)
    assert "prefetcht0" in autotune.build(s, [A, B, C]).get_source("asm")


def test_illegal_uses_name_what_was_wrong():
    A, B, C = matvec(4, 64)
    other = te.placeholder((4,), "float32", name="Other")
    s = te.create_schedule(C.op)
    i = C.op.axis[0]
    ko, ki = s[C].split(C.op.reduce_axis[0], 16)
    with pytest.raises(ScheduleError, match="does not read that tensor"):
        s[C].prefetch(other, ko, 2)
    with pytest.raises(ScheduleError, match="offset must be an int >= 1"):
        s[C].prefetch(A, ko, 0)
    io, ii = s[C].split(i, 2)
    s[C].parallel(io)
    with pytest.raises(ScheduleError, match="the axis is parallel"):
        s[C].prefetch(A, io, 1)
    s[C].prefetch(A, ii, 4)
    with pytest.raises(ScheduleError, match="the axis prefetches"):
        s[C].vectorize(ii)


def test_a_tensor_not_read_inside_the_loop_is_an_error_at_lowering():
    A, B, C = matvec(4, 64)
    D = te.compute((4,), lambda i: C[i] * 2.0, name="D")
    s = te.create_schedule(D.op)
    s[C].compute_root()
    s[D].prefetch(C, D.op.axis[0], 1)          # D reads C, until the copy below reads it instead
    s.cache_read(C, "global", [D])
    with pytest.raises(ScheduleError, match="does not read C"):
        autotune.lower(s, [A, B, D])


def test_nchwc_prefetches_weights_that_outweigh_l2_and_computes_the_conv():
    task = create_task("conv2d_bias_relu", N=1, C=37, H=9, W=11, F=40, KH=3, KW=3, stride=1, padding=1,
                       dilation=1, groups=1)
    knobs = dict(task.config_space.get(0).to_json()["knobs"], algorithm="nchwc")
    small = task.config({"index": -1, "knobs": knobs})
    assert small.to_json()["knobs"]["nchwc_prefetch"] == 0        # 53 KB of weights stay in L2
    fetching = task.config({"index": -1, "knobs": dict(knobs, nchwc_prefetch=1024)})
    assert not any(isinstance(n, Prefetch) for n in _nodes(task.lower(small).body))
    assert any(isinstance(n, Prefetch) for n in _nodes(task.lower(fetching).body))
    s, args = task.instantiate(fetching)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in a.shape], dtype=np.float32) for a in args]
    autotune.build(s, args)(*arrays)
    expected = task.reference(arrays[:-1])[0]
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-4, atol=1e-3)

    deep = create_task("conv2d_bias_relu", N=1, C=512, H=7, W=7, F=512, KH=3, KW=3, stride=1, padding=1,
                       dilation=1, groups=1)
    deep_knobs = dict(deep.config_space.get(0).to_json()["knobs"], algorithm="nchwc")
    assert deep.config({"index": -1, "knobs": deep_knobs}).to_json()["knobs"]["nchwc_prefetch"] == 4096
    # records from before the knob: an "nchwc" one meant no prefetch, a "gemm" one is unchanged
    old_gemm = {k: v for k, v in deep.config_space.get(0).to_json()["knobs"].items() if k != "nchwc_prefetch"}
    assert old_gemm["algorithm"] == "gemm" and deep.config({"index": -1, "knobs": old_gemm}).index == 0
    old_nchwc = {k: v for k, v in deep_knobs.items() if k != "nchwc_prefetch"}
    assert deep.config({"index": -1, "knobs": old_nchwc}).to_json()["knobs"]["nchwc_prefetch"] == 0


def _nodes(body) -> list:
    out: list = []
    walk(body, out.append)
    return out
