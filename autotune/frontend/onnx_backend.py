"""ONNX's backend interface (`onnx.backend.base.Backend`) on top of `autotune.compile_model`, so
ONNX's own test runners and conformance cases can drive autotune like any other backend.

`prepare` imports the model with `autotune.frontend.onnx.load` and compiles it; a model the
frontend refuses as unsupported (an op, an attribute value, an opset or a dtype) raises
`UnsupportedModelError`, which tells it apart from a model that imports but then fails. autotune's
frontend and graph runtime are imported on first use: `onnx` is an optional dependency.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

# Inputs of these ops set a parameter (axes, slice bounds, pads, a target shape, scales, repeats, clip
# bounds, a range's ends and step), not data: the frontend compiles them as constants.
PARAMETER_INPUTS: dict[str, tuple[int, ...]] = {
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Reshape", "Expand", "Squeeze",
                           "Unsqueeze", "Split", "Tile")},
    "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Resize": (1, 2, 3), "Clip": (1, 2), "ConstantOfShape": (0,),
    "Range": (0, 1, 2),
}
# ops whose outputs depend on their input's shape only, never on its values
SHAPE_READERS = frozenset({"Shape", "Size"})

# what the frontend's refusals say: "unsupported ops: ...", "... is not supported", "does not support"
_UNSUPPORTED = re.compile(r"unsupported|not supported|does not support")


class UnsupportedModelError(ValueError):
    """The frontend refused the model before any work: something in it is not supported."""


class AutotuneRep(BackendRep):
    """A compiled model; `run` takes the inputs in the model's order (or by name) and returns the
    outputs as a tuple that can also be read by output name."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.input_names = [name for name, _, _ in model.inputs]
        self.output_names = [name for name, _, _ in model.outputs]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if kwargs:
            raise TypeError(f"AutotuneRep.run takes no options, got {sorted(kwargs)}")
        feeds = dict(inputs) if isinstance(inputs, Mapping) else self._by_name(inputs)
        outputs = self.model.run(feeds)
        return namedtupledict("Outputs", self.output_names)(*outputs)

    def _by_name(self, inputs: Any) -> dict[str, np.ndarray]:
        arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
        if len(arrays) != len(self.input_names):
            raise ValueError(f"model takes {len(self.input_names)} input(s) ({', '.join(self.input_names)}), "
                             f"got {len(arrays)}")
        return dict(zip(self.input_names, arrays))


class AutotuneBackend(Backend):
    """Runs ONNX models on the CPU through autotune's kernels. `prepare` keyword options:
    `db` (tuning database), `target` (default "llvm"), `shapes` (binds unknown input dimensions)."""

    @classmethod
    def import_model(cls, model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]] | None = None) -> Any:
        """The autotune Graph of `model`; UnsupportedModelError where the frontend refuses it."""
        frontend = importlib.import_module("autotune.frontend.onnx")
        try:
            return frontend.load(model, shapes={k: tuple(v) for k, v in (shapes or {}).items()})
        except ValueError as e:
            if _UNSUPPORTED.search(str(e)):
                raise UnsupportedModelError(str(e)) from e
            raise

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> AutotuneRep:
        if not cls.supports_device(device):
            raise ValueError(f"AutotuneBackend runs on CPU only, got device {device!r}")
        unknown = set(kwargs) - {"db", "target", "shapes"}
        if unknown:
            raise TypeError(f"AutotuneBackend.prepare: unknown option(s) {sorted(unknown)}; takes db, target, shapes")
        onnx.checker.check_model(model)
        graph = cls.import_model(model, kwargs.get("shapes"))
        autotune = importlib.import_module("autotune")
        return AutotuneRep(autotune.compile_model(graph, db=kwargs.get("db"), target=kwargs.get("target", "llvm")))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        """Compile and run once. Graph inputs whose values set a parameter (`PARAMETER_INPUTS`),
        directly or through a computation (a window's length through Cast into a Range, a crop's
        target shape into a Slice's bounds), take the values given here as constants, as TVM's
        ONNX frontend does with frozen params: a static-shape compiler cannot build the model
        without them, so it is compiled for them."""
        names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        feeds = dict(inputs) if isinstance(inputs, Mapping) else dict(zip(names, _as_list(inputs)))
        sets_parameter = _sets_parameter(model.graph)
        frozen = {n: v for n, v in feeds.items() if n in sets_parameter}
        if frozen:
            model = freeze_inputs(model, frozen)
        rest = {n: v for n, v in feeds.items() if n not in frozen}
        return cls.prepare(model, device, **kwargs).run(rest)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


def _as_list(inputs: Any) -> list[Any]:
    return [inputs] if isinstance(inputs, np.ndarray) else list(inputs)


def _sets_parameter(graph: onnx.GraphProto) -> set[str]:
    """The values of `graph` whose values reach a parameter input (`PARAMETER_INPUTS`), through
    any node but a shape reader (`SHAPE_READERS`: its output does not depend on the values)."""
    found: set[str] = set()
    for node in reversed(graph.node):        # topological order: a node's readers come after it
        params = PARAMETER_INPUTS.get(node.op_type, ())
        feeds_one = node.op_type not in SHAPE_READERS and any(o in found for o in node.output)
        found.update(v for i, v in enumerate(node.input) if v and (i in params or feeds_one))
    return found


def freeze_inputs(model: onnx.ModelProto, values: Mapping[str, Any]) -> onnx.ModelProto:
    """A copy of `model` in which the graph inputs named in `values` are initializers holding them."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    kept = [i for i in frozen.graph.input if i.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(kept)
    frozen.graph.initializer.extend(onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in values.items())
    return frozen


prepare = AutotuneBackend.prepare
run_model = AutotuneBackend.run_model
supports_device = AutotuneBackend.supports_device
