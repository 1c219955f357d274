"""The shape catalogue of benchmarks/generalization.py (issue 13): the shapes the issue asks for,
each a task autotune accepts, and references (numpy; a one-node onnxruntime model) that compute
the template's function, checked on a scaled-down instance of every case."""
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def cases_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        import generalization_cases

        yield generalization_cases
        for name in ("generalization_cases", "references"):
            sys.modules.pop(name, None)


def test_the_models_layers_are_torchvisions(cases_module):
    """53 conv layers and 4.09 GMACs in ResNet-50, 52 and 0.30 GMACs in MobileNet-V2 (torchvision's
    figures, which add the classifier's 2.05 M and 1.28 M MACs)."""
    for layers, count, macs in ((cases_module.resnet50(), 53, 4.089e9 - 2.048e6),
                                (cases_module.mobilenet_v2(), 52, 0.3008e9 - 1.28e6)):
        assert len(layers) == count
        assert sum(c.task().flop for c in layers) / 2 == pytest.approx(macs, rel=2e-3)


def test_catalogue_has_what_issue_13_asks(cases_module):
    cases = cases_module.catalogue()
    assert len(cases) >= 24
    assert len({c.name for c in cases}) == len(cases)
    assert len({(c.op, tuple(sorted(c.params.items()))) for c in cases}) == len(cases)
    depthwise = [c.params for c in cases if c.family == "depthwise"]
    assert {p["stride"] for p in depthwise} == {1, 2} and all(p["groups"] == p["C"] == p["F"] for p in depthwise)
    assert any(c.params.get("KH") == 7 and c.params["stride"] == 2 for c in cases)        # the ResNet stem
    grouped = [c.params for c in cases if c.family == "conv" and c.params["groups"] > 1]
    assert len(grouped) == 7 and {p["stride"] for p in grouped} == {1, 2}                  # ResNeXt-50
    assert {c.params["M"] for c in cases if c.op in ("matmul", "dense") and not c.random_odd} == {128, 512}
    for family in ("matmul", "dense", "conv", "depthwise"):
        rand = [c for c in cases if c.name.startswith(f"random {family} ")]
        assert len(rand) == 6
        sizes = [v for c in rand for k, v in c.params.items() if k in ("M", "N", "K", "C", "F", "H")]
        assert all(v % 2 for v in sizes)
        assert any(all(v % q for q in range(2, math.isqrt(v) + 1)) for v in sizes)      # primes included
    assert all(c.task().flop <= 1e9 for c in cases if c.name.startswith(("random conv", "random stem")))
    stems = [c.params for c in cases if c.name.startswith("random stem ")]
    assert len(stems) == 6 and all(p["C"] < 16 and p["C"] % 2 for p in stems)
    assert all(c.family == "depthwise" for c in cases if c.name.startswith(("random depthwise", "convnext_t")))
    assert [c.name for c in cases_module.quick(cases)] == list(cases_module.QUICK)


def test_every_case_is_a_task(cases_module):
    for case in cases_module.catalogue():
        task = case.task()
        assert task.flop > 0 and len(task.config_space) > 1, case.name


def test_references_compute_the_templates_function(cases_module):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e '.[bench]')")
    onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[bench]')")
    for case in cases_module.catalogue():
        tiny = case.tiny()
        task = tiny.task()
        inputs = task.make_inputs(np.random.default_rng(0))
        want = task.reference(inputs)[0]
        shape = tuple(task.arg_specs[task.num_inputs][0])
        onnx.checker.check_model(tiny.onnx(inputs, shape), full_check=True)
        for label, run in (("numpy", tiny.numpy(inputs)), ("onnxruntime", tiny.ort(inputs, shape, threads=1))):
            np.testing.assert_allclose(run(), want, rtol=1e-4, atol=1e-4, err_msg=f"{case.name}: {label}")


