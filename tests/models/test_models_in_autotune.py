"""The models of benchmarks/models at reduced size run on autotune's kernels (`compile_model`, the
templates' default configs) and give onnxruntime's outputs within float32 tolerance (issue 14).
Skipped, saying why, while autotune's ONNX frontend or graph runtime is absent."""
import importlib
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models

import onnxruntime as ort

import autotune
from autotune import runtime
from benchmarks.models import MODELS, reduced


@pytest.fixture(scope="module")
def compile_model(tmp_path_factory):
    try:
        importlib.import_module("autotune.frontend.onnx")
    except ImportError as e:
        pytest.skip(f"needs autotune's ONNX frontend: {e}")
    if not hasattr(autotune, "compile_model"):
        pytest.skip("needs autotune.compile_model (the graph runtime)")
    root = tmp_path_factory.mktemp("models_in_autotune")
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setenv("AUTOTUNE_CACHE", str(root / "cache"))
        mp.setenv("AUTOTUNE_DB", str(root / "empty.db"))
        warnings.filterwarnings("ignore", message="autotune: no tuned record")
        runtime.clear_caches()
        yield autotune.compile_model
    runtime.clear_caches()


@pytest.mark.parametrize("name", list(MODELS))
def test_reduced_model_matches_onnxruntime(name, compile_model):
    model = reduced(name)
    rng = np.random.default_rng(2)
    feeds = {vi.name: rng.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
             for vi in model.graph.input}
    if "attention_mask" in feeds:
        feeds["attention_mask"] = np.where(rng.random(feeds["attention_mask"].shape) < 0.25, -10000.0, 0.0
                                           ).astype(np.float32)
    m = compile_model(model)
    assert [(n, tuple(s), d) for n, s, d in m.inputs] == [(k, v.shape, "float32") for k, v in feeds.items()]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = m.run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))
    again = m(*feeds.values())
    for g, a in zip(got, again, strict=True):
        np.testing.assert_array_equal(g, a)
