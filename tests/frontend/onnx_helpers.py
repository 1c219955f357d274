"""Small ONNX models for the frontend tests, built with onnx.helper, and the checks they share:
run an imported graph with the numpy interpreter and compare with onnxruntime. (Imported via
sys.path.)"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from numpy_eval import check_params, has_templates, run
from onnx import helper, numpy_helper

import autotune.frontend.onnx as frontend

NP_TO_ONNX = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.int64): onnx.TensorProto.INT64,
              np.dtype(np.int32): onnx.TensorProto.INT32, np.dtype(np.bool_): onnx.TensorProto.BOOL}


def requires_templates(*names: str) -> pytest.MarkDecorator:
    """Skip only while this branch lacks a template the mapping emits (added by the onnx-ops branch)."""
    missing = [n for n in names if not has_templates(n)]
    return pytest.mark.skipif(bool(missing), reason=f"templates not on this branch yet: {missing}")


def make_model(nodes: list[Any], inputs: dict[str, tuple[tuple[Any, ...], Any]], outputs: list[str],
               inits: dict[str, np.ndarray] | None = None, opset: int = 17, name: str = "test") -> onnx.ModelProto:
    """A model of `nodes`; inputs: name -> (shape, numpy dtype); outputs' types left to inference."""
    ins = [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(dt)], list(shape)) for n, (shape, dt) in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(n) for n in outputs]
    tensors = [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()]
    graph = helper.make_graph(nodes, name, ins, outs, tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def random_feeds(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None = None,
                 seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = (shapes or {}).get(i.name) or tuple(d.dim_value for d in t.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        if dtype == np.bool_:
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[i.name] = rng.integers(0, 5, size=shape).astype(dtype)
        else:
            feeds[i.name] = rng.uniform(-2.0, 2.0, size=shape).astype(dtype)
    return feeds


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def check_against_ort(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None = None,
                      rtol: float = 1e-4, atol: float = 1e-5, feeds: dict[str, np.ndarray] | None = None) -> Any:
    """Import `model`, run it with the numpy interpreter and compare every output with onnxruntime."""
    graph = frontend.load(model, shapes=shapes)
    check_params(graph)
    feeds = feeds if feeds is not None else random_feeds(model, shapes)
    got = run(graph, feeds)
    want = ort_run(model, feeds)
    for out, expected in zip(graph.outputs, want, strict=True):
        assert got[out.name].dtype == expected.dtype, out.name
        np.testing.assert_allclose(got[out.name], expected, rtol=rtol, atol=atol, err_msg=out.name)
    return graph
