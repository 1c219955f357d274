"""Where a model's time goes: every kernel node timed inside whole runs of the model.

Each step is timed in place, in `repeat` complete runs, so caches hold what they hold in a real
call (a kernel timed alone, its inputs hot, would look faster than it runs in the model). A node's
time is its median over the runs. Throughput is GFLOP/s for a kernel that does more than one
floating-point operation per byte it touches (matmul, conv), else GB/s of its arguments'
bytes: what bounds each kind.
"""
from __future__ import annotations

import math
import os
import statistics
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .executor import CompiledModel
from .ir import Graph


@dataclass(frozen=True)
class KernelTime:
    """One kernel node's share of the model's time."""

    node: str
    op: str
    workload: str
    provenance: str
    seconds: float
    share: float                  # of the sum over kernel nodes
    gflops: float
    gbytes_per_s: float

    @property
    def bound(self) -> str:
        """"compute" when the kernel does more than one flop per byte it touches, else "memory"."""
        return "compute" if self.gflops > self.gbytes_per_s else "memory"


@dataclass(frozen=True)
class Profile:
    kernels: tuple[KernelTime, ...]        # in descending time
    total_seconds: float                   # sum over kernel nodes (median per node)
    run_seconds: float                     # median of whole runs, views and Python included
    repeat: int

    def rows(self) -> list[dict[str, Any]]:
        return [{"node": k.node, "op": k.op, "workload": k.workload, "provenance": k.provenance,
                 "ms": k.seconds * 1e3, "share": k.share, "gflops": k.gflops, "gbytes_per_s": k.gbytes_per_s,
                 "bound": k.bound} for k in self.kernels]


