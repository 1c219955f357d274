"""The buffer plan never aliases two live buffers (issue 15, section 4): each model runs its
compiled kernels in its planned arena step by step, and every intermediate's buffer is filled
with poison (NaN) as soon as its last reader has run. A value still live that shared memory
with a freed one would read poison, so the outputs would differ from onnxruntime's (as NaN, or
as the 0 a relu makes of NaN)."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune.graph import compile_model

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models
from test_fusion import bert_ffn, feeds_of, residual_block

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("autotune.frontend.onnx")


def poison(a):
    a[...] = np.nan if a.dtype.kind == "f" else np.iinfo(a.dtype).min if a.dtype.kind in "iu" else True


def run_poisoned(m, feeds, early=None):
    """The model's outputs, each node run with the compiled kernels on the planned buffers, each
    arena buffer poisoned right after its last reader (or, for the root `early`, right after its
    producer: a premature free, which the poison must expose). Returns (outputs, poisoned count)."""
    g, plan = m.graph, m.plan
    env = {**feeds, **m.buffers}
    env |= {r: np.empty(g.value(r).shape, g.value(r).dtype) for r, k in plan.kinds.items() if k == "output"}
    freed = {}
    for r, (first, last) in plan.lifetimes.items():
        freed.setdefault(first if r == early else last, []).append(r)
    count = 0
    for step, n in enumerate(g.nodes):
        if n.is_view:
            env[n.outputs[0]] = env[n.inputs[0]].reshape(g.value(n.outputs[0]).shape)
        else:
            func, args = m.node_call(step)      # the kernel, or its variant reading hoisted weights
            func(*[env[v] for v in args])
        for r in freed.get(step, []):
            poison(m.buffers[r])
            count += 1
    return [np.array(env[v.name]) for v in g.outputs], count


def models():
    from benchmarks.models import MODELS, reduced

    return {"residual_block": residual_block, "bert_ffn": bert_ffn, **{n: (lambda n=n: reduced(n)) for n in MODELS}}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", list(models()))
def test_poisoning_freed_buffers_leaves_the_outputs_equal_to_onnxruntime(name, fused):
    model = models()[name]()
    feeds = feeds_of(model)
    if "attention_mask" in feeds:
        feeds["attention_mask"] = np.zeros_like(feeds["attention_mask"])
    m = compile_model(model, fuse=fused)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got, count = run_poisoned(m, feeds)
    assert count == len(m.plan.offsets) > 0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))
    np.testing.assert_array_equal(m.run(feeds)[0], got[0])           # the executor's own run agrees


def test_a_premature_free_is_caught_by_the_poison():
    model = residual_block()
    feeds = feeds_of(model)
    m = compile_model(model, fuse=False)
    live = [r for r, (first, last) in m.plan.lifetimes.items() if last > first]
    got, _ = run_poisoned(m, feeds, early=live[0])
    assert not np.allclose(got[0], m.run(feeds)[0], equal_nan=True)   # relu turns NaN into 0: compare values
