"""The generalization benchmark (issue 13, "Fast on every shape"): tuned kernels against numpy and
onnxruntime on every shape of benchmarks/generalization_cases.py, measured in one run.

    python benchmarks/generalization.py [--quick] [--only REGEX] [--trials N] [--no-transfer]
                                        [--json rows.json] [--workdir DIR [--resume]]

1. no transfer: each shape is tuned with N xgb trials (64; --quick: 8 shapes, 16 trials) into a
   fresh database of its own;
2. with transfer: each shape is tuned again, from scratch, in a database that holds the pass-1
   records of every other shape (`autotune.tune(..., transfer=True)` where tune has that option;
   without it, tune's own warm start from other shapes' records in the database is what transfers);
3. timed in this process, interleaved: each pass's best kernel (`autotune.load`, run as a model
   runs it: a GEMM with a constant weight as its `*_packed` kernel, a conv with its weight
   transforms done once, see generalization_cases.py; bound once to its arrays, as a model binds
   its kernels and as onnxruntime's IO binding binds its model's), numpy and a
   one-node onnxruntime model (benchmarks/references.py). Per implementation: the fastest of
   5 x n calls, in 5 rounds taking turns with the others, n calls per round after a warm-up call
   (benchmarks/timing.py), n in [5, 50] sized to ~0.1 s of numpy's fastest call. Not the median:
   where other processes share the cores, a 2-thread kernel whose second thread is descheduled
   waits for it at every barrier, and medians of whole rounds measured 3 to 100x slower than the
   same code on a quiet core pair (numpy's sgemm, the tuned kernels); the fastest call is what
   the code does when it runs.

The whole catalogue at 64 trials takes hours; with --workdir and --resume a run killed part way
is started again where it stopped: each pass of each shape is kept (its database, its trials'
costs and wall time, beside the shape's name, the trial count, a digest of autotune's source and,
with transfer, a digest of the other shapes' records it had) and reused only where all of those
still hold. The timing (3.) is always this run's, of every shape.

Columns: the pass-1 kernel's GFLOP/s, x numpy, x onnxruntime; t90 = trials until the best so far
is within 90% of the shape's best throughput (the best tuner-measured time of either pass); the
pass-2 kernel's GFLOP/s, x onnxruntime and t90 (">N": not within N trials); the 1-minute load
average when the row was timed. Targets: geomean >= 1.1x onnxruntime; no shape
below 0.8x onnxruntime; matmul and dense on random odd shapes >= 0.9x numpy; with transfer, t90
<= 16 for most (more than half of the) shapes. A last line names the kernels whose tuner figure
and this timing differ by more than MOVED x either way: the machine's speed moved between them
(a shared VM's parallel kernels ran 2-2.5x slow for minutes at a time), and such rows' ratios
carry that.

Threads: AUTOTUNE_NUM_THREADS and the BLAS thread variables default to 2 (set before numpy loads);
onnxruntime runs AUTOTUNE_NUM_THREADS intra-op threads and 1 inter-op thread.
"""
# ruff: noqa: E402  (the thread variables must be set before numpy and its BLAS load)
from __future__ import annotations

import os

for _var in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import hashlib
import inspect
import json
import math
import platform
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from generalization_cases import Case, catalogue, quick
from timing import interleaved, seconds
from tune_matmul import trials_to_reach

import autotune
from autotune.kernel_cache import compiler_digest
from autotune.measure.worker.run import hoisted_inputs
from autotune.runtime import hoist

THREADS = int(os.environ["AUTOTUNE_NUM_THREADS"])
HAS_TRANSFER = "transfer" in inspect.signature(autotune.tune).parameters
TARGET_GEOMEAN, TARGET_MIN, TARGET_ODD, TARGET_T90 = 1.1, 0.8, 0.9, 16
ROUNDS = 5
MOVED = 1.5           # tuner figure against this run's timing: beyond it, the speed moved
KEPT = " (kept from an earlier run)"


@dataclass
class Tuned:
    """One tuning pass of one shape, as the tuner measured it."""

    db: Path
    best_seconds: float
    costs: list[float]          # per trial in order, inf for a failed one
    seconds: float              # wall time of the pass
    errors: int


def empty_db(path: Path) -> Path:
    """Remove a database left by an earlier run in --workdir (with its WAL files)."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    return path


def slug(case: Case) -> str:
    """The shape's name as a file name."""
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", case.name)