def random_feeds(m: CompiledModel, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of the model's shapes and dtypes: uniform in [-1, 1) for floats, small ints otherwise
    (a profile must not depend on the user having data at hand)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape, dtype in m.inputs:
        kind = np.dtype(dtype).kind
        if kind == "f":
            feeds[name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif kind == "b":
            feeds[name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def profile_model(m: CompiledModel, feeds: Mapping[str, Any] | None = None, repeat: int = 10,
                  plot: str | None = None) -> Profile:
    """Time every kernel node of `m` over `repeat` runs (after one warm-up run)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"profile: repeat must be an int >= 1, got {repeat!r}")
    per_step, runs = m.step_times(random_feeds(m) if feeds is None else feeds, repeat)
    result = _summarize(m, {i: statistics.median(ts) for i, ts in per_step.items() if i in m.kernels},
                        statistics.median(runs), repeat)
    if plot is not None:
        plot_profile(result, plot, m.graph.name)
    return result


@dataclass(frozen=True)
class NodeComparison:
    """One kernel node in the model as compiled with the database and with every kernel at its
    template's rule default: what tuning changed for it, where it runs."""

    node: str
    op: str
    provenance: str               # of the kernel the database gave: tuned, nearest or default
    seconds: float
    default_seconds: float
    same_config: bool             # the database's config is the default: the two times differ by noise

    @property
    def speedup(self) -> float:
        """Default time over time: below 1, the database's config runs slower in this model."""
        return self.default_seconds / max(self.seconds, 1e-12)


@dataclass(frozen=True)
class Comparison:
    nodes: tuple[NodeComparison, ...]   # by time saved, most first; the last lose time
    run_seconds: float                  # whole run, compiled with the database
    default_run_seconds: float          # whole run, every kernel at its default
    repeat: int
    rounds: int

    def rows(self) -> list[dict[str, Any]]:
        return [{"node": n.node, "op": n.op, "provenance": n.provenance, "ms": n.seconds * 1e3,
                 "default_ms": n.default_seconds * 1e3, "speedup": n.speedup, "same_config": n.same_config}
                for n in self.nodes]


def compare_with_defaults(graph: Graph, db: Any = None, feeds: Mapping[str, Any] | None = None, repeat: int = 10,
                          rounds: int = 3, target: str = "llvm", layout: str = "nchw") -> Comparison:
    """`graph` compiled with the database `db` and with every kernel at its rule default (an empty
    database), each kernel node timed inside whole runs of both, the two models taking turns for
    `rounds` rounds of `repeat` runs (a node's time: the lowest of its per-round medians, so a burst
    of load hits both alike). Kernels tuned alone can rank differently inside the model, where
    other kernels' data fill the caches: this shows, per node, what tuning bought there. Nodes are
    matched by name; one that only one of the two compiled graphs has is left out. Nodes whose
    config is the default in both show the timing's noise."""
    for name, v in (("repeat", repeat), ("rounds", rounds)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"compare_with_defaults: {name} must be an int >= 1, got {v!r}")
    with tempfile.TemporaryDirectory() as tmp:
        tuned = CompiledModel(graph, db=db, target=target, layout=layout)
        default = CompiledModel(graph, db=os.path.join(tmp, "empty.db"), target=target, layout=layout)
    feeds = random_feeds(tuned) if feeds is None else feeds
    best: list[dict[str, float]] = [{}, {}]
    runs: list[float] = [math.inf, math.inf]
    for _ in range(rounds):
        for side, m in enumerate((tuned, default)):
            per_step, run = m.step_times(feeds, repeat)
            runs[side] = min(runs[side], statistics.median(run))
            for i, ts in per_step.items():
                if i in m.kernels:
                    name = m.graph.nodes[i].name
                    best[side][name] = min(best[side].get(name, math.inf), statistics.median(ts))
    defaults = {n.name: default.kernels[i] for i, n in enumerate(default.graph.nodes) if i in default.kernels}
    nodes = [NodeComparison(n.name, n.op, k.provenance.split(":", 1)[0], best[0][n.name], best[1][n.name],
                            (k.workload_key, k.config) == (defaults[n.name].workload_key, defaults[n.name].config))
             for i, n in enumerate(tuned.graph.nodes)
             if (k := tuned.kernels.get(i)) is not None and n.name in defaults]
    nodes.sort(key=lambda n: n.seconds - n.default_seconds)
    return Comparison(tuple(nodes), runs[0], runs[1], repeat, rounds)


def _summarize(m: CompiledModel, seconds: dict[int, float], run_seconds: float, repeat: int) -> Profile:
    total = sum(seconds.values())
    rows = []
    for i, s in seconds.items():
        node, kernel = m.graph.nodes[i], m.kernels[i]
        nbytes = sum(m.graph.value(v).nbytes for v in node.inputs + node.outputs)
        s = max(s, 1e-9)
        rows.append(KernelTime(node.name, node.op, kernel.workload_key, kernel.provenance.split(":", 1)[0], s,
                               s / total if total > 0 else math.nan, kernel.task.flop / s / 1e9, nbytes / s / 1e9))
    rows.sort(key=lambda k: -k.seconds)
    return Profile(tuple(rows), total, run_seconds, repeat)


def plot_profile(profile: Profile, path: str, title: str, top: int = 25) -> None:
    """A horizontal bar chart of the `top` slowest kernel nodes, coloured by provenance."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise ImportError("plotting a profile needs matplotlib: pip install 'autotune[plot]'") from None
    shown = profile.kernels[:top][::-1]
    colours = {"tuned": "tab:green", "nearest": "tab:orange", "default": "tab:red"}
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(shown) + 1.5))
    ax.barh([f"{k.node} ({k.op})" for k in shown], [k.seconds * 1e3 for k in shown],
            color=[colours.get(k.provenance, "tab:gray") for k in shown])
    ax.set(xlabel="ms per run (median)", title=f"{title}: {profile.total_seconds * 1e3:.3f} ms in kernels")
    ax.legend(handles=[Patch(color=c, label=p) for p, c in colours.items()], loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
