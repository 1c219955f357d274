"""Weight transforms run once when a model is compiled (issue 14): a conv whose weight is a graph
constant runs, under the config the database gives it, the kernel variant that reads its blocked
(nchwc) or Winograd-transformed (U) weight made at compile time, and the model still computes
onnxruntime's answer; algorithms that read the weight in place, or make U per chunk inside the
GEMM, run as before. prepack=False keeps the per-call transforms."""
import os
import sys
import time

import numpy as np
import pytest

from autotune import runtime
from autotune.graph import compile_model
from autotune.testing import legal_configs
from tuning_db import Record, TuningDB

sys.path.insert(0, os.path.dirname(__file__))
from onnx import TensorProto, helper, numpy_helper
from test_fusion import check_against_ort, feeds_of, rand


def _model(nodes, inputs, outputs, consts):
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_model(C=13, F=19, H=11, W=9, stride=1, group=1, bn=False):
    """x -> Conv(w) (3x3, padding 1), with bn: -> BatchNormalization -> Relu (fused: the folded
    weight of conv2d_bias_relu)."""
    consts = {"w": rand(F, C // group, 3, 3, scale=0.3)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[stride, stride], group=group)]
    if bn:
        consts |= {"g": rand(F) + 1.5, "b": rand(F), "m": rand(F), "v": np.abs(rand(F)) + 0.5}
        nodes += [helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], "bn"),
                  helper.make_node("Relu", ["n"], ["y"], "relu")]
    return _model(nodes, [("x", [1, C, H, W])], ["y" if bn else "c"], consts)


def _conv_node(m):
    """(index, kernel) of the model's one conv kernel."""
    return next((i, k) for i, k in m.kernels.items() if "conv" in k.task.name)


def _store(db_path, task, index):
    config = task.config(index)
    with TuningDB(db_path) as db:
        run = db.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, "random", 1, 1)
        db.add_records(run, [Record(task.workload_key, task.target_key, index, config.to_json(), (1e-3,), "ok",
                                    "", 0.1, time.time())])


def _reads(m, i):
    """The names of the parameters the function of kernel node i takes."""
    func, _ = m.node_call(i)
    return [p["name"] for p in func.signature()["params"]]


CHUNKS = [8, 16, 32, 64]
CASES = {   # id: (model, knob values the configs take, stage hoisted or None)
    "nchwc": (conv_model(), {"algorithm": ["nchwc"]}, "kernel_vec"),
    "winograd": (conv_model(), {"algorithm": ["winograd"], "winograd_kernel_chunk": [0]}, "wino_U"),
    "winograd-chunked": (conv_model(), {"algorithm": ["winograd"], "winograd_kernel_chunk": CHUNKS}, None),
    "gemm": (conv_model(), {"algorithm": ["gemm"]}, None),
    "nchw": (conv_model(), {"algorithm": ["nchw"]}, None),
    "depthwise-stride2-nchwc": (conv_model(C=17, F=17, stride=2, group=17), {"algorithm": ["nchwc"]}, "kernel_vec"),
    "grouped-nchwc": (conv_model(C=14, F=18, group=2), {"algorithm": ["nchwc"]}, "kernel_vec"),
    "bn-folded-nchwc": (conv_model(bn=True), {"algorithm": ["nchwc"]}, "kernel_vec"),
    "bn-folded-winograd": (conv_model(bn=True), {"algorithm": ["winograd"], "winograd_kernel_chunk": [0]}, "wino_U"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_conv_runs_its_tuned_config_on_weights_transformed_at_compile_time(case, tmp_path):
    model, where, stage = CASES[case]
    i, kernel = _conv_node(compile_model(model))
    configs = legal_configs(kernel.task, 1, where=where)
    assert configs, f"no legal config with {where}"
    for n, index in enumerate(configs):
        db = tmp_path / f"{n}.db"
        _store(db, kernel.task, index)
        m = compile_model(model, db=db)
        assert (m.kernels[i].provenance, m.kernels[i].config) == ("tuned", kernel.task.config(index).to_json())
        weight = m.graph.nodes[i].inputs[1]                 # the raw or folded weight constant
        _, args = m.node_call(i)
        if stage is None:
            assert i not in m.hoisted.funcs and "W" in _reads(m, i) and weight in args and weight in m.buffers
        else:
            assert stage in _reads(m, i) and "W" not in _reads(m, i) and weight not in m.buffers
            (made,) = m.hoisted.constants
            assert made.startswith(f"{weight}/{stage}#") and made in args and weight not in args
        assert m.summary()["kernels"][0]["hoisted"] == (stage is not None)
        check_against_ort(model, m)


def test_a_weight_shared_by_two_convs_is_transformed_once_per_kernel(tmp_path):
    """Two convs of one shape read w (one hoisted tensor), a third of another shape reads it too
    (its own); the raw w is let go, and memory counts what is bound."""
    C, F = 13, 19
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", [x, "w"], [y], y, **conv) for x, y in (("x1", "y1"), ("x2", "y2"), ("x3", "y3"))]
    model = _model(nodes, [("x1", [1, C, 11, 9]), ("x2", [1, C, 11, 9]), ("x3", [1, C, 15, 9])], ["y1", "y2", "y3"],
                   {"w": rand(F, C, 3, 3, scale=0.3)})
    _, kernel = _conv_node(compile_model(model))
    index = legal_configs(kernel.task, 0, where={"algorithm": ["nchwc"]})[0]
    _store(tmp_path / "t.db", kernel.task, index)
    m = compile_model(model, db=tmp_path / "t.db")
    assert len(m.hoisted.funcs) == 3 and len(m.hoisted.constants) == 2 and m.hoisted.unread == {"w"}
    shared = [m.node_call(j)[1][1] for j in sorted(m.hoisted.funcs)]
    assert shared[0] == shared[1] != shared[2]
    assert "w" not in m.buffers and "w" not in m.graph.constants and m.summary()["memory"]["constant_bytes"] == sum(
        a.nbytes for a in m.hoisted.constants.values())
    check_against_ort(model, m)


def test_prepack_false_keeps_the_transform_in_the_kernel(tmp_path):
    model = conv_model(bn=True)
    m = compile_model(model, prepack=False)
    assert not m.hoisted.funcs and m.weights.keys() == m.graph.constants.keys()
    assert all(m.node_call(i) == (k.func, m.graph.nodes[i].inputs + m.graph.nodes[i].outputs)
               for i, k in m.kernels.items())
    hoisted = compile_model(model)
    feeds = feeds_of(model)
    np.testing.assert_allclose(hoisted.run(feeds)[0], m.run(feeds)[0], rtol=1e-5, atol=1e-5)


def test_a_second_process_loads_both_parts_from_the_disk_cache(monkeypatch):
    model = conv_model(C=17, F=17, H=23, W=21, stride=2)     # its default algorithm: nchwc
    compile_model(model)
    runtime.clear_caches()                     # as a new process would start

    def no_compiler(*_):
        raise AssertionError("compiled again")

    monkeypatch.setattr(runtime, "compile_for", no_compiler)
    m = compile_model(model)
    assert m.hoisted.funcs
    check_against_ort(model, m)


def test_prepacked_matmuls_are_not_packed_again():
    from test_prepack import shared_weight_graph

    m = compile_model(shared_weight_graph(), fuse=False)
    assert {n.op for n in m.graph.nodes} >= {"matmul_packed", "dense_packed"} and not m.hoisted.funcs
