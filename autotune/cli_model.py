"""`autotune model ...`: inspect an ONNX model (its ops, the kernels it needs and which the database
has tuned), run it on autotune's kernels (outputs and latency) and profile it (time per kernel).

Arguments are checked before the model is read: a missing file, a malformed --shapes or --input
item exits 2 with one line, as does an unknown input name or a wrong shape once the model is read.
"""
from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from typing import Any

import click
import numpy as np

from .cli import CLIError, clip, emit_json
from .topi.layout import LAYOUTS

_DB_OPTION = click.option("--db", default=None,
                          help="Tuning database (path or URL); default $AUTOTUNE_DB or ./tuning.db")
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
LAYOUT_OPTION = click.option("--layout", default="nchw", show_default=True, type=click.Choice(LAYOUTS),
                             help="Activations between convs: nchw, or nchwc (blocked by channels; tune and "
                                  "run with the same layout).")
_TARGET_OPTION = click.option("--target", default="llvm", show_default=True, help="Target the kernels are for.")


@click.group()
def model() -> None:
    """Inspect and run ONNX models on autotune's kernels."""


def parse_shapes(items: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """`input=1x3x224x224` items (each option may hold several, comma-separated) -> {name: dims}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in (p.strip() for text in items for p in text.split(",")):
        name, sep, dims = item.rpartition("=")
        parts = dims.split("x")
        if not sep or not name or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
            raise CLIError(f"malformed --shapes item {clip(item)!r}; expected NAME=DIMxDIM..., "
                           "e.g. input=1x3x224x224 (positive dims)")
        if name in out:
            raise CLIError(f"--shapes gives {clip(name)!r} twice")
        out[name] = tuple(map(int, parts))
    return out


def parse_inputs(items: tuple[str, ...]) -> dict[str, np.ndarray]:
    """`name=x.npy` items -> {name: array}, each file read without pickle."""
    out: dict[str, np.ndarray] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CLIError(f"malformed --input {clip(item)!r}; expected NAME=FILE.npy, e.g. input=x.npy")
        if name in out:
            raise CLIError(f"--input gives {clip(name)!r} twice")
        if not os.path.isfile(path):
            raise CLIError(f"--input {clip(name)}: no such file {clip(path)!r}")
        try:
            out[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CLIError(f"--input {clip(name)}: cannot read {clip(path)!r} as a .npy array: {exc}") from None
        if not isinstance(out[name], np.ndarray):
            raise CLIError(f"--input {clip(name)}: {clip(path)!r} is an .npz archive; expected one .npy array")
    return out


def load_graph(path: str, shapes: dict[str, tuple[int, ...]]) -> Any:
    """The model's Graph through the ONNX frontend; one-line errors for a missing file or frontend."""
    if not os.path.isfile(path):
        raise CLIError(f"no such model file {clip(path)!r}")
    from .graph.executor import onnx_frontend

    try:
        frontend = onnx_frontend()
    except ImportError as exc:
        raise CLIError(f"reading ONNX models needs autotune.frontend.onnx and the onnx package: {exc}") from None
    return frontend.load(path, shapes=shapes or None)


def inspect_graph(graph: Any, db: Any = None, target: str = "llvm", fuse: bool = True,
                  layout: str = "nchw") -> dict[str, Any]:
    """The graph's inputs, outputs, op counts, and each distinct kernel it needs with the number of
    kernel nodes using it (its weight) and the provenance `autotune.load` would give it (nothing is
    compiled). The kernels are those `compile_model` runs, after its compile-time passes (weights
    pre-packed, and with `fuse` the fusion groups'); `groups` lists each group: its source nodes
    and ops, how it was fused, and the task it became."""
    from .graph.executor import prepare_graph
    from .runtime import lookup

    ops = dict(graph.op_counts().most_common())
    graph, groups = prepare_graph(graph, target, db, fuse=fuse, layout=layout)
    kernels, keys = [], {}
    for key, nodes in graph.kernel_uses().items():
        n = nodes[0]
        task, provenance = lookup(n.op, target=target, db=db, dtype=n.dtype, **n.params)
        keys[key] = task.workload_key
        kernels.append({"op": n.op, "params": n.params, "dtype": n.dtype, "workload": task.workload_key,
                        "nodes": len(nodes), "provenance": provenance})
    kinds = Counter(k["provenance"].split(":", 1)[0] for k in kernels)
    report = {"graph": graph.name, "inputs": [_sig(v) for v in graph.inputs],
              "outputs": [_sig(v) for v in graph.outputs], "ops": ops, "kernels": kernels,
              "provenance": {p: kinds.get(p, 0) for p in ("tuned", "nearest", "default")}}
    if groups is not None:
        report["groups"] = [{"nodes": list(g.nodes), "ops": list(g.ops), "how": g.how,
                             "task": keys[g.kernel.kernel_key]} for g in groups]
    return report


def _sig(v: Any) -> dict[str, Any]:
    return {"name": v.name, "shape": list(v.shape), "dtype": v.dtype}


@model.command()
@click.argument("model_path", metavar="MODEL")
@click.option("--shapes", multiple=True,
              help="Bind an input's unknown dims: NAME=1x3x224x224 (repeat or comma-separate).")
@click.option("--fuse/--no-fuse", default=True, show_default=True,
              help="Group the nodes into fused kernels, as `compile_model` runs them.")
@LAYOUT_OPTION
@_DB_OPTION
@_TARGET_OPTION
@_JSON_OPTION
def inspect(model_path: str, shapes: tuple[str, ...], fuse: bool, layout: str, db: str | None, target: str,
            as_json: bool) -> None:
    """The model's ops, its fusion groups, the kernels it needs with their shapes, and which the
    database has tuned."""
    bound = parse_shapes(shapes)
    report = inspect_graph(load_graph(model_path, bound), db=db, target=target, fuse=fuse, layout=layout)
    if as_json:
        return emit_json(report)
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    console.print(f"graph {report['graph']}: " + ", ".join(f"{v['name']} {v['dtype']}{v['shape']}"
                                                          for v in report["inputs"]))
    ops = Table("op", "nodes")
    for op, count in report["ops"].items():
        ops.add_row(op, str(count))
    console.print(ops)
    if "groups" in report:
        groups = Table("group", "ops", "how", "task", "nodes")
        for i, g in enumerate(report["groups"]):
            groups.add_row(str(i), "+".join(g["ops"]), g["how"], g["task"], ", ".join(g["nodes"]))
        console.print(groups)
    kernels = Table("kernel", "nodes", "provenance")
    for k in report["kernels"]:
        kernels.add_row(k["workload"], str(k["nodes"]), k["provenance"])
    console.print(kernels)
    p = report["provenance"]
    console.print(f"{len(report['kernels'])} kernels: {p['tuned']} tuned, {p['nearest']} from a nearest shape, "
                  f"{p['default']} default")


@model.command()
@click.argument("model_path", metavar="MODEL")
@click.option("--input", "inputs", multiple=True, help="An input's value: NAME=FILE.npy (repeat for each input).")
@click.option("--repeat", default=10, show_default=True, type=click.IntRange(1, 1_000_000),
              help="Timed calls after one warm-up call.")
@LAYOUT_OPTION
@_DB_OPTION
@_TARGET_OPTION
@_JSON_OPTION
def run(model_path: str, inputs: tuple[str, ...], repeat: int, layout: str, db: str | None, target: str,
        as_json: bool) -> None:
    """Run the model on the given inputs: print its outputs and the latency (median and min)."""
    from .graph.executor import compile_model

    feeds = parse_inputs(inputs)
    m = compile_model(load_graph(model_path, {k: tuple(a.shape) for k, a in feeds.items()}), db=db, target=target,
                      layout=layout)
    outputs = m.run(feeds)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        m.run(feeds)
        times.append(time.perf_counter() - t)
    report: dict[str, Any] = {"outputs": [_describe(name, a) for (name, _, _), a in zip(m.outputs, outputs)],
              "latency_ms": {"median": statistics.median(times) * 1e3, "min": min(times) * 1e3, "repeat": repeat},
              "summary": m.summary()}
    if as_json:
        return emit_json(report)
    s = report["summary"]
    click.echo(f"graph {s['graph']}: {s['kernel_nodes']} kernel nodes ({s['provenance']['tuned']} tuned, "
               f"{s['provenance']['nearest']} nearest, {s['provenance']['default']} default), "
               f"arena {_size(s['memory']['arena_bytes'])} (unshared {_size(s['memory']['unshared_bytes'])})")
    for o in report["outputs"]:
        click.echo(f"output {o['name']}: {o['dtype']}{o['shape']} min {o['min']:.6g} max {o['max']:.6g} "
                   f"mean {o['mean']:.6g} first {o['first']}")
    lat = report["latency_ms"]
    click.echo(f"latency over {repeat} calls: median {lat['median']:.3f} ms, min {lat['min']:.3f} ms")


@model.command()
@click.argument("model_path", metavar="MODEL")
@click.option("--input", "inputs", multiple=True, help="An input's value: NAME=FILE.npy (default: random inputs).")
@click.option("--shapes", multiple=True, help="Bind an input's unknown dims: NAME=1x3x224x224 (repeatable).")
@click.option("--repeat", default=10, show_default=True, type=click.IntRange(1, 100_000),
              help="Timed runs after one warm-up run.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Also write a bar chart as PNG.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(1, 100_000), help="Rows shown.")
@click.option("--against-defaults", is_flag=True,
              help="Also compile the model with every kernel at its rule default and time both in turns: "
                   "per node, what the database's configs gain or lose inside the model.")
@LAYOUT_OPTION
@_DB_OPTION
@_TARGET_OPTION
@_JSON_OPTION
def profile(model_path: str, inputs: tuple[str, ...], shapes: tuple[str, ...], repeat: int, plot: str | None,
            top: int, against_defaults: bool, layout: str, db: str | None, target: str, as_json: bool) -> None:
    """Per-kernel time, share, GFLOP/s or GB/s and provenance: where the model's time goes."""
    from .graph.executor import CompiledModel
    from .graph.profile import plot_profile

    if plot and against_defaults:
        raise CLIError("--plot draws one model's profile; leave it out with --against-defaults")
    if plot and not os.path.isdir(os.path.dirname(os.path.abspath(plot))):
        raise CLIError(f"--plot {clip(plot)!r}: no such directory")
    feeds = parse_inputs(inputs)
    bound = {**parse_shapes(shapes), **{k: tuple(a.shape) for k, a in feeds.items()}}
    graph = load_graph(model_path, bound)
    if against_defaults:
        return _print_comparison(graph, db, feeds or None, repeat, top, target, layout, as_json)
    m = CompiledModel(graph, db=db, target=target, layout=layout)
    prof = m.profile(feeds or None, repeat=repeat)
    if plot:
        try:
            plot_profile(prof, plot, m.graph.name)
        except (ImportError, OSError) as exc:
            raise CLIError(f"--plot {clip(plot)!r}: {exc}") from None
    if as_json:
        return emit_json({"kernel_ms": prof.total_seconds * 1e3, "run_ms": prof.run_seconds * 1e3,
                          "repeat": repeat, "kernels": prof.rows()})
    from rich.console import Console
    from rich.table import Table

    table = Table("node", "op", "ms", "share", "throughput", "provenance",
                  caption=f"{prof.total_seconds * 1e3:.3f} ms in {len(prof.kernels)} kernels; whole run "
                          f"{prof.run_seconds * 1e3:.3f} ms (median of {repeat})")
    for k in prof.kernels[:top]:
        rate = f"{k.gflops:.1f} GFLOP/s" if k.bound == "compute" else f"{k.gbytes_per_s:.1f} GB/s"
        table.add_row(clip(k.node, 40), k.op, f"{k.seconds * 1e3:.3f}", f"{k.share:.1%}", rate, k.provenance)
    Console(width=160).print(table)
    if plot:
        click.echo(f"plot written to {plot}")


def _print_comparison(graph: Any, db: str | None, feeds: dict[str, np.ndarray] | None, repeat: int, top: int,
                      target: str, layout: str, as_json: bool) -> None:
    """`model profile --against-defaults`: the nodes whose time the database's configs changed
    most inside the model, gains first, losses last."""
    from .graph.profile import compare_with_defaults

    c = compare_with_defaults(graph, db, feeds, repeat, target=target, layout=layout)
    if as_json:
        return emit_json({"run_ms": c.run_seconds * 1e3, "default_run_ms": c.default_run_seconds * 1e3,
                          "repeat": repeat, "rounds": c.rounds, "nodes": c.rows()})
    from rich.console import Console
    from rich.table import Table

    shown = c.nodes if len(c.nodes) <= top else c.nodes[:(top + 1) // 2] + c.nodes[len(c.nodes) - top // 2:]
    table = Table("node", "op", "ms", "default ms", "speedup", "provenance",
                  caption=f"whole run {c.run_seconds * 1e3:.3f} ms, every kernel at its default "
                          f"{c.default_run_seconds * 1e3:.3f} ms (lowest of {c.rounds} medians of {repeat} "
                          f"runs, in turns); speedup below 1: slower than the default in this model; "
                          f"a default config's speedup is the timing's noise")
    for n in shown:
        table.add_row(clip(n.node, 40), n.op, f"{n.seconds * 1e3:.3f}", f"{n.default_seconds * 1e3:.3f}",
                      f"{n.speedup:.2f}x", f"{n.provenance}, default config" if n.same_config else n.provenance)
    Console(width=160).print(table)


def _describe(name: str, a: np.ndarray) -> dict[str, Any]:
    """An output in a few numbers: shape, dtype, range, mean and its first values."""
    flat = a.reshape(-1)
    stats = flat.astype(np.float64) if flat.size else np.zeros(1)
    return {"name": name, "shape": list(a.shape), "dtype": str(a.dtype), "min": float(stats.min()),
            "max": float(stats.max()), "mean": float(stats.mean()), "first": flat[:6].tolist()}


def _size(nbytes: int) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"
