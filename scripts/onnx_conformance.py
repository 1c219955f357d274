"""ONNX's own node test cases run through autotune's ONNX backend: pass / fail / unsupported per op.

The onnx wheel ships its backend node cases as generators (`onnx.backend.test.case.node`): each
case is a one-node model (or, `*_expanded*`, the node's function body) with inputs and expected
outputs. Each runs through `AutotuneBackend` and is compared as ONNX's backend runner compares
(same count, shape and dtype; allclose at the case's rtol/atol, 1e-3 / 1e-7).
- unsupported: the frontend refused the model before any work (an op, attribute value, opset or
  dtype it does not support);
- fail: anything else that goes wrong (import, compile, run, a wrong output), with its message.
Cases whose inputs and outputs are all float32 (the issue's goal: every one of a supported op
passes) are counted apart from the other dtypes, which are reported, not hidden.

ONNX stamps a case with its op's newest version (up to opset 28 in onnx 1.23) while the frontend
takes opsets 13-21. A case whose op means the same at the nearest opset the frontend takes
(`autotune.frontend.opsets.restamp`: same signature, strict shape inference with type checks passes,
no meaning changed without a signature change) runs at that opset and says so (`ran_at_opset`).

Usage:
    PYTHONPATH=. python scripts/onnx_conformance.py [--ops Conv,Relu] [--no-expanded] [--json]
        [-v] [--write-expected PATH] [--write-known-failures PATH]
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import onnx

from autotune.frontend.opsets import restamp

STATUSES = ("pass", "fail", "unsupported")
FRONTEND_OPSETS = range(13, 22)     # when the frontend does not say (autotune.frontend.onnx.SUPPORTED_OPSETS)
_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass(frozen=True)
class Case:
    """One ONNX node case: the op it tests, whether it is the function-expanded form, the model, one
    data set, and the tolerances ONNX gives it."""

    name: str
    op: str
    expanded: bool
    model: onnx.ModelProto
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    rtol: float
    atol: float

    @property
    def float32(self) -> bool:
        return all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in self.inputs + self.outputs)

    @property
    def opset(self) -> int:
        return default_opset(self.model)


@dataclass(frozen=True)
class Result:
    name: str
    op: str
    expanded: bool
    float32: bool
    status: str
    message: str
    opset: int
    ran_at_opset: int
    seconds: float


def default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _array(value: Any) -> Any:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def collect_cases(ops: Iterable[str] | None = None, expanded: bool = True) -> list[Case]:
    """Every node case of the installed onnx (those of `ops` only, if given), plain cases first.
    `collect_testcases` keeps module state (a second call with an op filter returns the first
    call's list), so all cases are collected and filtered here."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):   # the generators divide by zero on purpose
        warnings.simplefilter("ignore")
        tests = [t for t in collect_testcases(None) if t.kind == "node"]
    cases = []
    for t in tests:
        if t.model is None or not t.data_sets:
            continue
        inputs, outputs = t.data_sets[0]
        cases.append(Case(t.name, t.model.graph.node[0].op_type, bool(_EXPANDED.search(t.name)), t.model,
                          tuple(_array(a) for a in inputs), tuple(_array(a) for a in outputs), t.rtol, t.atol))
    op_of = {c.name: c.op for c in cases if not c.expanded}   # an expanded case tests its plain case's op
    cases = [replace(c, op=op_of.get(_EXPANDED.sub("", c.name), "?")) if c.expanded else c for c in cases]
    return sorted((c for c in cases if (ops is None or c.op in set(ops)) and (expanded or not c.expanded)),
                  key=lambda c: (c.expanded, c.op, c.name))


def compare(case: Case, got: Sequence[Any]) -> None:
    """AssertionError naming the first output that differs from the case's expected output."""
    if len(got) != len(case.outputs):
        raise AssertionError(f"{len(got)} outputs, expected {len(case.outputs)}")
    for i, (g, want) in enumerate(zip(got, case.outputs)):
        g = np.asarray(g)
        if g.shape != want.shape or g.dtype != want.dtype:
            raise AssertionError(f"output {i}: {g.dtype}{list(g.shape)}, expected {want.dtype}{list(want.shape)}")
        if want.dtype == object or want.dtype.kind in "biuSU":
            bad = g != want
        else:
            bad = ~np.isclose(g, want, rtol=case.rtol, atol=case.atol, equal_nan=True)
        if bad.any():
            worst = np.nanmax(np.abs(g.astype(np.float64) - want)) if want.dtype.kind in "biuf" else "n/a"
            raise AssertionError(f"output {i}: {int(bad.sum())}/{bad.size} elements differ "
                                 f"(max abs diff {worst}, rtol {case.rtol}, atol {case.atol})")


def run_case(case: Case, options: dict[str, Any] | None = None, opsets: range | None = None) -> Result:
    """`case` through AutotuneBackend (prepare options: db, target) and compared."""
    from autotune.frontend.onnx_backend import AutotuneBackend, UnsupportedModelError

    model = restamp(case.model, opsets or frontend_opsets())
    start, status, message = time.perf_counter(), "pass", ""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="autotune: no tuned record")
            got = AutotuneBackend.run_model(model, list(case.inputs), **(options or {}))
        compare(case, got)
    except UnsupportedModelError as e:
        status, message = "unsupported", str(e)
    except Exception as e:  # noqa: BLE001  (every other error is this case's failure, reported with its message)
        status, message = "fail", f"{type(e).__name__}: {e}"
    return Result(case.name, case.op, case.expanded, case.float32, status, message.strip().split("\n")[0][:300],
                  case.opset, default_opset(model), round(time.perf_counter() - start, 4))


