"""Object code that calls a function no loaded library provides is refused with a BuildError
naming it, on both paths (IR compiled in process, object code loaded), instead of crashing when
the kernel reaches the call; a parallel kernel's libgomp calls resolve."""
import pytest

import autotune
from autotune.codegen import compile_object, jit
from autotune.codegen.elf_symbols import undefined_symbols
from autotune.errors import BuildError


def _ir() -> str:
    """A call of a function no library has (as LLVM's lowering of a double -> half truncation to
    __truncdfhf2 was, in a process without libgcc's copy of it)."""
    triple, layout = jit.triple_and_layout()
    return f"""target triple = "{triple}"
target datalayout = "{layout}"
declare double @autotune_no_such_function(double)
define void @f(ptr %a, ptr %b) {{
  %x = load double, ptr %a
  %y = call double @autotune_no_such_function(double %x)
  store double %y, ptr %b
  ret void
}}
"""


def test_a_missing_runtime_function_is_a_build_error_on_both_paths():
    obj = jit.emit_object(_ir(), "f")
    assert undefined_symbols(obj) == ["autotune_no_such_function"]
    for load in (lambda: jit.compile_ir(_ir(), "f"), lambda: jit.load_object(obj, "f")):
        with pytest.raises(BuildError, match=r"f calls autotune_no_such_function, which no library loaded"):
            load()


def test_a_parallel_kernel_resolves_its_libgomp_calls():
    task = autotune.create_task("softmax", M=64, N=1000)
    s, args = task.instantiate(0)
    _, obj = compile_object(autotune.lower(s, args))
    assert "GOMP_parallel" in undefined_symbols(obj)
    jit.check_resolvable(obj, "softmax")
    assert undefined_symbols(b"not an object") is None
