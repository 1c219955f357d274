"""A BERT-base encoder layer as torch exports HuggingFace's BertLayer in eval mode (static shapes):
self-attention, output projection, residual + LayerNorm, GELU feed-forward, residual + LayerNorm."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ._graph import GraphBuilder


def _dense(b: GraphBuilder, x: str, scope: str, fan_in: int, fan_out: int) -> str:
    """nn.Linear on a 3-D input: MatMul by the stored-transposed weight, then Add(bias, product)."""
    w = b.normal(f"onnx::MatMul_{scope}", (fan_in, fan_out), 1 / math.sqrt(fan_in))
    bias = b.normal(f"{scope}.bias", (fan_out,), 0.1)
    return b.node("Add", [bias, b.node("MatMul", [x, w], f"/{scope}/MatMul")], f"/{scope}/Add")


def _scalar(b: GraphBuilder, name: str, value: float) -> str:
    return b.const(name, np.array(value, np.float32))


def _layer_norm(b: GraphBuilder, x: str, scope: str, hidden: int, eps: float = 1e-12) -> str:
    """LayerNormalization over the last axis (opset >= 17); below 17, the ReduceMean/Sub/Pow/Sqrt/Div
    chain torch exports instead."""
    scale = b.uniform(f"{scope}.weight", (hidden,), 0.5, 1.5)
    bias = b.normal(f"{scope}.bias", (hidden,), 0.1)
    if b.opset >= 17:
        return b.node("LayerNormalization", [x, scale, bias], f"/{scope}/LayerNormalization", axis=-1, epsilon=eps)
    mean = b.node("ReduceMean", [x], f"/{scope}/ReduceMean", axes=[-1], keepdims=1)
    centred = b.node("Sub", [x, mean], f"/{scope}/Sub")
    square = b.node("Pow", [centred, _scalar(b, f"{scope}.two", 2.0)], f"/{scope}/Pow")
    var = b.node("ReduceMean", [square], f"/{scope}/ReduceMean_1", axes=[-1], keepdims=1)
    std = b.node("Sqrt", [b.node("Add", [var, _scalar(b, f"{scope}.eps", eps)], f"/{scope}/Add")], f"/{scope}/Sqrt")
    normed = b.node("Div", [centred, std], f"/{scope}/Div")
    return b.node("Add", [b.node("Mul", [normed, scale], f"/{scope}/Mul"), bias], f"/{scope}/Add_1")


def _gelu(b: GraphBuilder, x: str, scope: str) -> str:
    """Exact GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2))), as Div, Erf, Add, Mul, Mul."""
    erf = b.node("Erf", [b.node("Div", [x, _scalar(b, f"{scope}.sqrt2", math.sqrt(2.0))], f"/{scope}/Div")],
                 f"/{scope}/Erf")
    one_plus = b.node("Add", [erf, _scalar(b, f"{scope}.one", 1.0)], f"/{scope}/Add")
    return b.node("Mul", [b.node("Mul", [x, one_plus], f"/{scope}/Mul"), _scalar(b, f"{scope}.half", 0.5)],
                  f"/{scope}/Mul_1")


def _heads(b: GraphBuilder, x: str, scope: str, shape: str, perm: list[int]) -> str:
    """(batch, seq, hidden) -> (batch, heads, seq, d), or (batch, heads, d, seq) for the keys."""
    return b.node("Transpose", [b.node("Reshape", [x, shape], f"/{scope}/Reshape")], f"/{scope}/Transpose", perm=perm)


def _attention(b: GraphBuilder, x: str, mask: str, batch: int, seq: int, hidden: int, heads: int) -> str:
    """softmax(q k^T / sqrt(d) + mask) v over `heads` heads, merged back to (batch, seq, hidden)."""
    d = hidden // heads
    split = b.const("attention.split_shape", np.array([batch, seq, heads, d], np.int64))
    q, k, v = (_dense(b, x, f"attention.self.{n}", hidden, hidden) for n in ("query", "key", "value"))
    q = _heads(b, q, "attention/self/query", split, [0, 2, 1, 3])
    k = _heads(b, k, "attention/self/key", split, [0, 2, 3, 1])
    v = _heads(b, v, "attention/self/value", split, [0, 2, 1, 3])
    scores = b.node("MatMul", [q, k], "/attention/self/MatMul")
    scores = b.node("Div", [scores, _scalar(b, "attention.self.scale", math.sqrt(d))], "/attention/self/Div")
    scores = b.node("Add", [scores, mask], "/attention/self/Add")
    probs = b.node("Softmax", [scores], "/attention/self/Softmax", axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v], "/attention/self/MatMul_1")],
                     "/attention/self/Transpose_3", perm=[0, 2, 1, 3])
    merge = b.const("attention.merge_shape", np.array([batch, seq, hidden], np.int64))
    return b.node("Reshape", [context, merge], "/attention/self/Reshape_3")


def bert_layer(batch: int = 1, seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072,
               opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """Inputs `hidden_states` (batch, seq, hidden) and `attention_mask` (batch, 1, 1, seq), additive
    (0 to attend, a large negative number to mask) -> `output` (batch, seq, hidden)."""
    if hidden % heads:
        raise ValueError(f"bert_layer: hidden ({hidden}) must be a multiple of heads ({heads})")
    b = GraphBuilder(seed, opset)
    x = "hidden_states"
    attended = _dense(b, _attention(b, x, "attention_mask", batch, seq, hidden, heads),
                      "attention.output.dense", hidden, hidden)
    x = _layer_norm(b, b.node("Add", [attended, x], "/attention/output/Add_1"), "attention.output.LayerNorm", hidden)
    inner = _gelu(b, _dense(b, x, "intermediate.dense", hidden, ffn), "intermediate/intermediate_act_fn")
    y = b.node("Add", [_dense(b, inner, "output.dense", ffn, hidden), x], "/output/Add_1")
    b.rename_last(_layer_norm(b, y, "output.LayerNorm", hidden), "output")
    return b.finish("bert_layer", [("hidden_states", (batch, seq, hidden)), ("attention_mask", (batch, 1, 1, seq))],
                    ["output"])
