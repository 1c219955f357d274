"""The loop-IR wire format: lowered IR of every template survives the trip (printed text,
structure, identity, LLVM IR and CUDA source, numerics), and anything malformed, hostile or
deep ends in a ValueError that names the place."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import autotune
import autotune.ir.nodes as ir_nodes
import autotune.te.expr as te_expr
from autotune.codegen import _ir_text, build_module, compile_for, load_compiled
from autotune.codegen.cuda import emit_cuda
from autotune.ir import serialize, wire_format
from autotune.ir.functor import structural_equal, transform, walk
from autotune.ir.lower import lower
from autotune.ir.nodes import (Allocate, Broadcast, Buffer, Evaluate, For, ForKind, IfThenElse, Let, Load,
                               Prefetch, PrimFunc, Ramp, Seq, Store, ThreadAllReduce)
from autotune.ir.passes.gpu import serialize_threads
from autotune.testing import legal_configs
from autotune.ir.serialize import dumps, func_from_json, func_to_json, loads
from autotune.ir.wire_format import NODES, TE_ONLY
from autotune.schedules.task import TEMPLATES, _load_templates, create_task
from autotune.te.expr import (And, Binary, BinOp, Call, Cast, CmpOp, Compare, Const, IterVar, Not, Or, Reduce,
                               Select, TensorLoad, Var)
from autotune.te.traversal import field_names

CUDA = "cuda -arch=sm_80"
# Small odd shapes for every CPU template (every split has a tail).
CPU_SHAPES = {
    "matmul": dict(M=13, N=37, K=19), "dense": dict(M=13, N=37, K=19), "dense_gelu": dict(M=13, N=37, K=19),
    "matmul_packed": dict(M=13, N=37, K=19, panel=16), "dense_packed": dict(M=13, N=37, K=19, panel=24),
    "batch_matmul": dict(batch=3, M=13, N=37, K=19),
    "conv2d": dict(N=1, C=5, H=9, W=11, F=7, KH=3, KW=3, stride=2, padding=1),
    "conv2d_grouped": dict(N=1, C=6, H=9, W=11, F=9, KH=3, KW=3, stride=1, padding=(1, 2), dilation=2, groups=3),
    "conv1d": dict(N=2, C=6, L=37, F=5, K=3, stride=1, padding=1, dilation=1, groups=1),
    "conv2d_nhwc": dict(N=1, H=9, W=11, C=6, F=9, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=3),
    "conv2d_bias_relu": dict(N=1, C=5, H=9, W=11, F=7, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=1),
    "conv2d_bn": dict(N=1, C=4, H=9, W=11, F=6, KH=3, KW=1, stride=(2, 1), padding=(1, 0, 2, 0), dilation=1,
                      groups=2),
    "softmax": dict(M=13, N=37), "log_softmax": dict(M=13, N=37), "layer_norm": dict(M=13, N=37),
    "rms_norm": dict(M=13, N=37), "batch_norm": dict(N=2, C=3, H=5, W=7), "cross_entropy": dict(N=7, C=37),
    "attention": dict(batch=1, heads=2, seq_q=13, seq_k=37, head_dim=19, causal=1),
    "max_pool2d": dict(shape=(2, 3, 13, 17), kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
    "avg_pool2d": dict(shape=(1, 2, 9, 23), kernel=(2, 3), stride=(1, 2), padding=(1, 1)),
    "max_pool2d_indices": dict(shape=(2, 3, 13, 17), out=(7, 9), kernel=(3, 3), stride=(2, 2), padding=(1, 1),
                               dilation=(1, 1), column_major=1),
    "global_avg_pool": dict(shape=(2, 3, 7, 9)), "transpose": dict(shape=(5, 7, 19), axes=(2, 0, 1)),
    "pad": dict(shape=(5, 19), pad_before=(1, 2), pad_after=(0, 3), value=-1.5),
    "border_pad": dict(shape=(5, 19), pad_before=(1, 2), pad_after=(6, 3), mode="reflect"),
    "concat": dict(shape=(5, 37), axis=1, sizes=(10, 20, 7)),
    "slice": dict(shape=(9, 37), begin=(1, -3), end=(8, 2), step=(2, -3)),
    "take": dict(weight_shape=(11, 37), indices_shape=(3, 5)), "argmax": dict(shape=(7, 37), axes=1, keepdims=0),
    "argmin": dict(shape=(7, 37), axes=(0, 1), keepdims=1),
    "where": dict(cond_shape=(13, 1), a_shape=(13, 31), b_shape=(31,)),
    **{op: dict(shape=(7, 13, 37), axes=(1, 2), keepdims=0) for op in ("sum", "mean", "max", "min", "var")},
    **{op: dict(shape=(5, 37)) for op in ("abs", "exp", "gelu", "gelu_tanh", "log", "neg", "reciprocal", "relu",
                                          "rsqrt", "sigmoid", "silu", "sqrt", "tanh")},
    **{op: dict(a_shape=(5, 37), b_shape=(37,)) for op in ("add", "sub", "mul", "div", "maximum", "minimum", "power")},
    **{op: dict(shape=(5, 37)) for op in ("erf", "hard_swish", "leaky_relu", "elu", "hard_sigmoid")},
    "clip": dict(shape=(5, 37), lo=-1.0, hi=float("inf")), "logical_not": dict(shape=(5, 37), dtype="bool"),
    "cast": dict(shape=(5, 37), to="int64"), "expand": dict(shape=(37, 1), out_shape=(3, 37, 13)),
    **{op: dict(a_shape=(5, 37), b_shape=(37,)) for op in ("equal", "less", "greater", "less_equal", "greater_equal")},
    **{op: dict(shape=(5, 37)) for op in ("floor", "ceil", "round", "sign", "softplus", "sin", "cos")},
    "conv_transpose2d": dict(N=1, C=6, H=7, W=9, F=4, KH=3, KW=3, stride=2, padding=1, output_padding=1,
                             dilation=1, groups=2),
    "conv_transpose3d": dict(N=1, C=6, D=3, H=7, W=9, F=4, KD=2, KH=3, KW=3, stride=2, padding=1,
                             output_padding=1, dilation=1, groups=2),
    "instance_norm": dict(shape=(2, 3, 7, 9), eps=1e-5),
    "resize": dict(shape=(1, 2, 7, 9), out_shape=(1, 2, 13, 17), mode="linear", coord="half_pixel",
                   nearest="round_prefer_floor"),
    "resample": dict(shape=(1, 2, 7, 9), axis=3, out_extent=5, taps=6, extrapolate=1, fill=-1.5),
}
CUDA_CASES = [
    ("matmul", dict(M=67, N=45, K=39)), ("softmax", dict(M=37, N=149)), ("layer_norm", dict(M=37, N=149)),
    ("sum", dict(shape=(7, 37, 41), axes=(1, 2), keepdims=0)), ("relu", dict(shape=(37, 149))),
    ("attention", dict(batch=1, heads=2, seq_q=13, seq_k=37, head_dim=16, causal=1)),
]


def lowered(task, index: int) -> PrimFunc:
    s, args = task.instantiate(index)
    return lower(s, args, name=f"{task.name}_{index}")


def buffers_in_order(func: PrimFunc) -> list[Buffer]:
    """Each distinct Buffer object, params first, then in walk order."""
    seen: dict[int, Buffer] = {id(b): b for b in func.params}
    walk(func.body, lambda n: seen.setdefault(id(n.buffer), n.buffer) if hasattr(n, "buffer") else None)
    return list(seen.values())


def assert_same(f: PrimFunc, g: PrimFunc) -> None:
    """g is f rebuilt: same text, attrs, structure (vars matched one to one), buffers matched one
    to one with equal fields, and the same sharing of objects (identical re-serialization)."""
    assert str(g) == str(f) and g.name == f.name and g.attrs == f.attrs
    bf, bg = buffers_in_order(f), buffers_in_order(g)
    assert [dataclasses.astuple(b) for b in bf] == [dataclasses.astuple(b) for b in bg]
    back = dict(zip(map(id, bg), bf))
    body = transform(g.body, lambda n: dataclasses.replace(n, buffer=back[id(n.buffer)])
                     if hasattr(n, "buffer") else None)
    vmap: dict = {}
    assert structural_equal(f.body, body, vmap)
    assert len({id(v) for v in vmap.values()}) == len(vmap)          # distinct vars stay distinct
    assert [back[id(b)] for b in g.params] == list(f.params)
    assert dumps(g) == dumps(f)


# ---- the format table --------------------------------------------------------------------------

def test_the_table_covers_every_node_class_and_the_docstring_documents_it():
    classes = {c for m in (te_expr, ir_nodes) for c in vars(m).values()
               if isinstance(c, type) and dataclasses.is_dataclass(c) and issubclass(c, (te_expr.Node, IterVar))}
    assert classes == {cls for cls, _ in NODES.values()} | set(TE_ONLY)
    doc = wire_format.__doc__
    for kind, (cls, fields) in NODES.items():
        assert [n for n, _ in fields] == list(field_names(cls)), kind
        row = re.search(rf"^{kind} +(.*)$", doc, re.M)
        assert row, f"{kind} missing from the docstring's table"
        assert [f.split(":")[0].strip() for f in row.group(1).split(", ")] == [n.rstrip("_") for n, _ in fields]


def test_the_docstring_example_is_what_dumps_writes():
    example = re.search(r"\(spaces added\)::\n\n(.*?)\n\n", wire_format.__doc__, re.S).group(1)
    A, B, i = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32"), Var("i")
    f = PrimFunc("inc", (A, B), For(i, 4, ForKind.SERIAL, Store(B, i, Load(A, i) + 1.0)), {"outputs": (1,)})
    assert json.loads(example) == json.loads(dumps(f))
    assert str(func_from_json(json.loads(example))) == str(f)


# ---- round trips of real lowered IR ------------------------------------------------------------

def test_every_cpu_template_has_a_shape_here():
    """Every built-in CPU template (other tests register templates of their own)."""
    _load_templates()
    built_in = {n for (n, t), tmpl in TEMPLATES.items()
                if t == "llvm" and tmpl.func.__module__.startswith("autotune.schedules.cpu.")}
    assert built_in <= set(CPU_SHAPES)


@pytest.mark.parametrize("op", sorted(CPU_SHAPES))
def test_cpu_templates_round_trip(op):
    task = create_task(op, **CPU_SHAPES[op])
    for index in legal_configs(task, 3):
        f = lowered(task, index)
        g = loads(dumps(f))
        assert_same(f, g)
        assert _ir_text(g) == _ir_text(f)


def _shared_lines_sorted(src: str) -> list[str]:
    """The CUDA source with its __shared__ declarations in sorted order: the double-buffer pass
    orders them by iterating a set of Buffers (by id), so their order varies between objects."""
    lines = src.splitlines()
    shared = sorted(x for x in lines if x.strip().startswith("__shared__"))
    return [x for x in lines if not x.strip().startswith("__shared__")] + shared


@pytest.mark.parametrize("op,params", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_templates_round_trip(op, params):
    task = create_task(op, target=CUDA, **params)
    for index in legal_configs(task, 2):
        f = lowered(task, index)
        g = loads(dumps(f))
        assert_same(f, g)
        (src_f, shape_f), (src_g, shape_g) = emit_cuda(f), emit_cuda(g)
        assert shape_g == shape_f and _shared_lines_sorted(src_g) == _shared_lines_sorted(src_f)


def test_cuda_ir_has_what_the_gpu_needs_and_computes_serially():
    seen = set()
    for op, params in CUDA_CASES:
        g = loads(dumps(lowered(create_task(op, target=CUDA, **params), 0)))
        walk(g.body, lambda n: seen.add("bound") if isinstance(n, For) and n.kind is ForKind.THREAD_BOUND else
             seen.add("allreduce") if isinstance(n, ThreadAllReduce) else
             seen.add(n.buffer.scope) if isinstance(n, Allocate) else None)
    assert {"bound", "allreduce", "shared", "local"} <= seen
    task = create_task("softmax", target=CUDA, M=37, N=149)
    run_and_check(task, build_module(serialize_threads(loads(dumps(lowered(task, 0))))))


def run_and_check(task, fn) -> None:
    inputs = task.make_inputs(np.random.default_rng(7))
    outs = [np.full(shape, np.nan, dtype=dtype) for shape, dtype in task.arg_specs[task.num_inputs:]]
    fn(*inputs, *outs)
    for got, want in zip(outs, task.reference(inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["matmul", "softmax"])
def test_round_tripped_ir_builds_the_same_code_and_computes_numpy(op):
    task = create_task(op, **CPU_SHAPES[op])
    for index in legal_configs(task, 1):
        f = lowered(task, index)
        g = loads(dumps(f))
        sig, obj = compile_for(g, task.target)
        assert (sig, obj) == compile_for(f, task.target)
        run_and_check(task, load_compiled(sig, obj))


WORKER = """
import json, sys
from autotune.codegen import compile_for
from autotune.ir.serialize import loads
from autotune.target import Target
sig, obj = compile_for(loads(sys.stdin.buffer.read()), Target.from_key(sys.argv[1]))
open(sys.argv[2], "wb").write(obj)
print(json.dumps(sig))
"""


def test_a_worker_process_builds_from_the_bytes_alone(tmp_path):
    task = create_task("matmul", M=31, N=29, K=17)
    data = dumps(lowered(task, legal_configs(task, 1)[-1]))
    root = Path(autotune.__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", WORKER, task.target_key, str(tmp_path / "obj")], input=data,
                       capture_output=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    run_and_check(task, load_compiled(json.loads(p.stdout), (tmp_path / "obj").read_bytes()))


def test_a_large_unrolled_matmul_round_trips():
    task = create_task("matmul", M=1024, N=1024, K=1024)
    # 8 rows x 32 columns unrolled, k by 16: the largest unrolled tile the template accepts on 16 registers
    knobs = {**task.config(0).to_json()["knobs"], "tile_k": [-1, 16], "tile_y": [-1, 16, 8], "tile_x": [-1, 32],
             "unroll_rows": 1}
    f = lowered(task, task.config({"knobs": knobs}).index)
    assert str(loads(dumps(f))) == str(f)


# ---- identity and constants --------------------------------------------------------------------

def every_kind() -> PrimFunc:
    """A small function with every node kind and field variant of the table."""
    A, S = Buffer("A", (16,), "float32"), Buffer("S", (8,), "float32", "shared", double_buffer=True)
    acc, i, t, x = Buffer("acc", (1,), "float32", "local"), Var("i"), Var("t"), Var("x", "float32")
    ramp = Ramp(i * 4, Const(1, "int32"), 4)
    cond = And(Or(i < 2, Compare(CmpOp.NE, i, t)), Not(i >= 3))
    value = Select(Broadcast(cond, 4), Load(A, ramp, Broadcast(i <= 3, 4)), Broadcast(Cast("float32", i), 4))
    body = Seq((
        Store(S, ramp, value, Broadcast(Const(True, "bool"), 4)),
        Store(acc, Const(0, "int32"), Call("exp", (Load(S, t),), "float32")),
        ThreadAllReduce(acc, "sum", "threadIdx.x"),
        IfThenElse(t == 0, Let(x, Load(acc, Const(0, "int32")), Store(A, i, x * 2.0)),
                   Evaluate(Call("syncthreads", (), "int32"))),
        IfThenElse(t > 1, Store(A, t, Const(0.0, "float32"))),
        Prefetch(A, i + 16),
    ))
    loops = For(i, 4, ForKind.SERIAL, Allocate(S, Allocate(acc, body)))
    return PrimFunc("every", (A,), For(t, 8, ForKind.THREAD_BOUND, loops, "threadIdx.x"), {"outputs": (0,)})


def test_every_node_kind_round_trips():
    f = every_kind()
    kinds = set()
    walk(f.body, lambda n: kinds.add(type(n).__name__))
    assert kinds == set(NODES)
    assert_same(f, loads(dumps(f)))


def test_identity_of_vars_and_buffers_is_kept():
    A, B = Buffer("A", (6,), "float32"), Buffer("A", (6,), "float32")   # same name, two buffers
    i, j = Var("i"), Var("i")                                             # same name, two vars
    index = i * 3 + j                                                     # one expression, used twice
    body = For(i, 2, ForKind.SERIAL, For(j, 3, ForKind.PARALLEL, Store(B, index, Load(A, index) + Load(A, j))))
    g = loads(dumps(PrimFunc("f", (A, B), body)))
    outer, inner = g.body, g.body.body
    store = inner.body
    assert outer.var is not inner.var and outer.var.name == inner.var.name == "i"
    assert store.index.a.a is outer.var and store.index.b is inner.var and store.value.b.index is inner.var
    assert store.value.a.index is store.index                             # sharing kept
    assert g.params[0] is not g.params[1] and store.value.a.buffer is g.params[0] and store.buffer is g.params[1]
    assert store.value.b.buffer is g.params[0]


CONSTS = [(math.inf, "float32"), (-math.inf, "float32"), (math.nan, "float32"), (-0.0, "float32"),
          (0.1, "float64"), (5e-324, "float64"), (1.7976931348623157e308, "float64"), (65504.0, "float16"),
          (-2 ** 63, "int64"), (2 ** 63 - 1, "int64"), (-128, "int8"), (255, "uint8"), (-2 ** 31, "int32"),
          (True, "bool"), (False, "bool"), (3, "float32")]


def test_constants_survive_bit_for_bit():
    body = Seq(tuple(Evaluate(Const(v, d)) for v, d in CONSTS))
    got = [s.value for s in loads(dumps(PrimFunc("c", (), body))).body.stmts]
    for (v, d), c in zip(CONSTS, got):
        assert c.dtype == d and type(c.value) is type(v)
        assert (math.isnan(c.value) if isinstance(v, float) and math.isnan(v) else
                c.value == v and math.copysign(1, c.value) == math.copysign(1, v))


@pytest.mark.parametrize("value,dtype", [(128, "int8"), (-1, "uint8"), (2 ** 31, "int32"), (1, "bool"),
                                         (True, "int32"), (0.5, "int32"), (2 ** 1100, "float32")])
def test_constants_a_dtype_cannot_hold_are_refused_both_ways(value, dtype):
    with pytest.raises(ValueError, match=f"Const node: field value: .* is not a {dtype} constant"):
        dumps(PrimFunc("c", (), Evaluate(Const(value, dtype))))
    doc = func_to_json(PrimFunc("c", (), Evaluate(Const(0, "int32"))))
    doc["nodes"][0] = ["Const", value, dtype]
    with pytest.raises(ValueError, match=rf"nodes\[0\] \(Const\) field value: .* is not a {dtype} constant"):
        func_from_json(json.loads(json.dumps(doc)))


def test_attrs_travel_as_json_and_anything_else_is_refused():
    body = Evaluate(Const(0, "int32"))
    attrs = {"outputs": (1, 2), "nested": {"a": [1, 2.5, None, True, "x"]}}
    assert loads(dumps(PrimFunc("f", (), body, attrs))).attrs == {"outputs": (1, 2),
                                                                   "nested": {"a": (1, 2.5, None, True, "x")}}
    for bad, words in [({"s": {1, 2}}, r"\['s'\].*set"), ({1: 2}, ": key 1 is not a string"),
                       ({"x": [math.nan]}, r"\['x'\]\[0\]: nan"), ({"o": object()}, r"\['o'\]: <object .* is not JSON-able")]:
        with pytest.raises(ValueError, match=f"PrimFunc.attrs{words}"):
            dumps(PrimFunc("f", (), body, bad))


@pytest.mark.parametrize("node,name", [
    (lambda A: TensorLoad(A, (Const(0, "int32"),)), "TensorLoad of A"),
    (lambda A: Reduce("sum", Const(1.0, "float32"), ()), r"Reduce \(sum\)"),
    (lambda A: Binary(BinOp.ADD, IterVar(Var("k"), 0, 4), Const(1, "int32")), "IterVar k"),
])
def test_te_only_nodes_are_refused_by_name(node, name):
    A = autotune.te.placeholder((4,), name="A")
    with pytest.raises(ValueError, match=f"cannot serialize the {name}: a te-only node"):
        dumps(PrimFunc("f", (), Evaluate(node(A))))


def test_deep_chains_round_trip_without_recursion():
    i, one, depth = Var("i"), Const(1, "int32"), 100_000
    e = i
    for _ in range(depth):
        e = Binary(BinOp.ADD, e, one)
    g = loads(dumps(PrimFunc("deep", (), For(i, 3, ForKind.SERIAL, Evaluate(e)))))
    e, n = g.body.body.value, 0
    while isinstance(e, Binary):
        assert e.b.value == 1
        e, n = e.a, n + 1
    assert n == depth and e is g.body.var


# ---- malformed input ---------------------------------------------------------------------------

def small_doc() -> dict:
    task = create_task("softmax", **CPU_SHAPES["softmax"])
    return json.loads(dumps(lowered(task, 0)))


def first(doc: dict, kind: str) -> int:
    return next(i for i, n in enumerate(doc["nodes"]) if n[0] == kind)


def deep_list(depth: int) -> list:
    x: list = []
    for _ in range(depth):
        x = [x]
    return x


MALFORMED = [
    (lambda d: d.update(format="tvm.ir"), r"expected format 'autotune.loop_ir', found 'tvm.ir'"),
    (lambda d: d.update(version=2), "expected version 1 of autotune.loop_ir, found 2"),
    (lambda d: d.update(version=True), "expected version 1 .* found True"),
    (lambda d: d.pop("nodes"), r"missing \['nodes'\]"),
    (lambda d: d.update(extra=1), r"unknown \[\"'extra'\"\]"),
    (lambda d: d.update(attrs=[]), "'attrs' must be a JSON object"),
    (lambda d: d["nodes"].__setitem__(3, ["Frobnicate", 1]), r"nodes\[3\]: unknown node kind 'Frobnicate'"),
    (lambda d: d["nodes"].__setitem__(3, ["TensorLoad", 0, [0]]), r"nodes\[3\]: unknown node kind 'TensorLoad'"),
    (lambda d: d["nodes"].__setitem__(3, 7), r"nodes\[3\]: unknown node kind 7"),
    (lambda d: d["nodes"][first(d, "For")].__setitem__(2, "3"), r"\(For\) field extent: expected an int >= 0"),
    (lambda d: d["nodes"][first(d, "For")].__setitem__(3, "LOOP"), r"\(For\) field kind: expected a ForKind name"),
    (lambda d: d["nodes"][first(d, "For")].__setitem__(4, 0), r"\(For\) field body: expected a statement, node 0"),
    (lambda d: d["nodes"][first(d, "For")].__setitem__(1, first(d, "Const")), r"field var: expected a Var"),
    (lambda d: d["nodes"][first(d, "For")].pop(), r"\(For\): expected 5 field\(s\)"),
    (lambda d: d["nodes"][first(d, "Binary")].__setitem__(1, "PLUS"), r"\(Binary\) field op: expected a BinOp"),
    (lambda d: d["nodes"][first(d, "Binary")].__setitem__(2, 10 ** 6), r"\(Binary\) field a: node id 1000000 out"),
    (lambda d: d["nodes"][first(d, "Binary")].__setitem__(2, first(d, "Binary")), r"field a: node id \d+ out"),
    (lambda d: d["nodes"][first(d, "Binary")].__setitem__(2, -1), r"field a: node id -1 out of range"),
    (lambda d: d["nodes"][first(d, "Binary")].__setitem__(2, True), r"field a: expected the id of an expression"),
    (lambda d: d["nodes"][first(d, "Var")].__setitem__(2, "float33"), r"\(Var\) field dtype: expected a dtype"),
    (lambda d: d["nodes"][first(d, "Load")].__setitem__(1, 99), r"\(Load\) field buffer: expected a buffer id"),
    (lambda d: d["nodes"][first(d, "Load")].__setitem__(3, [1]), r"\(Load\) field predicate: expected the id"),
    (lambda d: d["buffers"][0].__setitem__(3, "texture"), r"buffers\[0\] \('\w+'\) scope: expected one of"),
    (lambda d: d["buffers"][0].__setitem__(1, [3, -1]), r"buffers\[0\] \('\w+'\) shape: expected a list of ints"),
    (lambda d: d["buffers"].__setitem__(0, {}), r"buffers\[0\]: expected \[name, shape"),
    (lambda d: d.update(params=[0, 999]), r"params\[1\]: expected a buffer id, 0..\d+, got 999"),
    (lambda d: d.update(body=first(d, "Binary")), "IR body: expected a statement, node"),
    (lambda d: d.update(body=deep_list(100_000)), "IR body: expected the id of a statement, got a list of 1"),
    (lambda d: d["nodes"].__setitem__(0, deep_list(100_000)), r"nodes\[0\]: unknown node kind a list of 1"),
    (lambda d: d["nodes"][first(d, "Call")].__setitem__(2, deep_list(100_000)), r"\(Call\) field args: expected"),
    (lambda d: d.update(attrs={"a": deep_list(100_000)}), "attrs: nested deeper than 64"),
]


@pytest.mark.parametrize("edit,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_documents_name_the_place(edit, message):
    doc = small_doc()
    edit(doc)
    with pytest.raises(ValueError, match=message):
        func_from_json(doc)


@pytest.mark.parametrize("data,message", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"), (b"\xff\xfe{}", "not valid UTF-8 JSON"),
    (b'{"format": NaN}', "NaN is not JSON"), (b"", "not valid UTF-8 JSON"), (b"[1, 2]", "expected a JSON object"),
])
def test_malformed_bytes(data, message):
    with pytest.raises(ValueError, match=message):
        loads(data)


def test_loads_wants_bytes():
    with pytest.raises(TypeError, match="loads expects bytes, got str"):
        loads("{}")


# ---- hypothesis: garbage in, ValueError out ----------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                    max_leaves=12)
WORDS = (list(NODES) + ["float32", "int32", "bool", "ADD", "LT", "SERIAL", "THREAD_BOUND", "global", "shared",
                        "sum", "inf", "nan", "threadIdx.x"])
FIELD = st.one_of(st.integers(-1, 6), st.integers(-1, 6), st.sampled_from(WORDS), st.none(), st.booleans(),
                  st.lists(st.integers(-1, 6), max_size=3), JSON)


def node_of(kind: str) -> st.SearchStrategy:
    """A node entry of `kind`, mostly of the right arity, fields drawn from plausible values."""
    arity = len(NODES[kind][1]) if kind in NODES else 2
    return st.lists(FIELD, min_size=arity, max_size=arity).map(lambda f: [kind, *f]) | st.lists(FIELD, max_size=6)


NODE = st.sampled_from(list(NODES) + ["Bogus"]).flatmap(node_of)
BUFFER = st.one_of(st.tuples(st.text(max_size=3), st.lists(st.integers(-1, 5), max_size=3),
                             st.sampled_from(["float32", "int32", "bool", "float99"]),
                             st.sampled_from(wire_format.SCOPES + ("x",)), st.booleans()).map(list), JSON)
DOCS = st.fixed_dictionaries({
    "format": st.sampled_from([serialize.FORMAT] * 9 + ["x"]),
    "version": st.sampled_from([1] * 9 + [2, "1", True]), "name": st.text(max_size=4),
    "attrs": st.dictionaries(st.text(max_size=3), JSON, max_size=2),
    "buffers": st.lists(BUFFER, max_size=3), "params": st.lists(st.integers(-1, 3), max_size=3),
    "nodes": st.lists(NODE, max_size=12), "body": st.integers(-1, 12)}) | JSON


REAL = dumps(every_kind())


def only_value_error(doc) -> None:
    """Decoding raises ValueError or gives a function that encodes and decodes again."""
    try:
        func = func_from_json(doc)
    except ValueError:
        return
    assert dumps(loads(dumps(func))) == dumps(func)


@settings(max_examples=400, deadline=None)
@given(DOCS)
def test_garbage_documents_raise_only_value_error(doc):
    only_value_error(doc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_real_documents_raise_only_value_error(data):
    doc = json.loads(REAL)
    for _ in range(data.draw(st.integers(1, 3))):
        node = doc["nodes"][data.draw(st.integers(0, len(doc["nodes"]) - 1))]
        node[data.draw(st.integers(0, len(node) - 1))] = data.draw(FIELD)
    only_value_error(doc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 10 ** 6), st.binary(max_size=3))
def test_random_and_corrupted_bytes_raise_only_value_error(noise, at, patch):
    for data in (noise, REAL[:at % len(REAL)] + patch + REAL[at % len(REAL) + len(patch):]):
        try:
            loads(data)
        except ValueError:
            pass

