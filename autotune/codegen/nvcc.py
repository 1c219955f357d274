"""nvcc: CUDA C -> PTX or cubin, in a subprocess. Needs the CUDA toolkit, not a GPU, so build
workers and CI compile kernels on machines without one."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

from ..errors import BuildError

NVCC_TIMEOUT_S = 300.0


@functools.cache
def nvcc_path() -> str | None:
    """nvcc on PATH, else under $CUDA_HOME / $CUDA_PATH / /usr/local/cuda; None if absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


def compile_cuda(source: str, arch: str, fmt: str = "ptx") -> bytes:
    """`source` compiled for `arch` ("sm_80", "sm_90", ...) to "ptx" text or a "cubin" image."""
    if fmt not in ("ptx", "cubin"):
        raise ValueError(f"compile_cuda: unknown format {fmt!r}; expected 'ptx' or 'cubin'")
    if not (arch.startswith("sm_") and arch[3:].rstrip("a").isdigit()):
        raise ValueError(f"compile_cuda: arch must look like 'sm_80', got {arch!r}")
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc (the CUDA toolkit) was not found on PATH, $CUDA_HOME or /usr/local/cuda; "
                         "it is needed to compile CUDA kernels")
    with tempfile.TemporaryDirectory(prefix="autotune-nvcc-") as tmp:
        src, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, f"kernel.{fmt}")
        with open(src, "w") as f:
            f.write(source)
        cmd = [nvcc, f"-{fmt}", f"-arch={arch}", "-O3", "-o", out, src]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BuildError(f"nvcc did not finish in {NVCC_TIMEOUT_S:.0f} s") from None
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if "error" in ln] or proc.stderr.splitlines()
            raise BuildError(f"nvcc failed for {arch}: {(errors or ['no message'])[0].strip()}")
        with open(out, "rb") as f:
            return f.read()
