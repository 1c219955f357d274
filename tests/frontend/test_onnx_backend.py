"""AutotuneBackend and the conformance harness, tested without autotune's ONNX frontend and graph
runtime: a stand-in frontend (refusing the ops it is not given, as the real one words it) and a
stand-in compile_model backed by onnxruntime. Cases onnxruntime passes must pass through the
harness, opset restamping included; a refusal is `unsupported`; a wrong output or an error is `fail`."""
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parent))   # _conformance, the shared helper

import onnxruntime as ort
from _conformance import load_script

import autotune
from autotune.frontend.onnx_backend import AutotuneBackend, UnsupportedModelError

conformance = load_script()


class OrtModel:
    """compile_model's surface (inputs, outputs, run) over an onnxruntime session."""

    def __init__(self, model, wrong=False):
        self.session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        self.inputs = [(i.name, tuple(i.shape), i.type) for i in self.session.get_inputs()]
        self.outputs = [(o.name, tuple(o.shape), o.type) for o in self.session.get_outputs()]
        self.wrong = wrong

    def run(self, feeds):
        outs = self.session.run(None, dict(feeds))
        return [o + 1 for o in outs] if self.wrong else outs


@pytest.fixture
def stand_in(monkeypatch):
    """Install the stand-ins; returns the settings a test may change (supported ops, wrong outputs)."""
    settings = {"ops": None, "wrong": False, "error": None}

    def load(model, shapes=None):
        refused = sorted({n.op_type for n in model.graph.node} - settings["ops"]) if settings["ops"] else []
        if refused:
            raise ValueError(f"onnx model {model.graph.name!r}: unsupported ops: " + "; ".join(refused))
        if settings["error"]:
            raise ValueError(settings["error"])
        return model

    frontend = types.ModuleType("autotune.frontend.onnx")
    frontend.load = load
    frontend.SUPPORTED_OPSETS = range(13, 22)
    monkeypatch.setitem(sys.modules, "autotune.frontend.onnx", frontend)
    monkeypatch.setattr(autotune, "compile_model", lambda g, db=None, target="llvm": OrtModel(g, settings["wrong"]),
                        raising=False)
    return settings


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in conformance.collect_cases(["Conv", "MaxPool", "Reshape", "Relu", "Add", "Cast", "Not"])}


def test_cases_pass_through_the_harness_restamped_where_needed(stand_in, cases):
    """Conv, MaxPool and Reshape cases come at opsets 22 and 25 and run at 21; Not at 1 runs at 13.
    The stand-in runs onnxruntime, whose MaxPool already drops a ceil-mode window starting in the
    padding at opset 21 (ONNX's opset 21 keeps it): the case that restamps as a pool and a Slice
    is left to the real backend (tests/frontend/test_onnx_load.py)."""
    assert conformance.missing_api() is None
    results = [conformance.run_case(c) for c in cases.values()
               if c.op != "Cast" and c.name != "test_maxpool_2d_ceil_output_size_reduce_by_one"]
    assert [r for r in results if r.status != "pass"] == []
    ran = {r.op: (r.opset, r.ran_at_opset) for r in results if not r.expanded}
    assert (ran["Conv"], ran["MaxPool"], ran["Reshape"], ran["Not"]) == ((22, 21), (22, 21), (25, 21), (1, 13))
    assert ran["Add"] == (14, 14)


def test_a_changed_meaning_is_restamped_as_the_older_ops(cases):
    """MaxPool-12 keeps a ceil-mode window that starts in the right padding, MaxPool-22 drops it:
    that case runs at 21 as the pool and a Slice dropping the window, while MaxPool's other cases
    run at 21 as they are. Cast-28 has an attribute Cast-21 lacks (round_mode, for float8e8m0 only),
    which the case leaves unset: it runs at 21."""
    moved = conformance.restamp(cases["test_maxpool_2d_ceil_output_size_reduce_by_one"].model, range(13, 22))
    assert conformance.default_opset(moved) == 21 and [n.op_type for n in moved.graph.node] == ["MaxPool", "Slice"]
    for name in ("test_maxpool_2d_ceil", "test_cast_FLOAT_to_DOUBLE"):
        moved = conformance.restamp(cases[name].model, range(13, 22))
        assert conformance.default_opset(moved) == 21 and len(moved.graph.node) == 1


