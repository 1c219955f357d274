"""ONNX's own node cases (issue 14, part 3): every case in onnx_expected_passes.txt passes through
autotune's ONNX backend, every case in onnx_known_failures.txt still fails (one that passes must
move), and every case of an op either list names is in one of them: no case is silently skipped.

The cases run on the templates' default configs (an empty tuning database) and share one kernel
cache for the session, so a shape that several cases use compiles once. Skipped, saying why, while
autotune's ONNX frontend or graph runtime is absent."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).resolve().parent))   # _conformance, the shared helper

from _conformance import EXPECTED, KNOWN, expected_passes, known_failures, load_script

from autotune import runtime

conformance = load_script()


def _names(names, listing):
    """`names` as parameters, or one skipped parameter that says the list is still empty."""
    return names or [pytest.param(None, marks=pytest.mark.skip(reason=f"{listing.name} lists no case yet"))]


@pytest.fixture(scope="session")
def cases():
    return {c.name: c for c in conformance.collect_cases()}


@pytest.fixture(scope="session")
def backend_options(tmp_path_factory):
    missing = conformance.missing_api()
    if missing:
        pytest.skip(f"ONNX conformance needs autotune's ONNX frontend and graph runtime: {missing}")
    root = tmp_path_factory.mktemp("onnx_conformance")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOTUNE_CACHE", str(root / "cache"))
        mp.setenv("AUTOTUNE_DB", str(root / "empty.db"))
        runtime.clear_caches()
        yield {"db": str(root / "empty.db")}
    runtime.clear_caches()


def test_the_lists_name_real_cases_once(cases):
    passes, known = expected_passes(), known_failures()
    assert not [n for n in passes + list(known) if n not in cases], "names that are no ONNX node case"
    assert len(set(passes)) == len(passes), f"{EXPECTED.name} names a case twice"
    assert not set(passes) & set(known), f"cases in both {EXPECTED.name} and {KNOWN.name}"


def test_every_case_of_a_claimed_op_is_listed(cases):
    listed = set(expected_passes()) | set(known_failures())
    claimed = {cases[n].op for n in listed if n in cases}
    missing = sorted(n for n, c in cases.items() if c.op in claimed and n not in listed)
    assert not missing, (f"{len(missing)} case(s) of supported ops are in neither {EXPECTED.name} nor "
                         f"{KNOWN.name}: {missing[:20]}")


@pytest.mark.parametrize("name", _names(expected_passes(), EXPECTED))
def test_expected_pass(name, cases, backend_options):
    result = conformance.run_case(cases[name], backend_options)
    assert result.status == "pass", f"{name} regressed ({result.status}): {result.message}"


@pytest.mark.parametrize("name", _names(sorted(known_failures()), KNOWN))
def test_known_failure_still_fails(name, cases, backend_options):
    result = conformance.run_case(cases[name], backend_options)
    assert result.status != "pass", f"{name} passes now: move it from {KNOWN.name} to {EXPECTED.name}"
