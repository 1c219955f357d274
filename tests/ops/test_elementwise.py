"""Elementwise ops: every unary and binary op vs numpy on odd shapes (tails), broadcasting,
random configs of every template, the fused loop structure, and bad input."""
import math

import numpy as np
import pytest

import autotune
from autotune.ir.functor import walk
from autotune.ir.nodes import For, ForKind, Load, Ramp
from autotune.ops import elementwise as ops

RNG = np.random.default_rng(5)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


_erf = np.vectorize(math.erf)
UNARY_NUMPY = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "neg": np.negative, "abs": np.abs, "reciprocal": lambda x: 1 / x,
}


@pytest.mark.parametrize("op", sorted(UNARY_NUMPY))
def test_unary_op_matches_numpy_on_an_odd_shape(op):
    x = rand(7, 3, 37)
    if op in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    got = getattr(ops, op)(x)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, UNARY_NUMPY[op](x.astype(np.float64)), rtol=2e-6, atol=2e-6)


def test_gelu_tanh_approximation_and_float64():
    x = rand(131, dtype="float64")
    c = math.sqrt(2 / math.pi)
    np.testing.assert_allclose(ops.gelu(x, approximate="tanh"), 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3))),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ops.gelu(x), 0.5 * x * (1 + _erf(x / math.sqrt(2))), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["relu", "neg", "abs"])
def test_integer_unary_ops(op):
    x = RNG.integers(-50, 50, size=(5, 13)).astype(np.int32)
    np.testing.assert_array_equal(getattr(ops, op)(x), UNARY_NUMPY[op](x))


def test_zero_d_and_empty_arrays_keep_their_shape():
    assert ops.exp(np.array(0.5, np.float32)).shape == ()
    assert ops.relu(np.empty((0, 3), np.float32)).shape == (0, 3)


BROADCASTS = [((5, 37), (5, 37)), ((7, 1, 37), (3, 1)), ((37,), (5, 37)), ((5, 1), (1, 37)), ((3, 5, 7), ()),
              ((1,), (2, 3, 9))]
BINARY_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                "maximum": np.maximum, "minimum": np.minimum, "power": np.power}


@pytest.mark.parametrize("a_shape,b_shape", BROADCASTS)
@pytest.mark.parametrize("op", sorted(BINARY_NUMPY))
def test_binary_op_broadcasts_like_numpy(op, a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape)
    if op == "power":
        a = np.abs(a) + 0.5
    got = getattr(ops, op)(a, b)
    want = BINARY_NUMPY[op](a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-6)


def test_binary_with_a_python_number_and_integers():
    x = RNG.integers(-9, 9, size=(4, 11)).astype(np.int32)
    np.testing.assert_array_equal(ops.add(x, 3), x + 3)
    np.testing.assert_array_equal(ops.mul(2, x), 2 * x)
    np.testing.assert_array_equal(ops.maximum(x, x[:1]), np.maximum(x, x[:1]))
    np.testing.assert_array_equal(ops.add(x, x), x + x)             # aliased inputs are fine


def test_where_broadcasts_cond_and_branches():
    cond = RNG.standard_normal((5, 1, 37)) > 0
    a, b = rand(3, 37), rand(5, 3, 1)
    np.testing.assert_array_equal(ops.where(cond, a, b), np.where(cond, a, b))
    np.testing.assert_array_equal(ops.where(cond, a, 0.0), np.where(cond, a, np.float32(0)))


@pytest.mark.parametrize("op", sorted(UNARY_NUMPY) + ["gelu_tanh"])
def test_random_configs_of_unary_templates(op, check_configs):
    check_configs(op, shape=(3, 41))


@pytest.mark.parametrize("op,a_shape,b_shape", [("add", (6, 1, 19), (5, 1)), ("sub", (19,), (4, 19)),
                                                ("mul", (4, 19), (4, 19)), ("div", (4, 19), (1,)),
                                                ("maximum", (4, 1), (1, 19)), ("minimum", (4, 19), (19,)),
                                                ("power", (4, 19), (4, 1))])
def test_random_configs_of_binary_templates(op, a_shape, b_shape, check_configs):
    check_configs(op, n_random=3, a_shape=a_shape, b_shape=b_shape)


def test_random_configs_of_where_and_int_dtype(check_configs):
    check_configs("where", n_random=3, cond_shape=(5, 23), a_shape=(23,), b_shape=(5, 1))
    task = check_configs("add", n_random=3, a_shape=(7, 13), b_shape=(13,), dtype="int32")
    assert task.dtype == "int32"


def test_best_injective_config_is_one_parallel_vector_loop_without_gathers():
    task = autotune.create_task("add", a_shape=(64, 4096), b_shape=(4096,))
    config = {"fuse_inner": 0, "chunk": 16, "parallel": 1, "tile_inner": [-1, 2, 16]}
    s, args = task.instantiate(task.config_space.from_json({"knobs": config}))
    func = autotune.lower(s, args)
    kinds, loads = [], []
    walk(func.body, lambda n: kinds.append(n.kind) if isinstance(n, For) else
         loads.append(n) if isinstance(n, Load) else None)
    assert kinds.count(ForKind.PARALLEL) == 1 and ForKind.VECTORIZED not in kinds
    assert loads and all(isinstance(ld.index, Ramp) and ld.index.stride.value == 1 for ld in loads)


@pytest.mark.parametrize("call,error,words", [
    (lambda x: ops.add(x, x[:3]), ValueError, ["add", "a (5, 37)", "b (3, 37)"]),
    (lambda x: ops.sub(x, x.astype(np.float64)), TypeError, ["sub", "a=float32", "b=float64"]),
    (lambda x: ops.exp(x.astype(np.int32)), TypeError, ["exp", "x", "int32"]),
    (lambda x: ops.div(x.astype(np.int32), x.astype(np.int32)), TypeError, ["div", "a", "int32"]),
    (lambda x: ops.relu(x.tolist()), TypeError, ["relu", "x", "list"]),
    (lambda x: ops.where(x, x, x), TypeError, ["where", "cond", "bool"]),
    (lambda x: ops.where(x > 0, x, x[:, :2]), ValueError, ["where", "cond (5, 37)", "b (5, 2)"]),
    (lambda x: ops.gelu(x, approximate="fast"), ValueError, ["gelu", "approximate"]),
    (lambda x: ops.mul(x, "2"), TypeError, ["mul", "b"]),
])
def test_bad_input_names_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as exc:
        call(rand(5, 37))
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_bad_template_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="relu: parameter shape"):
        autotune.create_task("relu", shape=(3, 0))
    with pytest.raises(ValueError, match="add: shapes .* do not broadcast"):
        autotune.create_task("add", a_shape=(3, 4), b_shape=(5,))
