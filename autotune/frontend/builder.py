"""The graph under construction: what every ONNX op converter reads (shapes, dtypes, constants,
attributes of the node it converts) and writes (kernel, view and constant nodes).

Converters register themselves in CONVERTERS with `@converts(op_type, check=...)`: `check` reads
the node's attributes only and returns one message per unsupported value, so an unsupported model
is refused before any conversion work.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph.ir import VIEW, Node, TrainingGuard, Value

Attrs = dict[str, Any]
Check = Callable[[Any, Attrs], list[str]]


@dataclass(frozen=True)
class Converter:
    """One ONNX op: `convert(builder, node, attrs)` emits its nodes; `check(node, attrs)` lists
    its unsupported attribute values (checked up front)."""

    convert: Callable[[Builder, Any, Attrs], None]
    check: Check


CONVERTERS: dict[str, Converter] = {}


def attributes(node: Any) -> Attrs:
    """A node's attributes as Python values (strings decoded, tensors as numpy arrays)."""
    from onnx import AttributeProto, helper, numpy_helper

    out: Attrs = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if a.type == AttributeProto.STRING:
            value = value.decode()
        elif a.type == AttributeProto.TENSOR:
            value = numpy_helper.to_array(value)
        elif a.type in (AttributeProto.INTS, AttributeProto.FLOATS):
            value = list(value)
        out[a.name] = value
    return out


def _no_check(node: Any, attrs: Attrs) -> list[str]:
    return []


def converts(*op_types: str, check: Check = _no_check) -> Callable[[Callable], Callable]:
    """Register `f(builder, node, attrs)` as the converter of each of `op_types`."""

    def deco(f: Callable[[Builder, Any, Attrs], None]) -> Callable[[Builder, Any, Attrs], None]:
        for op_type in op_types:
            CONVERTERS[op_type] = Converter(f, check)
        return f

    return deco


def allowed(node: Any, attrs: Attrs, name: str, values: Sequence[Any], default: Any) -> list[str]:
    """The message for attribute `name` when its value (or default) is not one of `values`."""
    value = attrs.get(name, default)
    return [] if value in values else [f"{name}={value!r}"]


