"""Activations kept blocked between convolutions (autotune.graph.layout): the blocked conv
kernels compute the conv on odd shapes, a residual network keeps its activations blocked from the
stem to the last conv, converting only where an NCHW reader needs it, and the compiled model
matches onnxruntime."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import autotune
from autotune import te
from autotune.codegen import build_module
from autotune.errors import InstantiationError
from autotune.frontend import onnx as onnx_frontend
from autotune.graph.executor import prepare_graph
from autotune.graph.layout import layout_block
from autotune.graph.tuning import model_tasks
from autotune.ir.lower import lower
from autotune.measure import MeasureOptions, Measurer
from autotune.measure.types import ErrorKind
from autotune.schedules.cpu.conv2d import blocked_conv2d_schedule, nchw_geometry
from autotune.schedules.space import ConfigSpace
from autotune.topi.conv import conv2d_nchw_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models
from benchmarks.models import mobilenet_v2_stack, resnet18

ort = pytest.importorskip("onnxruntime")
BLOCK = 16


def _blocked(a: np.ndarray, b: int) -> np.ndarray:
    N, C, H, W = a.shape
    return np.ascontiguousarray(a.reshape(N, C // b, b, H, W).transpose(0, 1, 3, 4, 2))


def _nchw(a: np.ndarray) -> np.ndarray:
    N, CB, H, W, b = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 4, 2, 3).reshape(N, CB * b, H, W))


@pytest.mark.parametrize("C,H,W,F,k,stride,pad,x_block,out_block", [
    (32, 13, 11, 48, 3, 1, 1, BLOCK, BLOCK),      # F = 3 blocks: oc_bn 32 leaves a tail
    (16, 15, 9, 32, 3, 2, 1, BLOCK, BLOCK),
    (32, 15, 15, 64, 1, 2, 0, BLOCK, BLOCK),      # read in place, no copy
    (3, 23, 19, 32, 7, 2, 3, 0, BLOCK),           # the image: NCHW in, blocked out
    (32, 9, 7, 16, 3, 1, 1, BLOCK, 0),            # blocked in, NCHW out
])
def test_blocked_conv_configs_compute_the_conv(C, H, W, F, k, stride, pad, x_block, out_block):
    g = nchw_geometry("test", 1, C, H, W, F, k, k, stride, pad)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, C, H, W)).astype("float32")
    w = rng.standard_normal((F, C, k, k)).astype("float32")
    bias = rng.standard_normal(F).astype("float32")
    want = np.maximum(conv2d_nchw_reference(x, w, stride, pad) + bias[None, :, None, None], 0)
    space = ConfigSpace()
    b = te.placeholder((F,), "float32", name="bias")
    blocked_conv2d_schedule(space, g, 1, "float32", lambda v, i: v, [], x_block, out_block)
    for start in sorted({0, len(space) // 3, len(space) - 1}):
        for index in range(start, -1, -1):      # the nearest config at or below it that the template accepts
            cfg = space.get(index)
            try:
                s, args = blocked_conv2d_schedule(cfg, g, 1, "float32",
                                                  lambda v, i: te.maximum(v + b[i[1]], te.const(0, "float32")), [b],
                                                  x_block, out_block)
                break
            except InstantiationError:          # a register tile over twice the registers
                continue
        out = np.empty([int(d) for d in args[-1].shape], "float32")
        build_module(lower(s, args, "conv"))(_blocked(x, x_block) if x_block else x, w, bias, out)
        got = _nchw(out) if out_block else out
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=str(cfg))


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype("float32")
            for i in model.graph.input}


def _compile(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return autotune.compile_model(model, layout="nchwc")


def test_a_residual_network_stays_blocked_between_its_convs():
    """Every conv of ResNet-18's structure (channels multiples of the block) reads and writes
    blocked, the max pool too; the last conv writes NCHW for the global pool (nothing reads it
    blocked), so there is no conversion kernel at all, and the model matches onnxruntime."""
    model = resnet18(batch=1, image=37, width=16, num_classes=5, opset=17)
    graph, groups = prepare_graph(onnx_frontend.load(model), layout="nchwc")
    kinds = [(g.ops[0], g.kernel.inputs[0].endswith("c"), g.kernel.outputs[0].endswith("c")) for g in groups]
    block = layout_block("llvm", "nchwc")
    convs = [k for k in kinds if k[0].startswith("conv")]
    assert convs[0] == ("conv2d_grouped", False, True)          # the image comes in NCHW
    assert all(k[1] and k[2] for k in convs[1:-1]) and convs[-1] == ("conv2d_grouped", True, False)
    assert ("max_pool2d", True, True) in kinds and not any(g.ops == ("unblock",) for g in groups)
    assert any(v.shape[-1] == block and len(v.shape) == 5 for v in graph.values.values())
    feeds = _feeds(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(_compile(model).run(feeds)[0], want[0], rtol=1e-4, atol=1e-4)


def _two_convs_and_a_side_reader():
    """x -> conv+relu -> a -> conv+relu -> b, and a -> sigmoid -> c: a has an NCHW reader."""
    rng = np.random.default_rng(1)
    w1, w2 = (helper.make_tensor(n, TensorProto.FLOAT, s, rng.standard_normal(s).astype("float32").ravel())
              for n, s in (("w1", (32, 16, 3, 3)), ("w2", (48, 32, 3, 3))))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a0"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a0"], ["a"]),
             helper.make_node("Conv", ["a", "w2"], ["b0"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["b0"], ["b"]), helper.make_node("Sigmoid", ["a"], ["c"])]
    graph = helper.make_graph(nodes, "side", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 11, 9))],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("b", "c")], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_blocked_value_with_an_nchw_reader_is_converted_once():
    model = _two_convs_and_a_side_reader()
    _, groups = prepare_graph(onnx_frontend.load(model), layout="nchwc")
    assert [g.ops for g in groups].count(("unblock",)) == 1
    feeds = _feeds(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, w in zip(_compile(model).run(feeds), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


def test_a_pool_whose_output_leaves_nchw_keeps_its_input_nchw():
    """conv+relu -> max pool -> graph output: the pool writes NCHW, so it reads NCHW, so the conv
    writes NCHW: nothing blocked, no conversion."""
    rng = np.random.default_rng(2)
    w = helper.make_tensor("w", TensorProto.FLOAT, (32, 16, 3, 3), rng.standard_normal(32 * 16 * 9).astype("float32"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["a0"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a0"], ["a"]),
             helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 9, 9))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    fused, groups = prepare_graph(onnx_frontend.load(model), layout="nchwc")
    assert all(len(v.shape) != 5 for v in fused.values.values()) and len(groups) == 2
    feeds = _feeds(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(_compile(model).run(feeds)[0], want[0], rtol=1e-4, atol=1e-4)


def test_an_inverted_residual_stack_stays_nchw():
    """Its depthwise convs and narrowing 1x1 projections read NCHW (a blocked layout does not pay
    there), so no conv writes blocked and nothing is converted."""
    model = mobilenet_v2_stack(batch=1, image=17, blocks=((1, 16, 1, 1), (6, 32, 2, 2), (6, 32, 1, 1)), stem=16,
                               opset=17)
    graph, _ = prepare_graph(onnx_frontend.load(model), layout="nchwc")
    assert all(len(v.shape) != 5 for v in graph.values.values())
    feeds = _feeds(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(_compile(model).run(feeds)[0], want[0], rtol=1e-4, atol=1e-4)


def test_the_default_layout_blocks_nothing_and_bad_layouts_are_refused():
    graph = onnx_frontend.load(resnet18(batch=1, image=37, width=16, num_classes=5, opset=17))
    fused, _ = prepare_graph(graph)
    assert all(len(v.shape) != 5 for v in fused.values.values())
    with pytest.raises(ValueError, match="layout must be one of nchw, nchwc, got 'NCHWc'"):
        prepare_graph(graph, layout="NCHWc")
    with pytest.raises(ValueError, match="layout 'nchwc' is for CPU targets"):
        layout_block("cuda", "nchwc")


def test_blocked_tasks_tune_with_their_weights_hoisted():
    """tune_model's tasks are the blocked kernels; their candidates are checked and timed."""
    model = resnet18(batch=1, image=37, width=16, num_classes=5, opset=17)
    tasks = [t.task for t in model_tasks(onnx_frontend.load(model), layout="nchwc")]
    blocked = [t for t in tasks if any(len(shape) == 5 for shape, _ in t.arg_specs)]
    assert blocked and all(t.constant_inputs[:1] == (1,) for t in blocked if "conv" in t.name)
    task = next(t for t in blocked if "conv" in t.name and t.arg_specs[0][0][-1] == layout_block("llvm", "nchwc"))
    with Measurer(MeasureOptions(repeat=2, min_repeat_ms=1)) as m:
        last = next(i for i in reversed(range(len(task.config_space))) if task.is_valid(i))
        results = m.measure(task, [0, last])
    assert [(r.error_kind, r.error_msg) for r in results] == [(ErrorKind.OK, "")] * 2


