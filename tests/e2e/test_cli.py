"""The CLI through its real entry point (a subprocess) against a real SQLite file."""
import json
import os
import subprocess
import sys

import pytest

from autotune.codegen.cuda_device import gpu_available


def cli(*args, env_extra=None, check=True):
    env = dict(os.environ, AUTOTUNE_NUM_THREADS="2", **(env_extra or {}))
    p = subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, env=env,
                       timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"autotune {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "t.db")
    p = cli("tune", "matmul", "--shape", "M=48,N=40,K=24", "--trials", "12", "--tuner", "random",
            "--db", path, "--seed", "0", "--json")
    summary = json.loads(p.stdout)
    assert summary["trials"] == 12 and summary["best_gflops"] > 0 and summary["ratio_to_numpy"] > 0
    return path


def test_tune_then_inspect(tuned_db):
    rows = json.loads(cli("db", "workloads", "--db", tuned_db, "--json").stdout)
    assert rows[0]["key"] == "matmul(M=48,N=40,K=24)float32" and rows[0]["trials"] == 12
    assert rows[0]["rate_unit"] == "GFLOP/s" and rows[0]["best_rate"] > 0
    assert "GFLOP/s" in cli("db", "workloads", "--db", tuned_db).stdout
    best = json.loads(cli("db", "best", "matmul", "--shape", "M=48,N=40,K=24", "--db", tuned_db, "--json").stdout)
    assert best["config"]["knobs"] and "for " in best["ir"]
    text = cli("db", "show", rows[0]["key"], "--db", tuned_db, "--source", "asm").stdout
    assert "best" in text and "ret" in text
    hist = json.loads(cli("db", "history", rows[0]["key"], "--db", tuned_db, "--json").stdout)
    assert len(hist) == 12 and hist[-1]["best_ms"] == min(h["best_ms"] for h in hist if h["best_ms"])


def test_resume_adds_new_configs_only(tuned_db, tmp_path):
    cli("tune", "matmul", "--shape", "M=48,N=40,K=24", "--trials", "6", "--tuner", "random", "--db", tuned_db,
        "--seed", "0")
    out = tmp_path / "all.jsonl"
    cli("db", "export", str(out), "--db", tuned_db)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 18 and len({x["config_index"] for x in lines}) == 18


def test_tune_confirms_its_finalists_unless_told_not_to(tmp_path):
    """The finalists' records gain the timings of later batches; --no-confirm leaves one batch each."""
    timings = {}
    for flag in ("--confirm", "--no-confirm"):
        db, out = str(tmp_path / f"{flag}.db"), tmp_path / f"{flag}.jsonl"
        cli("tune", "matmul", "--shape", "M=37,N=29,K=23", "--trials", "4", "--tuner", "random", "--seed", "1",
            "--db", db, flag)
        cli("db", "export", str(out), "--db", db)
        timings[flag] = sorted(len(json.loads(x)["costs"]) for x in out.read_text().splitlines())
    once = timings["--no-confirm"][0]
    assert timings["--no-confirm"] == [once] * 4
    assert sum(n >= 3 * once for n in timings["--confirm"]) >= 2      # two finalists, timed in 2 more batches


def test_export_import_into_fresh_db(tuned_db, tmp_path):
    out = tmp_path / "e.jsonl"
    cli("db", "export", str(out), "--db", tuned_db)
    fresh = str(tmp_path / "fresh.db")
    assert "imported" in cli("db", "import", str(out), "--db", fresh).stdout
    a = json.loads(cli("db", "workloads", "--db", tuned_db, "--json").stdout)
    b = json.loads(cli("db", "workloads", "--db", fresh, "--json").stdout)
    assert [(r["key"], r["trials"], r["best_cost"]) for r in a] == [(r["key"], r["trials"], r["best_cost"]) for r in b]


def test_ops_lists_the_templates():
    rows = json.loads(cli("ops", "--json").stdout)
    library = {"matmul", "dense", "batch_matmul", "conv2d", "relu", "gelu", "silu", "add", "power", "where", "sum",
               "mean", "argmax", "var", "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm",
               "cross_entropy", "attention", "max_pool2d", "avg_pool2d", "global_avg_pool", "transpose", "pad",
               "concat", "slice", "take", "conv1d", "conv2d_nhwc", "conv2d_grouped", "conv2d_bias_relu",
               "conv2d_bn", "dense_gelu"}
    assert library <= {r["op"] for r in rows}
    assert next(r for r in rows if r["op"] == "layer_norm")["defaults"] == {"eps": "1e-05"}
    assert all(not r["op"].startswith("testing.") for r in rows)