@dataclass
class Builder:
    """Values (static shape and dtype from shape inference), constants and the emitted nodes."""

    values: dict[str, Value]
    constants: dict[str, np.ndarray]
    nodes: list[Node] = field(default_factory=list)
    node_name: str = ""           # the ONNX node being converted: every emitted node carries it
    op_type: str = ""             # its op type (errors name both)
    outputs: tuple[str, ...] = ()  # that node's output names ("" for an absent optional output)
    reserved: set[str] = field(default_factory=set)   # every ONNX value name: never a made-up name
    model_inputs: set[str] = field(default_factory=set)
    guards: list[TrainingGuard] = field(default_factory=list)   # checks of the calls' inputs
    _steps: int = 0

    # -- reading ------------------------------------------------------------------------------
    def shape(self, name: str) -> tuple[int, ...]:
        return self.values[name].shape

    def dtype(self, name: str) -> str:
        return self.values[name].dtype

    def const(self, name: str) -> np.ndarray | None:
        """The constant value of `name`, or None when it is computed at run time."""
        return self.constants.get(name)

    def need_const(self, name: str, what: str) -> np.ndarray:
        """The constant value of input `name`; a ValueError naming the node when it is computed."""
        value = self.const(name)
        if value is None:
            raise self.fail(f"{what} ({name!r}) must be a constant (an initializer or computed from shapes "
                            "and constants only)")
        return value

    def out(self, index: int = 0) -> str:
        return self.outputs[index]

    def out_shape(self, index: int = 0) -> tuple[int, ...]:
        return self.shape(self.outputs[index])

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.op_type} {self.node_name!r}: {message}")

    # -- writing ------------------------------------------------------------------------------
    def fresh(self, step: str) -> str:
        """A new value name for a decomposition intermediate: '<onnx node>/<step>'."""
        self._steps += 1
        name = f"{self.node_name}/{step}"
        while name in self.values or name in self.reserved:
            name = f"{self.node_name}/{step}_{self._steps}"
            self._steps += 1
        return name

    def constant(self, array: np.ndarray, step: str) -> str:
        """A new constant (weights transformed at import: transposed, scaled, reshaped)."""
        name = self.fresh(step)
        array = np.ascontiguousarray(array)
        self.values[name] = Value(name, tuple(int(d) for d in array.shape), str(array.dtype))
        self.constants[name] = array
        return name

    def _define(self, out: str | None, step: str, shape: tuple[int, ...], dtype: str) -> str:
        name = out if out else self.fresh(step)
        known = self.values.get(name)
        if known is not None and (known.shape, known.dtype) != (shape, dtype):
            raise self.fail(f"computes {dtype}{list(shape)} for {name!r}, shape inference says "
                            f"{known.dtype}{list(known.shape)}")
        self.values[name] = Value(name, shape, dtype)
        return name

    def kernel(self, op: str, inputs: Sequence[str], params: dict[str, Any], shape: tuple[int, ...],
               dtype: str | None = None, out: str | None = None, kernel_dtype: str | None = None) -> str:
        """Emit one kernel node writing a value of `shape` (rank 0 goes through a (1,) kernel
        output and a view: templates take shapes of rank >= 1; a value with no elements is an
        empty constant, with no kernel). Returns the output's name."""
        dtype = dtype or self.dtype(inputs[0])
        kdtype = kernel_dtype or self.dtype(inputs[0])
        if 0 in shape:
            name = self._define(out, op, shape, dtype)
            self.constants[name] = np.zeros(shape, dtype)
            return name
        if shape == ():
            flat = self.kernel(op, inputs, params, (1,), dtype, None, kdtype)
            return self.view(flat, (), out)
        name = self._define(out, op, shape, dtype)
        self.nodes.append(Node(self.node_name, op, tuple(inputs), (name,), dict(params), kdtype))
        return name

    def view(self, x: str, shape: tuple[int, ...], out: str | None = None) -> str:
        """`x` with a new shape and no data movement; a constant is reshaped at import."""
        array = self.const(x)
        if array is not None and not out:
            return self.constant(array.reshape(shape), "reshape")
        if self.shape(x) == shape and not out:
            return x
        name = self._define(out, "view", shape, self.dtype(x))
        if array is not None:
            self.constants[name] = np.ascontiguousarray(array.reshape(shape))
            return name
        self.nodes.append(Node(self.node_name, VIEW, (x,), (name,), {}, self.dtype(x)))
        return name

    def operand(self, x: str) -> str:
        """`x` as a kernel operand: a rank-0 value viewed as shape (1,) (broadcasting is unchanged)."""
        return self.view(x, (1,)) if self.shape(x) == () else x

    def transpose(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        """x permuted by `axes`: folded for a constant, nothing for the identity, else a kernel."""
        axes = tuple(int(a) for a in axes)
        shape = tuple(self.shape(x)[a] for a in axes)
        array = self.const(x)
        if array is not None:
            folded = self.constant(array.transpose(axes), "transposed")
            return self.view(folded, shape, out) if out else folded
        if axes == tuple(range(len(axes))):
            return self.view(x, shape, out)
        return self.kernel("transpose", [x], {"shape": self.shape(x), "axes": axes}, shape, out=out)

    def kernel_out(self, op: str, inputs: Sequence[str], params: dict[str, Any], shape: tuple[int, ...],
                   index: int = 0, dtype: str | None = None, kernel_dtype: str | None = None) -> str:
        """A kernel producing the node's output `index`: written in place when `shape` is the
        output's shape, else through a view (a 2-d row op on an N-d tensor)."""
        out = self.outputs[index]
        if shape == self.shape(out):
            return self.kernel(op, inputs, params, shape, dtype, out, kernel_dtype)
        return self.view(self.kernel(op, inputs, params, shape, dtype, None, kernel_dtype), self.shape(out), out)