def test_refusal_is_unsupported_and_errors_fail(stand_in, cases):
    case = cases["test_relu"]
    stand_in["ops"] = {"Add"}
    result = conformance.run_case(case)
    assert (result.status, result.float32) == ("unsupported", True)
    assert "unsupported ops: Relu" in result.message
    stand_in.update(ops=None, error="Relu 'n': its inputs must be constants")
    assert conformance.run_case(case).status == "fail"
    stand_in.update(error=None, wrong=True)
    result = conformance.run_case(case)
    assert (result.status, result.message.split(":")[0]) == ("fail", "AssertionError")


def test_compare_checks_count_shape_dtype_and_values(cases):
    case = cases["test_add"]
    want = case.outputs[0]
    conformance.compare(case, [want * (1 + 5e-4)])                # within rtol 1e-3
    for got, message in (([], "0 outputs"), ([want[0]], "output 0: float32"),
                         ([want.astype(np.float64)], "float64"), ([want * 1.01], "elements differ")):
        with pytest.raises(AssertionError, match=message):
            conformance.compare(case, got)


def test_backend_interface(stand_in):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    out = AutotuneBackend.run_model(model, [x])
    np.testing.assert_array_equal(out[0], np.maximum(x, 0))
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))
    assert AutotuneBackend.supports_device("CPU") and not AutotuneBackend.supports_device("CUDA")
    with pytest.raises(ValueError, match="CPU only"):
        AutotuneBackend.prepare(model, "CUDA")
    with pytest.raises(TypeError, match="unknown option"):
        AutotuneBackend.prepare(model, tuned=True)
    stand_in["ops"] = {"Add"}
    with pytest.raises(UnsupportedModelError, match="Relu"):
        AutotuneBackend.prepare(model)
    assert isinstance(onnx.backend.base.Backend, type) and issubclass(AutotuneBackend, onnx.backend.base.Backend)


def test_inputs_that_set_a_shape_are_frozen_through_computations():
    """A value reaching a parameter input through other nodes is frozen (a crop's target shape
    through Sub into Slice's bounds, a length through Cast into Range); the data input whose
    shape only (Shape) takes part is not, nor is an input that only feeds data."""
    from onnx import TensorProto, helper

    from autotune.frontend.onnx_backend import _sets_parameter

    nodes = [helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Sub", ["xs", "target"], ["cut"]),
             helper.make_node("Slice", ["x", "zero", "cut"], ["crop"]),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Range", ["zero_f", "nf", "one_f"], ["ramp"]),
             helper.make_node("Div", ["ramp", "nf"], ["window"]), helper.make_node("Mul", ["window", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [], [])
    found = _sets_parameter(graph)
    assert {"target", "n", "xs", "cut", "nf", "zero", "zero_f", "one_f"} <= found
    assert not found & {"x", "w", "ramp", "window", "y", "crop"}


def test_script_reports_per_op_and_writes_the_lists(stand_in, tmp_path, capsys):
    expected, known = tmp_path / "expected.txt", tmp_path / "known.txt"
    stand_in["ops"] = {"Relu"}                     # the expanded Relu case (Max, Constant...) is refused
    rc = conformance.main(["--ops", "Relu,Add", "--write-expected", str(expected),
                           "--write-known-failures", str(known)])
    table = capsys.readouterr().out
    assert rc == 0
    assert [line.split() for line in table.splitlines() if line.startswith(("Relu", "Add"))] == [
        ["Add", "0", "0", "2", "0", "0", "6"], ["Relu", "1", "0", "1", "0", "0", "0"]]
    assert [n for n in expected.read_text().splitlines() if not n.startswith("#")] == ["test_relu"]
    assert [n.split()[0] for n in known.read_text().splitlines() if not n.startswith("#")] == [
        "test_relu_expanded_ver18"]
