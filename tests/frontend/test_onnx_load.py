"""autotune.frontend.onnx.load: inputs it accepts, shapes and dtypes from ONNX shape inference,
folding of constant sub-graphs, and the errors that refuse a model before any work."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
from onnx_helpers import check_against_ort, make_model

import autotune.frontend.onnx as frontend
from autotune.graph import compile_model

F = np.float32


def _cnn(batch: str | int = "N") -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["g"], transB=1),
             helper.make_node("ArgMax", ["g"], ["label"], axis=1),
             helper.make_node("Softmax", ["g"], ["y"])]
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(F), "b": np.ones(4, F),
             "fc": rng.standard_normal((5, 16)).astype(F), "fb": np.zeros(5, F)}
    return make_model(nodes, {"x": ((batch, 3, 9, 9), F)}, ["y", "label"], inits)


def test_every_value_has_the_shape_and_dtype_of_onnx_shape_inference() -> None:
    model = _cnn()
    graph = frontend.load(model, shapes={"x": (2, 3, 9, 9)})
    bound = _cnn(2)
    inferred = onnx.shape_inference.infer_shapes(bound).graph
    infos = {v.name: v for v in [*inferred.value_info, *inferred.output, *inferred.input]}
    onnx_names = [name for name in graph.values if "/" not in name and name not in graph.constants]
    assert sorted(onnx_names) == sorted(["x", "c", "r", "p", "f", "g", "label", "y"])
    for name in onnx_names:
        t = infos[name].type.tensor_type
        assert graph.value(name).shape == tuple(d.dim_value for d in t.shape.dim), name
        assert graph.value(name).dtype == str(np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))), name
    assert [v.name for v in graph.outputs] == ["y", "label"]
    assert graph.value("label").dtype == "int64"


def _pytorch_flatten(opset: int) -> onnx.ModelProto:
    """x.view(x.size(0), -1) as torch.onnx exports it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    unsqueeze = (helper.make_node("Unsqueeze", ["n"], ["nu"], axes=[0]) if opset < 13 else
                 helper.make_node("Unsqueeze", ["n", "zero1"], ["nu"]))
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Constant", [], ["i0"], value=helper.make_tensor("i0", onnx.TensorProto.INT64, [], [0])),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0), unsqueeze,
             helper.make_node("Concat", ["nu", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flatten")]
    inits = {"zero1": np.array([0]), "minus1": np.array([-1])}
    return make_model(nodes, {"x": (("batch", 3, 5, 7), F)}, ["y"], inits, opset)


def test_a_pytorch_shape_computation_folds_to_a_view() -> None:
    graph = check_against_ort(_pytorch_flatten(17), shapes={"x": (2, 3, 5, 7)})
    assert [(n.op, n.name) for n in graph.nodes] == [("relu", "Relu_0"), ("view", "flatten")]
    assert graph.value("y").shape == (2, 105)
    assert graph.constants == {}


def test_constant_of_shape_range_and_gather_on_constants_fold() -> None:
    """Position ids: Range(0, seq) from the input's shape, an embedding row per position added."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Squeeze", ["s", "zero1"], ["seq"]),
             helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
             helper.make_node("Gather", ["table", "pos"], ["emb"]),
             helper.make_node("Shape", ["x"], ["s4"], start=-1),
             helper.make_node("ConstantOfShape", ["s4"], ["ones"],
                              value=helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Mul", ["emb", "ones"], ["emb2"]),
             helper.make_node("Add", ["x", "emb2"], ["y"])]
    inits = {"zero1": np.array([0]), "zero": np.array(0), "one": np.array(1),
             "table": np.arange(40, dtype=F).reshape(10, 4)}
    model = make_model(nodes, {"x": ((2, "seq", 4), F)}, ["y"], inits)
    graph = check_against_ort(model, shapes={"x": (2, 6, 4)})
    assert [n.op for n in graph.nodes] == ["add"]


def test_load_accepts_a_path_bytes_and_a_proto(tmp_path) -> None:
    model = _cnn(1)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    graphs = [frontend.load(m) for m in (model, model.SerializeToString(), path, str(path))]
    assert all(str(g) == str(graphs[0]) for g in graphs)


def test_an_initializer_listed_as_input_is_a_constant() -> None:
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": ((3,), F), "w": ((3,), F)}, ["y"],
                       {"w": np.ones(3, F)})
    graph = frontend.load(model)
    assert [v.name for v in graph.inputs] == ["x"]
    assert list(graph.constants) == ["w"]


def test_unsupported_ops_and_attributes_are_listed_in_one_error() -> None:
    nodes = [helper.make_node("LSTM", ["x", "w", "r"], ["h"], name="lstm_a"),
             helper.make_node("TopK", ["x", "k"], ["v", "i"]),
             helper.make_node("LSTM", ["x", "w", "r"], ["h2"], name="lstm_b"),
             helper.make_node("Resize", ["x", "", "sc"], ["up"], name="up", mode="nearest", antialias=1),
             helper.make_node("Conv", ["x", "w"], ["c3"], name="conv3", kernel_shape=[3, 3, 3]),
             helper.make_node("MaxPool", ["x"], ["mp", "mpi"], name="mp", kernel_shape=[2, 2, 2])]
    model = make_model(nodes, {"x": ((1, 2, 3, 4), F)}, ["h"])
    with pytest.raises(ValueError) as info:
        frontend.load(model)
    text = str(info.value)
    for part in ["LSTM (2 nodes, first 'lstm_a')", "TopK (1 node, first 'TopK_1')",
                 "Resize 'up': antialias=1 with mode='nearest'", "Conv 'conv3': kernel_shape=[3, 3, 3] (3-d) is not supported",
                 "MaxPool 'mp': output 'Indices' of a 3-d MaxPool (1-d and 2-d only) is not supported"]:
        assert part in text


def test_an_unknown_dimension_names_the_input() -> None:
    with pytest.raises(ValueError, match=r"input 'x' has an unknown shape \(dim 0 \(N\)\).*shapes="):
        frontend.load(_cnn())


def test_a_model_shape_inference_rejects_is_refused_with_its_error() -> None:
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": ((2, 3), F), "b": ((4, 5), F)}, ["y"])
    with pytest.raises(ValueError, match=r"onnx model 'test': shape inference failed: .*op_type:Add"):
        frontend.load(model)


def test_mean_variance_normalization_loads_where_onnx_rejects_its_own_function_body() -> None:
    """At opset 13 onnx's function body for MVN fails its strict inference (a Constant without a
    value); the output has the input's shape, and the rest of the model still gets inferred."""
    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    model = make_model(nodes, {"x": ((2, 3, 4, 5), F)}, ["y"], opset=13)
    with pytest.raises(onnx.shape_inference.InferenceError, match="MeanVarianceNormalization"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(F)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(compile_model(model)(x)[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("shapes", "message"), [
    ({"z": (1, 3, 9, 9)}, "'z', which is not an input"),
    ({"x": (1, 3, 9)}, "rank 3, the input has rank 4"),
    ({"x": (1, 4, 9, 9)}, "fixes that dimension to 3"),
])
def test_bad_shapes_are_refused(shapes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        frontend.load(_cnn(), shapes=shapes)


@pytest.mark.parametrize("opset", [12, 22, 23, 28])
def test_a_model_whose_ops_mean_the_same_loads_at_the_nearest_supported_opset(opset: int) -> None:
    """Conv, Relu, MaxPool, Flatten, Gemm, ArgMax keep their signatures from 12 to 28 (later
    versions only add types): the model imports as it does at 13 or 21 (Softmax's default axis
    changed at 13, so the CNN without it; ArgMax gained an attribute at 12)."""
    def cnn(at: int) -> onnx.ModelProto:
        model = _cnn(2)
        del model.graph.node[-1]
        del model.graph.output[0]
        model.opset_import[0].version = at
        return model

    nearest = 13 if opset < 13 else 21
    want = check_against_ort(cnn(nearest))
    got = frontend.load(cnn(opset))
    assert [(n.op, n.params) for n in got.nodes] == [(n.op, n.params) for n in want.nodes]


@pytest.mark.parametrize("nodes, opset, named", [
    ([helper.make_node("Softmax", ["x"], ["y"], name="sm")], 11, "Softmax ('sm') differs between opsets 11 and 13"),
    ([helper.make_node("Cast", ["x"], ["y"], name="ca", to=11, round_mode="up")], 28, "Cast ('ca')"),  # set, absent at 21
    ([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2], strides=[2], auto_pad="SAME_UPPER",
                       ceil_mode=1)],
     22, "MaxPool ('mp') means something else at opset 22"),      # auto_pad: whether a window drops is not told
])
def test_a_model_whose_ops_changed_is_refused_naming_them(nodes, opset: int, named: str) -> None:
    """Ops whose signature changed in a way no rewrite covers (Softmax's axis meaning, an
    attribute set that the older opset lacks, a pool whose dropped window cannot be told) are
    named."""
    model = make_model(nodes, {"x": ((1, 2, 6), F)}, ["y"], opset=opset)
    with pytest.raises(ValueError, match=rf"opset {opset} is not supported .*{re.escape(named)}"):
        frontend.load(model)


@pytest.mark.parametrize("opset", [11, 12])
def test_attributes_that_became_inputs_move_up_as_constant_inputs(opset: int) -> None:
    """PyTorch's exports at opsets 11 and 12 give Unsqueeze, Squeeze and ReduceSum axes, Split its
    sizes and Dropout its ratio as attributes, inputs since 13 (12 for Dropout): the model loads
    at 13 with those values as constants, and computes what onnxruntime does at its own opset."""
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
             helper.make_node("Split", ["u"], ["a", "b"], axis=3, split=[2, 4]),
             helper.make_node("ReduceSum", ["b"], ["r"], axes=[3], keepdims=1),
             helper.make_node("Squeeze", ["a"], ["q"], axes=[0]),
             helper.make_node("Squeeze", ["r"], ["s"]),
             helper.make_node("Dropout", ["q"], ["y"], **({"ratio": 0.3} if opset < 12 else {})),
             helper.make_node("Dropout", ["s"], ["z"])]
    model = make_model(nodes, {"x": ((1, 2, 6), F)}, ["y", "z"], opset=opset)
    graph = check_against_ort(model)
    assert [o.shape for o in graph.outputs] == [(1, 2, 2), (2,)]


def test_an_attribute_added_later_and_left_unset_does_not_stop_a_restamp() -> None:
    """ArgMax gained select_last_index at 12 and Cast round_mode at 25, each defaulting to the old
    meaning: a node that leaves it unset loads at the nearest supported opset."""
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=2), helper.make_node("Cast", ["x"], ["d"], to=11)]
    for opset, nearest in ((11, 13), (28, 21)):
        model = make_model(nodes, {"x": ((1, 2, 6), F)}, ["i", "d"], opset=opset)
        graph = frontend.load(model)
        assert graph.value("i").dtype == "int64" and graph.value("d").dtype == "float64", nearest


