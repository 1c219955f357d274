"""The issue's four models, built in the repo at reduced size, run end to end through
`autotune.compile_model` (ONNX import, every node a default-config kernel, planned buffers) and
match onnxruntime."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models

import autotune  # noqa: E402
from benchmarks.models import bert_layer, mlp, mobilenet_v2_stack, resnet18  # noqa: E402

MODELS = {
    "mlp": lambda: mlp(batch=3, sizes=(37, 29, 11)),
    "resnet18": lambda: resnet18(batch=1, image=35, width=8, num_classes=13),
    "mobilenet_v2": lambda: mobilenet_v2_stack(batch=1, image=29, blocks=((1, 16, 1, 1), (6, 24, 2, 2)), stem=8),
    "bert_layer": lambda: bert_layer(batch=1, seq=17, hidden=48, heads=4, ffn=96),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnxruntime(name, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    model = MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # every kernel is untuned: one fallback warning each
        compiled = autotune.compile_model(model, db=str(tmp_path / "empty.db"))
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(shape).astype(dtype) if dtype.startswith("float") else np.zeros(shape, dtype)
             for n, shape, dtype in compiled.inputs}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = compiled.run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))
    summary = compiled.summary()
    assert summary["provenance"]["default"] == summary["kernel_nodes"] > 0