def test_the_cli_inspects_and_runs_a_model_in_the_blocked_layout(tmp_path):
    """Through the real entry point: `model inspect --layout nchwc` lists the conversion kernel,
    `model run --layout nchwc` gives onnxruntime's outputs, and a bad layout is one usage line."""
    model = _two_convs_and_a_side_reader()
    path, x = tmp_path / "side.onnx", tmp_path / "x.npy"
    path.write_bytes(model.SerializeToString())
    feeds = _feeds(model)
    np.save(x, feeds["x"])

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True,
                              env=dict(os.environ, AUTOTUNE_NUM_THREADS="1"), timeout=300)

    p = cli("model", "inspect", str(path), "--layout", "nchwc", "--json")
    assert p.returncode == 0, p.stderr
    assert ["unblock"] in [g["ops"] for g in json.loads(p.stdout)["groups"]]
    p = cli("model", "run", str(path), "--input", f"x={x}", "--layout", "nchwc", "--repeat", "1", "--json")
    assert p.returncode == 0, p.stderr
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    means = [o["mean"] for o in json.loads(p.stdout)["outputs"]]
    np.testing.assert_allclose(means, [float(w.mean()) for w in want], rtol=1e-4)
    p = cli("model", "inspect", str(path), "--layout", "blocked")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--layout" in p.stderr, p.stderr