def pass_file(work: Path, label: str, case: Case, ext: str) -> Path:
    """One of the files of one pass of one shape (named by the shape: a run of another selection
    of shapes finds them)."""
    return work / f"{label}-{slug(case)}{ext}"


def pass_facts(case: Case, trials: int, others: dict[str, bytes]) -> dict[str, Any]:
    """What a kept pass must have been run with: the shape, the trials, autotune's source (a
    kernel of other code is not this code's) and, with transfer, the records of other shapes it
    had (their files' names and a digest of their bytes: a shape tuned again changes them)."""
    records = hashlib.sha256()
    for name, data in others.items():
        records.update(name.encode() + b"\0" + data + b"\0")
    return {"shape": case.name, "trials": trials, "compiler": compiler_digest(),
            "others": list(others), "others_sha256": records.hexdigest() if others else None}


def kept_pass(work: Path, label: str, case: Case, facts: dict[str, Any]) -> Tuned | None:
    """The pass an earlier run stored in `work` (--resume), or None where it is missing, was run
    with other facts or lost its database."""
    path, db = pass_file(work, label, case, ".json"), pass_file(work, label, case, ".db")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("facts") != facts or not db.exists():
        return None
    costs = [math.inf if c is None else c for c in saved["costs"]]
    best = math.inf if saved["best_seconds"] is None else saved["best_seconds"]
    return Tuned(db, best, costs, saved["seconds"], saved["errors"])


def keep_pass(work: Path, label: str, case: Case, facts: dict[str, Any], t: Tuned) -> None:
    """Store a finished pass for --resume (written whole, then renamed: a run killed while
    writing leaves no half a record)."""
    costs = [c if math.isfinite(c) else None for c in t.costs]
    best = t.best_seconds if math.isfinite(t.best_seconds) else None
    tmp = pass_file(work, label, case, ".json.tmp")
    tmp.write_text(json.dumps({"facts": facts, "best_seconds": best, "costs": costs, "seconds": t.seconds,
                               "errors": t.errors}))
    tmp.replace(pass_file(work, label, case, ".json"))


def tune_one(case: Case, db: Path, trials: int, transfer: bool) -> Tuned:
    kwargs = {"transfer": transfer} if HAS_TRANSFER else {}
    t0 = time.perf_counter()
    res = autotune.tune(case.kernel_task(), trials=trials, tuner="xgb", db=str(db), seed=0, **kwargs)
    return Tuned(db, res.best_seconds, [r.cost for _, r in res.history], time.perf_counter() - t0, res.errors)


def announce(label: str, i: int, n: int, case: Case, t: Tuned, note: str = "") -> None:
    gf = case.task().flop / t.best_seconds / 1e9 if math.isfinite(t.best_seconds) else 0.0
    print(f"  {label} [{i + 1}/{n}] {case.name}: {len(t.costs)} trials, best {gf:.1f} GFLOP/s (tuner), "
          f"{t.errors} errors, {t.seconds:.0f} s{note}", flush=True)


def pass_fresh(cases: list[Case], trials: int, work: Path, resume: bool) -> list[Tuned]:
    """Pass 1: each shape into a fresh database; its records are also exported for pass 2."""
    from tuning_db import TuningDB

    done = []
    for i, case in enumerate(cases):
        facts, records = pass_facts(case, trials, {}), pass_file(work, "fresh", case, ".jsonl")
        t = kept_pass(work, "fresh", case, facts) if resume and records.exists() else None
        note = KEPT
        if t is None:
            t, note = tune_one(case, empty_db(pass_file(work, "fresh", case, ".db")), trials, transfer=False), ""
            with TuningDB(t.db) as db:
                db.export_jsonl(records)
            keep_pass(work, "fresh", case, facts, t)
        announce("no transfer", i, len(cases), case, t, note)
        done.append(t)
    return done


