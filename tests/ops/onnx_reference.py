"""One-node ONNX models run by onnx's reference evaluator: the ONNX semantics the op tests compare
against (onnx is imported only by the tests that use it)."""
from __future__ import annotations

from typing import Any

import numpy as np

ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9, "float64": 11}


def run_node(op_type: str, inputs: list[np.ndarray], n_outputs: int = 1, opset: int = 19,
             extra: tuple[np.ndarray | None, ...] = (), runtime: str = "reference", **attrs: Any) -> list[np.ndarray]:
    """`op_type` with `attrs` on `inputs` (graph inputs i0, i1, ...), then `extra` inputs given
    as initializers (a Resize's roi, scales, sizes; None skips an optional input), run by onnx's
    reference evaluator or (runtime="onnxruntime") by onnxruntime."""
    from onnx import TensorProto, helper, numpy_helper

    names = [f"i{k}" for k in range(len(inputs))]
    # onnxruntime needs the outputs' element type (here: the first input's); the evaluator does not
    out_type = ONNX_TYPES[inputs[0].dtype.name] if runtime == "onnxruntime" else TensorProto.UNDEFINED
    consts = {f"c{k}": a for k, a in enumerate(extra) if a is not None}
    const_names = [f"c{k}" if a is not None else "" for k, a in enumerate(extra)]
    graph = helper.make_graph(
        [helper.make_node(op_type, [*names, *const_names], [f"o{k}" for k in range(n_outputs)], **attrs)],
        "one_node",
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype.name], a.shape) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info(f"o{k}", out_type, None) for k in range(n_outputs)],
        [numpy_helper.from_array(a, name) for name, a in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = dict(zip(names, inputs))
    if runtime == "onnxruntime":
        import onnxruntime

        return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, feeds)
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)