@pytest.mark.parametrize("op, shape, attrs", [
    ("MaxPool", (1, 2, 6, 7), dict(kernel_shape=[2, 3], strides=[3, 2], pads=[0, 1, 0, 2], ceil_mode=1)),  # both axes
    ("AveragePool", (1, 2, 5, 7), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1,
                                       count_include_pad=1)),                                    # the rows only
])
def test_a_ceil_mode_pool_whose_last_window_starts_in_the_padding_loads_at_opset_22(op, shape, attrs) -> None:
    """Opset 22 drops that window, 21 keeps it (ONNX's shape inference at 21 counts it; its
    reference evaluator, like onnxruntime, drops it at every opset): the node loads as the
    opset-21 pool and a Slice, and computes what the reference computes (MaxPool's indices too)."""
    outputs = ["y", "i"] if op == "MaxPool" else ["y"]
    x = np.random.default_rng(3).standard_normal(shape).astype(F)
    model, older = (make_model([helper.make_node(op, ["x"], outputs, **attrs)], {"x": (shape, F)}, outputs,
                               opset=opset) for opset in (22, 21))
    want = ReferenceEvaluator(model).run(None, {"x": x})
    inferred = onnx.shape_inference.infer_shapes(older).graph.output[0].type.tensor_type.shape.dim
    kept = [d.dim_value - n for d, n in zip(inferred, want[0].shape)]
    assert kept == ([0, 0, 1, 1] if op == "MaxPool" else [0, 0, 1, 0])      # the windows opset 22 drops
    for got, expected in zip(compile_model(model)(x), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_a_ceil_mode_pool_whose_windows_all_start_inside_loads_at_opset_22() -> None:
    model = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1)],
                       {"x": ((1, 2, 7), F)}, ["y"], opset=22)
    assert frontend.load(model).value("y").shape == (1, 2, 4)