def pass_transfer(cases: list[Case], trials: int, work: Path, resume: bool) -> list[Tuned]:
    """Pass 2: each shape from scratch in a database holding every other shape's pass-1 records."""
    from tuning_db import TuningDB

    files = (pass_file(work, "fresh", c, ".jsonl") for c in cases)
    records = {path.name: path.read_bytes() for path in files}      # read once: digested, then merged
    done = []
    for i, case in enumerate(cases):
        own = pass_file(work, "fresh", case, ".jsonl").name
        others = {name: data for name, data in records.items() if name != own}
        facts = pass_facts(case, trials, others)
        t = kept_pass(work, "transfer", case, facts) if resume else None
        note = KEPT
        if t is None:
            merged, db = work / "others.jsonl", empty_db(pass_file(work, "transfer", case, ".db"))
            merged.write_bytes(b"".join(others.values()))
            with TuningDB(db) as d:
                note = f"; {d.import_jsonl(merged)} records of other shapes in its database"
            t = tune_one(case, db, trials, transfer=True)
            keep_pass(work, "transfer", case, facts, t)
        announce("transfer", i, len(cases), case, t, note)
        done.append(t)
    return done


def kernel_run(case: Case, db: Path, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> Any:
    """The best kernel of the database at this shape as a call bound to its arrays and a
    preallocated output (checked once, as a model binds its kernels), its weight transforms
    done once as in a model, or None when the pass stored no valid record."""
    op, params = case.kernel_op()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autotune: no tuned record")
        kernel = autotune.load(op, db=str(db), constant_inputs=case.weights, **params)
    if kernel.provenance != "tuned":
        return None
    out, args = np.empty(out_shape, np.float32), case.kernel_inputs(inputs)
    split = hoist(kernel, case.weights)
    if split is None:
        bound = kernel.func.bind(*args, out)
    else:
        sources = {"prologue_inputs": split.prologue_inputs, "sources": split.sources}
        bound = split.func.bind(*hoisted_inputs(sources, split.prologue, args), out)

    def run() -> np.ndarray:
        bound()
        return out
    return run


def time_case(case: Case, dbs: dict[str, Path]) -> tuple[dict[str, float], bool]:
    """Seconds per call of numpy, onnxruntime and each pass's kernel (see the module docstring),
    and whether every output matched numpy's."""
    task = case.task()
    inputs = task.make_inputs(np.random.default_rng(0))
    out_shape = tuple(task.arg_specs[task.num_inputs][0])
    runs = {"numpy": case.numpy(inputs), "ort": case.ort(inputs, out_shape, THREADS)}
    for label, db in dbs.items():
        run = kernel_run(case, db, inputs, out_shape)
        if run is not None:
            runs[label] = run
    want = runs["numpy"]().copy()
    atol = 1e-4 * math.sqrt(task.flop / 2 / want.size)
    ok = True
    for label, run in runs.items():
        if not np.allclose(run(), want, rtol=1e-3, atol=atol):
            print(f"  WARNING {case.name}: {label} differs from numpy by up to {np.max(np.abs(run() - want)):.3g}")
            ok = False
    repeat = int(min(50, max(5, 0.1 / seconds(runs["numpy"], 5, np.min))))
    return dict(zip(runs, interleaved(list(runs.values()), repeat, ROUNDS, np.min))), ok


def make_row(case: Case, passes: dict[str, Tuned], secs: dict[str, float], ok: bool) -> dict[str, Any]:
    flop = case.task().flop
    best = min(t.best_seconds for t in passes.values())
    row: dict[str, Any] = {"name": case.name, "family": case.family, "op": case.op, "params": case.params,
                           "random_odd": case.random_odd, "gflop": flop / 1e9, "outputs_match_numpy": ok,
                           "numpy_gflops": flop / secs["numpy"] / 1e9, "ort_gflops": flop / secs["ort"] / 1e9,
                           "load_average": os.getloadavg()[0], "trials": len(next(iter(passes.values())).costs)}
    for label, t in passes.items():
        s = secs.get(label)
        reached = trials_to_reach(t.costs, best / 0.9) if math.isfinite(best) else None
        row[label] = {"gflops": flop / s / 1e9 if s else None, "x_numpy": secs["numpy"] / s if s else None,
                      "x_ort": secs["ort"] / s if s else None, "t90": reached, "tune_seconds": t.seconds,
                      "errors": t.errors, "tuner_gflops": flop / t.best_seconds / 1e9}
    return row


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def fmt_t90(row: dict[str, Any], label: str) -> str:
    if label not in row:
        return "-"
    return f">{row['trials']}" if row[label]["t90"] is None else str(row[label]["t90"])


HEADER = (f"{'shape':<34} {'GFLOP':>6} {'numpy':>6} {'ORT':>6} | {'GF/s':>6} {'x np':>5} {'x ORT':>5} {'t90':>4}"
          f" | {'xfer':>6} {'x ORT':>5} {'t90':>4} {'load':>5}   (GFLOP/s unless marked)")


def print_row(r: dict[str, Any]) -> None:
    a, b = r["fresh"], r.get("transfer", {})
    print(f"{r['name']:<34} {r['gflop']:>6.3f} {r['numpy_gflops']:>6.1f} {r['ort_gflops']:>6.1f} | "
          f"{fmt(a['gflops'], '6.1f'):>6} {fmt(a['x_numpy'], '5.2f'):>5} {fmt(a['x_ort'], '5.2f'):>5} "
          f"{fmt_t90(r, 'fresh'):>4} | {fmt(b.get('gflops'), '6.1f'):>6} {fmt(b.get('x_ort'), '5.2f'):>5} "
          f"{fmt_t90(r, 'transfer'):>4} {r['load_average']:>5.2f}", flush=True)


def verdict(ok: bool) -> str:
    return "pass" if ok else "MISS"


def summary(rows: list[dict[str, Any]], transfer: bool) -> None:
    """One line per target of issue 13, pass or MISS (a shape without a valid kernel misses)."""
    x_ort = [r["fresh"]["x_ort"] for r in rows]
    have = [x for x in x_ort if x is not None]
    geo = math.exp(sum(map(math.log, have)) / len(have)) if have else 0.0
    print(f"geomean x onnxruntime {geo:.2f} over {len(have)}/{len(rows)} shapes (target >= {TARGET_GEOMEAN}): "
          f"{verdict(geo >= TARGET_GEOMEAN and len(have) == len(rows))}")
    low = [f"{r['name']} {fmt(x, '.2f')}" for r, x in zip(rows, x_ort) if x is None or x < TARGET_MIN]
    print(f"shapes below {TARGET_MIN}x onnxruntime: {len(low)} (min {fmt(min(have, default=None), '.2f')}): "
          f"{verdict(not low)}" + (f"  [{'; '.join(low)}]" if low else ""))
    odd = [r for r in rows if r["random_odd"] and r["family"] in ("matmul", "dense")]
    slow = [f"{r['name']} {fmt(r['fresh']['x_numpy'], '.2f')}" for r in odd
            if r["fresh"]["x_numpy"] is None or r["fresh"]["x_numpy"] < TARGET_ODD]
    print(f"random odd matmul/dense below {TARGET_ODD}x numpy: {len(slow)} of {len(odd)}: "
          + (verdict(not slow) if odd else "none selected") + (f"  [{'; '.join(slow)}]" if slow else ""))
    for label in ("fresh", "transfer") if transfer else ("fresh",):
        quick_ones = sum(r[label]["t90"] is not None and r[label]["t90"] <= TARGET_T90 for r in rows)
        tail = f": {verdict(2 * quick_ones > len(rows))}" if label == "transfer" else " (for comparison)"
        print(f"t90 <= {TARGET_T90} trials {'with' if label == 'transfer' else 'without'} transfer: "
              f"{quick_ones} of {len(rows)} shapes{tail}")
    if not transfer:
        print("with transfer, t90 <= 16 for most shapes: not run (--no-transfer)")
    print(moved_line(rows))


def moved_line(rows: list[dict[str, Any]]) -> str:
    """The kernels whose tuner-measured GFLOP/s and this run's differ by more than MOVED x."""
    pairs = [(r["name"], label, r[label]) for r in rows for label in ("fresh", "transfer") if label in r]
    timed = [(name, label, p) for name, label, p in pairs if p["gflops"] and p["tuner_gflops"]]
    moved = [f"{name} ({label}) {p['tuner_gflops']:.0f} -> {p['gflops']:.0f}" for name, label, p in timed
             if not 1 / MOVED <= p["gflops"] / p["tuner_gflops"] <= MOVED]
    return (f"tuner and this timing within {MOVED}x of each other: {len(timed) - len(moved)} of {len(timed)} "
            f"kernels" + (f"  [{'; '.join(moved)}]" if moved else ""))


def warn_if_busy(cores: int | None) -> None:
    """Other processes on the cores distort what every row measures; say so before it starts
    (the load average counts this run's own threads once it runs: each row shows it too)."""
    load = os.getloadavg()[0]
    if load > (cores or 1) / 2:
        print(f"WARNING: 1-minute load average {load:.2f} on {cores} cores: other processes hold the cores, and "
              "2-thread kernels that wait for a descheduled thread at each barrier (numpy's sgemm, the tuned "
              "kernels; onnxruntime's thread pool less) run many times slower than on idle cores")


def cpu_name() -> str:
    """The CPU's model name (Linux), else what `platform` knows."""
    info = Path("/proc/cpuinfo")
    text = info.read_text(encoding="utf-8", errors="replace") if info.exists() else ""
    names = [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    import onnxruntime

    threads = {v: os.environ[v] for v in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "load_average": os.getloadavg(), "threads": threads,
            "onnxruntime_threads": {"intra_op": THREADS, "inter_op": 1}, "numpy": np.__version__,
            "onnxruntime": onnxruntime.__version__, "python": platform.python_version()}


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 shapes, 16 trials: to check that it runs")
    ap.add_argument("--only", metavar="REGEX", help="shapes whose name matches (re.search)")
    ap.add_argument("--trials", type=int, help="xgb trials per shape and pass (64; --quick 16)")
    ap.add_argument("--no-transfer", action="store_true", help="skip the pass with transfer")
    ap.add_argument("--json", metavar="PATH", help="write the machine and per-shape rows as JSON")
    ap.add_argument("--workdir", metavar="DIR", help="keep the databases here (default: a temporary directory)")
    ap.add_argument("--resume", action="store_true",
                    help="with --workdir: keep each pass an earlier run of this code finished there (the same "
                         "trials; with transfer, the same other shapes' records); tune the rest, then time every "
                         "shape")
    args = ap.parse_args(argv)
    if args.resume and not args.workdir:
        ap.error("--resume needs --workdir (the directory of the run it resumes)")
    args.trials = args.trials or (16 if args.quick else 64)
    return args


def select(args: argparse.Namespace) -> list[Case]:
    cases = quick(catalogue()) if args.quick else catalogue()
    return [c for c in cases if not args.only or re.search(args.only, c.name)]


def run(args: argparse.Namespace, cases: list[Case], work: Path) -> list[dict[str, Any]]:
    print(f"{len(cases)} shapes, {args.trials} xgb trials per shape and pass", flush=True)
    t0 = time.perf_counter()
    fresh = pass_fresh(cases, args.trials, work, args.resume)
    xfer = [] if args.no_transfer else pass_transfer(cases, args.trials, work, args.resume)
    print(f"tuning took {time.perf_counter() - t0:.0f} s; timing in this process\n{HEADER}", flush=True)
    rows = []
    for i, case in enumerate(cases):
        passes = {"fresh": fresh[i]} | ({"transfer": xfer[i]} if xfer else {})
        secs, ok = time_case(case, {label: t.db for label, t in passes.items()})
        rows.append(make_row(case, passes, secs, ok))
        print_row(rows[-1])
    return rows


def main(argv: list[str]) -> int:
    args = parse(argv)
    cases = select(args)
    if not cases:
        print(f"generalization: no shape's name matches {args.only!r}", file=sys.stderr)
        return 2
    if len({slug(c) for c in cases}) < len(cases):
        print("generalization: two shapes' names give one file name", file=sys.stderr)
        return 2
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print("generalization: needs onnx and onnxruntime: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    info = machine()
    load = " ".join(f"{x:.2f}" for x in info["load_average"])
    print(f"machine: {info['cpu']}, {info['cores']} cores, load average {load}; threads {info['threads']}; "
          f"onnxruntime {info['onnxruntime']} intra-op {THREADS} inter-op 1; numpy {info['numpy']}")
    warn_if_busy(info["cores"])
    if not args.no_transfer and not HAS_TRANSFER:
        print("transfer: not available (autotune.tune has no transfer= option); pass 2 measures tune's own "
              "warm start from other shapes' records in its database")
    with tempfile.TemporaryDirectory(prefix="gen-bench-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = run(args, cases, work)
    summary(rows, not args.no_transfer)
    info["load_average_end"] = os.getloadavg()
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in info["load_average_end"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "trials": args.trials, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