def frontend_opsets() -> range:
    """The opsets autotune's ONNX frontend takes (its SUPPORTED_OPSETS, else 13..21)."""
    try:
        frontend = importlib.import_module("autotune.frontend.onnx")
    except ImportError:
        return FRONTEND_OPSETS
    return getattr(frontend, "SUPPORTED_OPSETS", FRONTEND_OPSETS)


def missing_api() -> str | None:
    """Why autotune cannot run ONNX models here (its frontend or graph runtime is absent), or None."""
    try:
        importlib.import_module("autotune.frontend.onnx")
    except ImportError as e:
        return f"autotune.frontend.onnx cannot be imported ({e})"
    if not hasattr(importlib.import_module("autotune"), "compile_model"):
        return "autotune has no compile_model"
    return None


def tally(results: Iterable[Result]) -> dict[str, dict[str, Counter[str]]]:
    """op -> {"float32": Counter(status), "other": Counter(status)}, and "TOTAL" over every op."""
    table: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: {"float32": Counter(), "other": Counter()})
    for r in results:
        for op in (r.op, "TOTAL"):
            table[op]["float32" if r.float32 else "other"][r.status] += 1
    return dict(table)


def format_table(table: dict[str, dict[str, Counter[str]]]) -> str:
    head = f"{'op':<28}{'float32 pass':>13}{'fail':>6}{'unsup':>7}   {'other pass':>10}{'fail':>6}{'unsup':>7}"
    lines = [head, "-" * len(head)]
    for op in sorted(table, key=lambda o: (o == "TOTAL", o)):
        f, o = table[op]["float32"], table[op]["other"]
        if op == "TOTAL":
            lines.append("-" * len(head))
        lines.append(f"{op:<28}{f['pass']:>13}{f['fail']:>6}{f['unsupported']:>7}   "
                     f"{o['pass']:>10}{o['fail']:>6}{o['unsupported']:>7}")
    return "\n".join(lines)


def known_failure_lines(results: Sequence[Result]) -> list[str]:
    """`name  reason` for every case that does not pass, of each op the frontend took at least one
    case of (an op refused in all its cases is not claimed)."""
    claimed = {r.op for r in results if r.status != "unsupported"}
    return [f"{r.name}  {r.status}: {r.message}" for r in results if r.op in claimed and r.status != "pass"]


def _write(path: str, header: str, lines: Sequence[str]) -> None:
    with open(path, "w") as f:
        f.write(header + "".join(line + "\n" for line in lines))


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", help="comma-separated ONNX op types (default: every op with node cases)")
    p.add_argument("--no-expanded", action="store_true", help="leave out the function-expanded cases")
    p.add_argument("--json", action="store_true", help="print every result and the tally as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="print each failing case with its message")
    p.add_argument("--write-expected", metavar="PATH", help="write the passing case names to PATH")
    p.add_argument("--write-known-failures", metavar="PATH", help="write `name  reason` lines for the cases of "
                   "claimed ops that do not pass (a draft: check each reason)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None
    missing = missing_api()
    if missing:
        print(f"onnx_conformance: {missing}", file=sys.stderr)
        return 2
    cases = collect_cases(ops, expanded=not args.no_expanded)
    if not cases:
        print(f"onnx_conformance: no node cases for ops {ops}", file=sys.stderr)
        return 2
    results = [run_case(c) for c in cases]
    table = tally(results)
    if args.json:
        print(json.dumps({"onnx": onnx.__version__, "results": [asdict(r) for r in results],
                          "tally": {op: {k: dict(v) for k, v in t.items()} for op, t in table.items()}}, indent=1))
    else:
        print(format_table(table))
        if args.verbose:
            print("\n".join(f"{r.status:<12}{r.name}: {r.message}" for r in results if r.status != "pass"))
    if args.write_expected:
        _write(args.write_expected, f"# ONNX node cases autotune passes (onnx {onnx.__version__}); written by "
               "scripts/onnx_conformance.py --write-expected\n", sorted(r.name for r in results if r.status == "pass"))
    if args.write_known_failures:
        _write(args.write_known_failures, "# case_name  reason: cases of supported ops autotune cannot pass yet\n",
               known_failure_lines(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
