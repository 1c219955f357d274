"""Object code that calls a function no loaded library provides is refused with a BuildError
naming it, on both paths (IR compiled in process, object code loaded), instead of crashing when
the kernel reaches the call; a parallel kernel's libgomp calls resolve."""
import pytest

import autotune
from autotune.codegen import compile_object, jit
from autotune.codegen.elf_symbols import undefined_symbols
from autotune.errors import BuildError


def _ir() -> str:
    """A double -> half truncation, which LLVM lowers to a call of __truncdfhf2 on x86-64."""
    triple, layout = jit.triple_and_layout()
    return f"""target triple = "{triple}"
target datalayout = "{layout}"
define void @f(ptr %a, ptr %b) {{
  %x = load double, ptr %a
  %h = fptrunc double %x to half
  store half %h, ptr %b
  ret void
}}
"""


def test_a_missing_runtime_function_is_a_build_error_on_both_paths():
    obj = jit.emit_object(_ir(), "f")
    missing = [s for s in undefined_symbols(obj) if s.startswith("__")]
    if not missing:
        pytest.skip("this host's LLVM truncates double to half inline")
    for load in (lambda: jit.compile_ir(_ir(), "f"), lambda: jit.load_object(obj, "f")):
        with pytest.raises(BuildError, match=rf"f calls {missing[0]}, which no library loaded"):
            load()


def test_a_parallel_kernel_resolves_its_libgomp_calls():
    task = autotune.create_task("softmax", M=64, N=1000)
    s, args = task.instantiate(0)
    _, obj = compile_object(autotune.lower(s, args))
    assert "GOMP_parallel" in undefined_symbols(obj)
    jit.check_resolvable(obj, "softmax")
    assert undefined_symbols(b"not an object") is None
