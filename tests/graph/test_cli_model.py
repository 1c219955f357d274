"""`autotune model`: argument errors through the real entry point (exit 2, one line), the kernel
report on a hand-built graph, and inspect/run end to end on a tiny ONNX file when the ONNX
frontend is importable."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import autotune
from autotune.cli_model import inspect_graph

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder


def frontend_available() -> bool:
    try:
        return importlib.util.find_spec("autotune.frontend.onnx") is not None
    except ModuleNotFoundError:          # autotune.frontend itself is absent
        return False


def cli(*args):
    env = dict(os.environ, AUTOTUNE_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def assert_usage_error(p, fragment):
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and fragment in p.stderr, p.stderr


@pytest.mark.parametrize("args, fragment", [
    (["model", "inspect", "absent.onnx"], "no such model file 'absent.onnx'"),
    (["model", "run", "absent.onnx"], "no such model file 'absent.onnx'"),
    (["model", "inspect", "{model}", "--shapes", "x=1x3x"], "malformed --shapes item 'x=1x3x'"),
    (["model", "inspect", "{model}", "--shapes", "x=2x3,x=2x3"], "--shapes gives 'x' twice"),
    (["model", "run", "{model}", "--input", "x"], "malformed --input 'x'; expected NAME=FILE.npy"),
    (["model", "run", "{model}", "--input", "x=absent.npy"], "--input x: no such file 'absent.npy'"),
    (["model", "run", "{model}", "--input", "x={text}"], "--input x: cannot read"),
    (["model", "run", "{model}", "--repeat", "0"], "Invalid value for '--repeat'"),
    (["model", "inspect", "{model}"], "cannot parse '{model}' as an ONNX model"),        # not protobuf at all
    (["tune-model", "{model}", "--db", "{db}"], "cannot parse '{model}' as an ONNX model"),
    (["tune-model", "{model}", "--time-budget", "-5m"], "--time-budget '-5m': expected a positive duration"),
    (["model", "profile", "{model}", "--plot", "{model}/no/p.png"], "': no such directory"),   # the path is clipped
])
def test_bad_arguments_exit_2_with_one_line(args, fragment, tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"not read: the arguments fail first")
    (tmp_path / "t.txt").write_text("not an array")
    names = {"model": str(tmp_path / "m.onnx"), "text": str(tmp_path / "t.txt"), "db": str(tmp_path / "t.db")}
    assert_usage_error(cli(*[a.format(**names) for a in args]), fragment.format(**names))


def test_inspect_reports_each_kernel_with_its_nodes_and_provenance(env):
    b = GraphBuilder("two_relus")
    x = b.input("x", (3, 5))
    h = b.node("relu", (x,), (3, 5), shape=(3, 5))
    h = b.node("relu", (h,), (3, 5), shape=(3, 5))
    y = b.node("sigmoid", (b.view(h, (15,)),), (15,), shape=(15,))
    g = b.build(y)
    db = str(env / "fresh.db")
    report = inspect_graph(g, db=db, fuse=False)
    assert report["ops"] == {"relu": 2, "view": 1, "sigmoid": 1}
    assert "groups" not in report
    assert [(k["workload"], k["nodes"], k["provenance"]) for k in report["kernels"]] == [
        ("relu(shape=3:5)float32", 2, "default"), ("sigmoid(shape=15)float32", 1, "default")]
    autotune.tune(autotune.create_task("relu", shape=(3, 5)), trials=2, db=db)
    assert inspect_graph(g, db=db, fuse=False)["provenance"] == {"tuned": 1, "nearest": 0, "default": 1}
    fused = inspect_graph(g, db=db)
    assert fused["ops"] == report["ops"]
    [group] = fused["groups"]
    assert (group["ops"], group["how"]) == (["relu", "relu", "sigmoid"], "te")
    assert len(group["nodes"]) == 4 and group["task"].startswith("fused_relu_sigmoid_")
    assert [(k["workload"], k["nodes"]) for k in fused["kernels"]] == [(group["task"], 1)]


needs_frontend = pytest.mark.skipif(not frontend_available(), reason="autotune.frontend.onnx is not in this build")


@pytest.fixture
def tiny_onnx(tmp_path):
    """relu(x @ w + b) with x (batch, 5): the batch dim left symbolic, for --shapes to bind."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w, bias = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, w, bias


@needs_frontend
def test_inspect_and_run_a_tiny_onnx_model_end_to_end(tiny_onnx, tmp_path):
    path, w, bias = tiny_onnx
    db = str(tmp_path / "fresh.db")
    report = json.loads(cli("model", "inspect", str(path), "--shapes", "x=7x5", "--db", db, "--json").stdout)
    assert report["inputs"] == [{"name": "x", "shape": [7, 5], "dtype": "float32"}]
    assert report["kernels"] and all(k["provenance"] == "default" for k in report["kernels"])
    [group] = report["groups"]                                   # matmul + bias + relu: one kernel
    assert group["ops"] == ["matmul_packed", "add", "relu"] and group["how"] == "anchor"   # W is a constant
    assert [(k["workload"], k["nodes"]) for k in report["kernels"]] == [(group["task"], 1)]
    text = cli("model", "inspect", str(path), "--shapes", "x=7x5", "--db", db).stdout
    assert group["task"] in text and "matmul_packed+add+relu" in text
    x = np.random.default_rng(2).standard_normal((7, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = cli("model", "run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--repeat", "3", "--db", db, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    want = np.maximum(x @ w + bias, 0)
    assert out["outputs"][0]["shape"] == [7, 3] and np.allclose(out["outputs"][0]["first"], want.reshape(-1)[:6],
                                                                 rtol=1e-5, atol=1e-6)
    assert out["latency_ms"]["repeat"] == 3 and 0 < out["latency_ms"]["min"] <= out["latency_ms"]["median"]
    text = cli("model", "run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--db", db).stdout
    assert "latency over 10 calls: median" in text and "output y: float32[7, 3]" in text


@needs_frontend
@pytest.mark.parametrize("items, fragment", [(["x={npy}", "z={npy}"], "'z'"), (["x={bad}"], "x")])
def test_run_names_an_unknown_input_or_a_wrong_shape(tiny_onnx, tmp_path, items, fragment):
    path, _, _ = tiny_onnx
    np.save(tmp_path / "x.npy", np.zeros((7, 5), np.float32))
    np.save(tmp_path / "bad.npy", np.zeros((7, 4), np.float32))
    args = [a for item in items for a in ("--input", item.format(npy=tmp_path / "x.npy", bad=tmp_path / "bad.npy"))]
    assert_usage_error(cli("model", "run", str(path), *args), fragment)
