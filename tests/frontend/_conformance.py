"""Shared by the conformance tests: scripts/onnx_conformance.py loaded as a module (scripts/ is not
a package), and the two committed case lists."""
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "scripts" / "onnx_conformance.py"
EXPECTED = HERE / "onnx_expected_passes.txt"
KNOWN = HERE / "onnx_known_failures.txt"


def load_script():
    """The script as module `onnx_conformance` (registered first: its dataclasses look it up)."""
    if "onnx_conformance" not in sys.modules:
        spec = importlib.util.spec_from_file_location("onnx_conformance", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["onnx_conformance"] = module
        spec.loader.exec_module(module)
    return sys.modules["onnx_conformance"]


def _entries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def expected_passes() -> list[str]:
    return _entries(EXPECTED)


def known_failures() -> dict[str, str]:
    """case name -> reason; a line without a reason is an error."""
    out = {}
    for line in _entries(KNOWN):
        name, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{KNOWN.name}: {name!r} has no reason")
        out[name] = reason.strip()
    return out
