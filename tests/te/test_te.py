"""Tensor expressions: construction, TVM-compatible surface, and errors at construction."""
import pytest

import autotune.te as te
from autotune.te.expr import Compare, Reduce


def test_compute_surface_matches_tvm():
    A = te.placeholder((5, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="B")
    assert B.shape == (5,) and B.dtype == "float32"
    assert [iv.var.name for iv in B.op.axis] == ["i"]
    assert B.op.reduce_axis == (k,)
    assert B.op.input_tensors[0] is A
    assert isinstance(B.op.body, Reduce)
    assert "sum" in str(B.op.body) and "A[i, k]" in str(B.op.body)


def test_expressions_are_hashable_and_identity_equal():
    i, j = te.Var("i"), te.Var("i")
    assert bool(i == i) and not bool(i == j)
    assert isinstance(i == j, Compare)
    assert len({i, j}) == 2
    with pytest.raises(TypeError, match="te.all"):
        bool(i < j)


def test_elementwise_math_and_casts():
    A = te.placeholder((3,), name="A")
    n = te.placeholder((3,), dtype="int32", name="n")
    C = te.compute((3,), lambda i: te.sigmoid(A[i]) + te.exp(A[i]) * n[i].astype("float32")
                   + te.if_then_else(te.all(i > 0, i < 2), te.erf(A[i]), te.const(1.0)), name="C")
    assert C.dtype == "float32"
    idx = te.compute((3,), lambda i: n[i] // 2 + n[i] % 3, name="idx")
    assert idx.dtype == "int32"


@pytest.mark.parametrize("bad, exc, match", [
    (lambda A, n: te.compute((3,), lambda i: A[i, i]), IndexError, "A has 1 dimensions, indexed with 2"),
    (lambda A, n: te.compute((3,), lambda i: A[i] + n[i]), TypeError, "mixed dtypes float32"),
    (lambda A, n: te.compute((3,), lambda i: A[i + te.reduce_axis((0, 3), "r")]), ValueError, "not one of its axes"),
    (lambda A, n: te.compute((3,), lambda i: A[i] * 2 + te.sum(A[i], axis=te.reduce_axis((0, 3)))), ValueError,
     "whole body"),
    (lambda A, n: te.compute((3,), lambda i: n[i] / 2), TypeError, "use //"),
    (lambda A, n: te.compute((3,), lambda i: A[i] // 2), TypeError, "integer operands"),
    (lambda A, n: te.compute((3,), lambda i: te.exp(n[i])), TypeError, "float arguments"),
    (lambda A, n: te.compute((3,), lambda i, j: A[i]), ValueError, "2 indices but the shape has 1"),
    (lambda A, n: te.compute((0,), lambda i: A[i]), ValueError, "positive int"),
    (lambda A, n: te.placeholder((3,), dtype="float8"), TypeError, "unknown dtype"),
    (lambda A, n: te.reduce_axis((4, 4)), ValueError, "hi > lo"),
    (lambda A, n: te.compute((3,), lambda i: A[A[i]]), TypeError, "expected an integer"),
])
def test_construction_errors_name_the_problem(bad, exc, match):
    A = te.placeholder((3,), name="A")
    n = te.placeholder((3,), dtype="int32", name="n")
    with pytest.raises(exc, match=match):
        bad(A, n)
