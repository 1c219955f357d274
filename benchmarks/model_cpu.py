"""Whole models on the CPU (issue 15): autotune untuned and tuned against onnxruntime and numpy.

    python benchmarks/model_cpu.py [--models resnet18,bert_layer,...] [--time-budget 30m]
                                   [--trials N] [--quick] [--json rows.json] [--workdir DIR]

For each model of benchmarks/models (ResNet-18 batch 1 224x224, a BERT-base encoder layer at
seq 128, the MobileNet-V2 stack, the MLP; --quick: their reduced test sizes and a 60 s budget):
1. untuned: `compile_model` on a fresh database (every kernel the template's rule default);
2. `tune_model` into that database, stopped by --trials or --time-budget (30 minutes per model);
3. tuned: `compile_model` again; then the untuned and tuned models, onnxruntime (CPU provider,
   AUTOTUNE_NUM_THREADS intra-op threads, 1 inter-op, all graph optimisations) and numpy node by
   node (each node's numpy reference, the graph autotune imported) are timed interleaved in this
   process: the best of 5 rounds of n runs' median, n enough for about 20 ms of onnxruntime's
   runs and at least 5 (benchmarks/timing.py).
Outputs are checked against onnxruntime's. Memory: autotune's planned arena (intermediates) and,
for both runtimes, the growth of peak RSS from after reading the model and importing the runtime
to after compiling it and three runs, in a fresh process (weight copies and buffers included).
Targets: tuned ResNet-18 and BERT layer >= 1.0x onnxruntime; untuned >= 0.5x; kernels <= half
the ONNX node count.
"""
# ruff: noqa: E402  (the thread variables must be set before numpy and its BLAS load)
from __future__ import annotations

import os

for _var in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from timing import interleaved, repeat_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # the repository root: benchmarks.models
import onnx

import autotune
from autotune.frontend.onnx import load as load_onnx
from benchmarks.models import MODELS, reduced

THREADS = int(os.environ["AUTOTUNE_NUM_THREADS"])
TARGET_TUNED, TARGET_UNTUNED, TARGET_KERNELS = 1.0, 0.5, 0.5


def parse_budget(text: str) -> float:
    unit = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 1)
    return float(text[:-1] if text[-1:] in "smh" else text) * unit


def ort_session(model: onnx.ModelProto) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def numpy_runner(graph: Any) -> Any:
    """The imported graph run node by node on each op's numpy reference."""
    steps = []
    for n in graph.nodes:
        task = None if n.is_view else autotune.create_task(n.op, dtype=n.dtype, **n.params)
        steps.append((n, task))

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        env = {**graph.constants, **feeds}
        for n, task in steps:
            if task is None:
                env[n.outputs[0]] = env[n.inputs[0]].reshape(graph.value(n.outputs[0]).shape)
                continue
            for name, out in zip(n.outputs, task.reference([env[v] for v in n.inputs])):
                env[name] = np.asarray(out).astype(graph.value(name).dtype, copy=False)
        return [env[v.name] for v in graph.outputs]

    return run


def feeds_for(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng, feeds = np.random.default_rng(0), {}
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        if "mask" in inp.name:
            feeds[inp.name] = np.zeros(shape, np.float32)
    return feeds


_RSS_SCRIPT = """
import sys, numpy as np, onnx
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
model = onnx.load(sys.argv[2]); feeds = dict(np.load(sys.argv[3]))
if sys.argv[1] == "ort":
    import onnxruntime as ort
else:
    import autotune
base = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")          # the peak (VmHWM) restarts from here
if sys.argv[1] == "ort":
    so = ort.SessionOptions(); so.intra_op_num_threads = int(sys.argv[5]); so.inter_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    run = lambda: s.run(None, feeds)
else:
    m = autotune.compile_model(model, db=sys.argv[4]); run = lambda: m.run(feeds)
for _ in range(3):
    run()
print(status("VmHWM:") - base)
"""


def rss_growth(kind: str, model_path: Path, feeds_path: Path, db: Path) -> int | None:
    """Bytes the peak RSS grew by from after reading the model and importing the runtime to after
    building the session (compiling the model) and three runs, in a fresh process: the runtime's
    own memory, weights copies and buffers included."""
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, kind, str(model_path), str(feeds_path), str(db),
                          str(THREADS)], capture_output=True, text=True)
    return int(out.stdout.split()[-1]) if out.returncode == 0 and out.stdout.split() else None