@pytest.mark.parametrize("args, message", [
    (["tune", "gemm", "--shape", "M=4"], "unknown op 'gemm'"),
    (["tune", "matmul", "--shape", "M=4,N=4"], "missing parameter"),
    (["tune", "matmul", "--shape", "M=4,Q=3,N=4,K=4"], "unknown parameter"),
    (["tune", "matmul", "--shape", "M=four,N=4,K=4"], "matmul: parameter M must be an int, got str 'four'"),
    (["tune", "matmul", "--shape", "M=4.5.6"], "malformed --shape"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--target", "opencl"], "unknown target 'opencl'"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--target", "cuda -arch=80"], "-arch must look like sm_80"),
    (["db", "workloads", "--db", "/nonexistent/dir/x.db"], "does not exist"),
    (["db", "show", "nope()float32", "--db", "{notdb}"], "not a tuning database"),
    (["tune", "--plan", "{badplan}"], "not valid JSON"),
])
def test_bad_input_exits_2_with_one_line(args, message, tmp_path):
    notdb = tmp_path / "notdb.db"
    notdb.write_text("hello, I am not a database\n")
    badplan = tmp_path / "plan.json"
    badplan.write_text("{tasks: ")
    args = [a.format(notdb=notdb, badplan=badplan) for a in args]
    p = cli(*args, check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_plan_shares_the_budget(tmp_path):
    plan = tmp_path / "net.json"
    plan.write_text(json.dumps({"tasks": [
        {"op": "matmul", "shape": {"M": 32, "N": 32, "K": 32}, "weight": 3},
        {"op": "dense", "shape": {"M": 16, "N": 24, "K": 32}, "weight": 1}]}))
    db = str(tmp_path / "plan.db")
    rows = json.loads(cli("tune", "--plan", str(plan), "--trials", "40", "--tuner", "random", "--db", db,
                          "--seed", "1", "--json").stdout)
    assert sum(r["trials"] for r in rows) == 40 and all(r["trials"] >= 16 for r in rows)


def test_ctrl_c_stops_after_the_batch_and_keeps_everything(tmp_path, interrupt_when_measured):
    from tuning_db import TuningDB

    db = str(tmp_path / "int.db")
    p = subprocess.Popen([sys.executable, "-m", "autotune.cli", "tune", "matmul", "--shape", "M=64,N=64,K=64",
                          "--trials", "400", "--tuner", "random", "--db", db, "--seed", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, AUTOTUNE_NUM_THREADS="1"))
    interrupt_when_measured(p, db)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "interrupted" in out
    reader = TuningDB(db, readonly=True)
    kept = reader.records()
    assert 16 <= len(kept) < 400 and len(kept) % 16 == 0
    assert reader.runs()[0].status == "interrupted" and reader.runs()[0].trials_done == len(kept)


def test_op_library_ops_tune_from_the_cli_and_load_as_tuned(tmp_path):
    """Ops with tuple parameters (shape=5:37) and defaulted ones (layer_norm's eps) go through
    `autotune tune` into the database and come back through autotune.ops as tuned kernels."""
    import warnings

    import numpy as np

    import autotune
    from autotune import runtime

    db = str(tmp_path / "ops.db")
    cli("tune", "layer_norm", "--shape", "M=33,N=77", "--trials", "4", "--tuner", "random", "--db", db)
    cli("tune", "sum", "--shape", "shape=5:37,axes=1,keepdims=0", "--trials", "4", "--tuner", "random", "--db", db)
    rows = json.loads(cli("db", "workloads", "--db", db, "--json").stdout)
    assert {r["key"] for r in rows} == {"layer_norm(M=33,N=77,eps=1e-05)float32",
                                        "sum(shape=5:37,axes=1,keepdims=0)float32"}
    assert {r["rate_unit"] for r in rows} == {"GB/s"} and all(r["best_rate"] > 0 for r in rows)   # memory-bound
    runtime.clear_caches()
    x = np.random.default_rng(0).standard_normal((33, 77)).astype(np.float32)
    g, b = np.ones(77, np.float32), np.zeros(77, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # a fallback to the default config would warn
        assert autotune.load("layer_norm", db=db, M=33, N=77).provenance == "tuned"
        y = autotune.ops.layer_norm(x, g, b, db=db)
        s = autotune.ops.sum(x[:5, :37].copy(), axis=1, db=db)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, x[:5, :37].sum(1), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(gpu_available(), reason="checks the message on a machine without a GPU")
@pytest.mark.parametrize("target", ["cuda", "cuda -arch=sm_90"])
def test_tuning_for_cuda_without_a_gpu_is_one_line(target, tmp_path):
    p = cli("tune", "matmul", "--shape", "M=64,N=64,K=64", "--target", target, "--db", str(tmp_path / "t.db"),
            check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert "PyCUDA" in p.stderr or "GPU" in p.stderr