def test_a_runtime_slice_bound_is_refused_naming_the_node() -> None:
    nodes = [helper.make_node("Slice", ["x", "s", "e"], ["y"], name="sl")]
    model = make_model(nodes, {"x": ((5,), F), "s": ((1,), np.int64)}, ["y"], {"e": np.array([4])})
    with pytest.raises(ValueError, match=r"output 'y' of node 'sl' has an unknown shape"):
        frontend.load(model)


def test_import_autotune_does_not_import_onnx() -> None:
    code = "import sys, autotune, autotune.graph; assert 'onnx' not in sys.modules, 'onnx imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_shape_dependent_refusal_names_the_node_and_why() -> None:
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up3")
    with pytest.raises(ValueError, match=r"ConvTranspose 'up3': 4-d ConvTranspose is not supported"):
        frontend.load(make_model([node], {"x": ((1, 2, 3, 3, 3, 3), F)}, ["y"], {"w": np.ones((2, 1, 2, 2, 2, 2), F)}))
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="cubic", antialias=1)
    with pytest.raises(ValueError, match=r"Resize 'up': a cubic antialiased downscale by 20x reads 80 taps per output"):
        frontend.load(make_model([node], {"x": ((1, 2, 5, 200), F)}, ["y"], {"s": np.array([1, 1, 1, 0.05], F)}, 19))