def bench_model(name: str, model: onnx.ModelProto, trials: int, budget: float, work: Path) -> dict[str, Any]:
    db, model_path, feeds_path = work / f"{name}.db", work / f"{name}.onnx", work / f"{name}-feeds.npz"
    onnx.save(model, model_path)
    feeds = feeds_for(model)
    np.savez(feeds_path, **feeds)
    graph = load_onnx(model)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autotune: no tuned record")
        untuned = autotune.compile_model(graph, db=db)
        t0 = time.perf_counter()
        result = autotune.tune_model(graph, trials=trials, db=db, time_budget=budget, seed=0)
        tune_s = time.perf_counter() - t0
        autotune.runtime.clear_caches()
        tuned = autotune.compile_model(graph, db=db)
    sess, ref = ort_session(model), numpy_runner(graph)
    want = sess.run(None, feeds)
    for label, got in (("untuned", untuned.run(feeds)), ("tuned", tuned.run(feeds)), ("numpy", ref(feeds))):
        err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
        if err > 1e-3 * max(1.0, max(float(np.max(np.abs(w))) for w in want)):
            print(f"  WARNING {name}: {label} differs from onnxruntime by up to {err:.3g}")
    fns = [lambda: untuned.run(feeds), lambda: tuned.run(feeds), lambda: sess.run(None, feeds), lambda: ref(feeds)]
    repeat = repeat_for(fns[2])            # calls per timing: about 20 ms of onnxruntime's
    secs = dict(zip(("untuned", "tuned", "ort", "numpy"), interleaved(fns, repeat=repeat, rounds=5)))
    summary = tuned.summary()
    return {"model": name, "onnx_nodes": len(model.graph.node), "kernels": summary["kernel_nodes"],
            "tasks": len(result.tasks), "trials": result.trials, "tune_seconds": tune_s,
            "tuned_kernels": summary["provenance"]["tuned"], "ms": {k: v * 1e3 for k, v in secs.items()},
            "x_ort": {k: secs["ort"] / secs[k] for k in ("untuned", "tuned", "numpy")},
            "arena_bytes": summary["memory"]["arena_bytes"],
            "rss_growth": {"autotune": rss_growth("autotune", model_path, feeds_path, db),
                           "ort": rss_growth("ort", model_path, feeds_path, db)},
            "load_average": os.getloadavg()[0]}


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def print_row(r: dict[str, Any]) -> None:
    ms, x = r["ms"], r["x_ort"]
    print(f"{r['model']:<20} {r['onnx_nodes']:>5} {r['kernels']:>7} {r['tasks']:>5} {r['tune_seconds']:>6.0f} | "
          f"{ms['ort']:>8.3f} {ms['numpy']:>8.3f} {ms['untuned']:>8.3f} {ms['tuned']:>8.3f} | "
          f"{x['untuned']:>6.2f} {x['tuned']:>6.2f} | {mib(r['arena_bytes']):>6} {mib(r['rss_growth']['autotune']):>6} "
          f"{mib(r['rss_growth']['ort']):>6} {r['load_average']:>5.2f}", flush=True)


HEADER = (f"{'model':<20} {'nodes':>5} {'kernels':>7} {'tasks':>5} {'tune s':>6} | {'ORT ms':>8} {'numpy':>8} "
          f"{'untuned':>8} {'tuned':>8} | {'untun.x':>6} {'tunedx':>6} | {'arena':>6} {'rss':>6} {'ORTrss':>6} "
          f"{'load':>5}   (x: onnxruntime time / ours; MiB)")


def verdicts(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        checks = [("untuned", r["x_ort"]["untuned"] >= TARGET_UNTUNED),
                  ("kernels <= nodes/2", r["kernels"] <= TARGET_KERNELS * r["onnx_nodes"])]
        if r["model"] in ("resnet18", "bert_layer"):
            checks.insert(0, ("tuned", r["x_ort"]["tuned"] >= TARGET_TUNED))
        print(f"{r['model']}: " + ", ".join(f"{c} {'pass' if ok else 'MISS'}" for c, ok in checks))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--time-budget", default=None, help="tuning wall time per model: 30m (default), 90s, 1h")
    ap.add_argument("--trials", type=int, default=100_000, help="tuning trials per model (default: the budget)")
    ap.add_argument("--quick", action="store_true", help="reduced models and a 60 s budget: to check that it runs")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--workdir", metavar="DIR", help="keep the models and databases here")
    args = ap.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"model_cpu: unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    budget = parse_budget(args.time_budget or ("60s" if args.quick else "30m"))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="model-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores, {THREADS} threads, load {os.getloadavg()[0]:.2f}; budget {budget:.0f} s per model",
          flush=True)
    rows = []
    for name in names:
        model = reduced(name) if args.quick else MODELS[name]()
        rows.append(bench_model(name, model, args.trials, budget, work))
        if len(rows) == 1:
            print(HEADER)
        print_row(rows[-1])
    verdicts(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
