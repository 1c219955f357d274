"""The references a tuned kernel is compared with (benchmarks/generalization.py): numpy and a
one-node onnxruntime model of the same computation, per op family.

Every numpy reference is a closure over preallocated buffers (the tuned kernels also write into
`out=` arrays), so the timings compare the arithmetic, not numpy's allocator:

    matmul     np.matmul(A, B, out=C)
    dense      np.matmul(X, W.T, out=Y); np.add(Y, bias, out=Y); np.maximum(Y, 0, out=Y)
    conv       im2col (a strided sliding-window view of the padded input copied into columns;
               none for a 1x1 stride-1 unpadded conv, whose columns are the input itself), then
               one sgemm per group, batched by np.matmul. Depthwise (groups == C) runs the same
               code: per channel a 1 x KH*KW by KH*KW x OH*OW product. On MobileNet-V2's depthwise
               layers this measured 1.4-4x faster than shift-and-accumulate (a multiply-add of
               each of the KH*KW strided views by its per-channel weights) and on par with
               np.einsum over the sliding-window view.

The ONNX models: MatMul; Gemm(transB=1) + Relu (onnxruntime fuses them into one Gemm with an
activation at ORT_ENABLE_ALL); Conv with group, strides and pads. Inputs listed in `weights` (a
layer's weight and bias) are initializers, as in an exported model, so onnxruntime may prepack
them once; the others are graph inputs fed on each run. Outputs are bound to preallocated arrays.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

OPSET = 17
Run = Callable[[], np.ndarray]


def conv_out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


def numpy_matmul(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> Run:
    a, b = inputs
    c = np.empty((a.shape[0], b.shape[1]), np.float32)
    return lambda: np.matmul(a, b, out=c)


def numpy_dense(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> Run:
    x, w, bias = inputs
    wt, y = w.T, np.empty((x.shape[0], w.shape[0]), np.float32)

    def run() -> np.ndarray:
        np.matmul(x, wt, out=y)
        np.add(y, bias, out=y)
        return np.maximum(y, 0, out=y)

    return run


def numpy_conv(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> Run:
    """im2col + sgemm per group (see the module docstring); NCHW, square stride and padding."""
    x, w = inputs
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    s, p, g = params["stride"], params["padding"], params["groups"]
    oh, ow = conv_out(h, kh, s, p), conv_out(wd, kw, s, p)
    wm = w.reshape(g, f // g, cg * kh * kw)
    out = np.empty((n, g, f // g, oh * ow), np.float32)
    if kh == kw == s == 1 and p == 0:
        cols = x.reshape(n, g, cg, h * wd)
        return lambda: np.matmul(wm, cols, out=out).reshape(n, f, oh, ow)
    xp = np.zeros((n, c, h + 2 * p, wd + 2 * p), np.float32)
    cols = np.empty((n, g, cg * kh * kw, oh * ow), np.float32)
    col_view = cols.reshape(n, c, kh, kw, oh, ow)

    def run() -> np.ndarray:
        xp[:, :, p:p + h, p:p + wd] = x
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::s, ::s]
        col_view[...] = win.transpose(0, 1, 4, 5, 2, 3)
        return np.matmul(wm, cols, out=out).reshape(n, f, oh, ow)

    return run


def _nodes_matmul(params: dict[str, Any], names: list[str]) -> list[Any]:
    from onnx import helper

    return [helper.make_node("MatMul", names, ["out"])]


def _nodes_dense(params: dict[str, Any], names: list[str]) -> list[Any]:
    from onnx import helper

    return [helper.make_node("Gemm", names, ["gemm"], transB=1), helper.make_node("Relu", ["gemm"], ["out"])]


def _nodes_conv(params: dict[str, Any], names: list[str]) -> list[Any]:
    from onnx import helper

    s, p = params["stride"], params["padding"]
    return [helper.make_node("Conv", names, ["out"], kernel_shape=[params["KH"], params["KW"]], strides=[s, s],
                             pads=[p, p, p, p], dilations=[1, 1], group=params["groups"])]


NUMPY: dict[str, Callable[[Sequence[np.ndarray], dict[str, Any]], Run]] = {
    "matmul": numpy_matmul, "dense": numpy_dense, "conv": numpy_conv, "depthwise": numpy_conv}
NODES: dict[str, Callable[[dict[str, Any], list[str]], list[Any]]] = {
    "matmul": _nodes_matmul, "dense": _nodes_dense, "conv": _nodes_conv, "depthwise": _nodes_conv}


def onnx_model(family: str, params: dict[str, Any], inputs: Sequence[np.ndarray], out_shape: Sequence[int],
               weights: Sequence[int]) -> Any:
    """A one-node (dense: Gemm + Relu) float32 model named in0, in1, ... -> out."""
    from onnx import TensorProto, helper, numpy_helper

    names = [f"in{i}" for i in range(len(inputs))]
    graph_inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                    for i, (n, a) in enumerate(zip(names, inputs)) if i not in weights]
    inits = [numpy_helper.from_array(inputs[i], names[i]) for i in weights]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, list(out_shape))
    graph = helper.make_graph(NODES[family](params, names), family, graph_inputs, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def ort_runner(model: Any, inputs: Sequence[np.ndarray], weights: Sequence[int], out_shape: Sequence[int],
               threads: int) -> Run:
    """Run the model in onnxruntime (intra-op `threads`, inter-op 1, all graph optimisations),
    inputs and output bound once to these arrays, as the tuned kernel's are."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    for i, a in enumerate(inputs):
        if i not in weights:
            binding.bind_cpu_input(f"in{i}", a)
    out = np.empty(tuple(out_shape), np.float32)
    binding.bind_output("out", "cpu", 0, np.float32, out.shape, out.ctypes.data)

    def run() -> np.ndarray:
        sess.run_with_iobinding(binding)
        return out

    return run