def test_a_layers_kernel_is_tuned_with_its_weights_constant(cases_module):
    """As `compile_model` runs it: the constant-weight default and configs ranked with their
    weight transforms hoisted; a random matmul's B is an input like any other."""
    cases = {c.name: c for c in cases_module.catalogue()}
    for name, constant in (("resnet50 layer4.1.conv2", (1,)), ("bert-base M=128 ffn.up", (1, 2)),
                           ("random matmul 0", ())):
        assert cases[name].kernel_task().constant_inputs == constant, name
    deep = cases["resnet50 layer4.1.conv2"]      # 512 channels at 7x7: its weights outweigh its input
    algorithm = [t.config(t.default_index)["algorithm"].val for t in (deep.task(), deep.kernel_task())]
    assert algorithm == ["gemm", "nchwc"]       # read in place per call / repacked once, then blocked


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/generalization.py as a module (it sets the thread variables on import: kept as they are)."""
    for var in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, os.environ.get(var, "2"))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import generalization

    yield generalization
    for name in ("generalization", "generalization_cases", "references", "timing", "tune_matmul"):
        sys.modules.pop(name, None)


def test_the_summary_names_the_kernels_whose_speed_moved(bench):
    """A kernel the tuner measured at 210 GFLOP/s and the benchmark at 100 is named, not averaged in."""
    rows = [{"name": "a", "fresh": {"gflops": 100.0, "tuner_gflops": 210.0},
             "transfer": {"gflops": 100.0, "tuner_gflops": 120.0}},
            {"name": "b", "fresh": {"gflops": None, "tuner_gflops": 50.0}}]
    line = bench.moved_line(rows)
    assert line == "tuner and this timing within 1.5x of each other: 1 of 2 kernels  [a (fresh) 210 -> 100]"


def test_a_resumed_run_keeps_the_passes_that_still_hold(bench, monkeypatch, tmp_path):
    """--resume: a finished pass is kept (costs, failed trials included, and wall time); one of
    other trials, of other code, with other shapes' records or without its database is tuned
    again."""
    from tuning_db import TuningDB

    tuned = []

    def fake_tune(case, db, trials, transfer):
        tuned.append((case.name, transfer))
        TuningDB(db).close()
        return bench.Tuned(db, 0.5, [1.0, math.inf, 0.5][:trials], 7.0, 1)

    monkeypatch.setattr(bench, "tune_one", fake_tune)
    cases = [c for c in bench.catalogue() if c.name in ("resnet50 layer1.0.conv2", "random matmul 1",
                                                        "mobilenet_v2 block3.dw")]
    first = bench.pass_fresh(cases[:2], 3, tmp_path, resume=True)
    assert len(tuned) == 2 and first[0].costs == [1.0, math.inf, 0.5]
    again = bench.pass_fresh(cases[:2], 3, tmp_path, resume=True)
    assert len(tuned) == 2 and [(t.costs, t.best_seconds, t.seconds, t.errors) for t in again] == \
        [(t.costs, t.best_seconds, t.seconds, t.errors) for t in first]
    bench.pass_fresh(cases[:2], 2, tmp_path, resume=True)                     # other trials
    assert len(tuned) == 4
    bench.pass_fresh(cases[:1], 2, tmp_path, resume=False)                    # not resumed
    assert len(tuned) == 5
    bench.pass_transfer(cases[:2], 2, tmp_path, resume=True)
    bench.pass_transfer(cases[:2], 2, tmp_path, resume=True)
    assert tuned[5:] == [(cases[0].name, True), (cases[1].name, True)]
    bench.pass_fresh(cases, 2, tmp_path, resume=True)                         # one more shape:
    bench.pass_transfer(cases, 2, tmp_path, resume=True)                      # every transfer differs
    assert tuned[7:] == [(cases[2].name, False)] + [(c.name, True) for c in cases]
    with open(bench.pass_file(tmp_path, "fresh", cases[2], ".jsonl"), "a", encoding="utf-8") as f:
        f.write("\n")                                                        # its records changed
    bench.pass_transfer(cases, 2, tmp_path, resume=True)
    assert tuned[11:] == [(c.name, True) for c in cases[:2]]
    bench.pass_file(tmp_path, "fresh", cases[0], ".db").unlink()
    monkeypatch.setattr(bench, "compiler_digest", lambda: "edited")
    bench.pass_fresh(cases[1:], 2, tmp_path, resume=True)                     # other code
    bench.pass_fresh(cases[:1], 2, tmp_path, resume=True)                     # database gone
    assert tuned[13:] == [(cases[1].name, False), (cases[2].name, False), (cases[0].name, False)]
