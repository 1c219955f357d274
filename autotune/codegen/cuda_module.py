"""A built CUDA kernel: CUDA C compiled by nvcc to a cubin, loaded through PyCUDA, launched
with the grid and block its bound loops imply, every argument checked first.

Arguments are numpy arrays (copied to the GPU and outputs copied back), PyCUDA GPUArrays, or
any object with `__cuda_array_interface__` (PyTorch, CuPy: used in place, no copies). Like the
CPU module, `compile_kernel` stops at bytes plus a JSON signature, so build workers compile
without a GPU and the measuring worker loads the result (`CudaFunction.from_cubin`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtype import dtype_info
from ..errors import ArgumentError
from ..ir.nodes import PrimFunc
from .cuda import emit_cuda, kernel_name
from .module import check_count, check_host_array
from .nvcc import compile_cuda

SIGNATURE_VERSION = 1


def compile_kernel(func: PrimFunc, arch: str) -> tuple[dict[str, Any], bytes]:
    """`func` as a cubin for `arch` and the JSON signature needed to load and launch it."""
    source, shape = emit_cuda(func)
    cubin = compile_cuda(source, arch, "cubin")
    sig = {"version": SIGNATURE_VERSION, "target_kind": "cuda", "name": func.name, "entry": kernel_name(func),
           "arch": arch, "params": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype} for p in func.params],
           "outputs": sorted(func.attrs.get("outputs", range(len(func.params)))),
           "launch": shape.to_json(), "cubin_sha256": hashlib.sha256(cubin).hexdigest(), "source": source}
    return sig, cubin


def _device_pointer(a: Any, what: str, shape: tuple[int, ...], dtype: np.dtype) -> int | None:
    """The device address of a GPU array after checking it, or None for a host array."""
    if isinstance(a, np.ndarray):
        return None
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is None and hasattr(a, "gpudata"):          # PyCUDA GPUArray without the interface
        iface = {"shape": a.shape, "typestr": a.dtype.str, "data": (int(a.gpudata), False),
                 "strides": None if a.flags.c_contiguous else a.strides}
    if iface is None:
        raise ArgumentError(f"{what}: expected a numpy array or a GPU array (__cuda_array_interface__), "
                            f"got {type(a).__name__}")
    got_dtype = np.dtype(iface["typestr"])
    if got_dtype != dtype:
        raise ArgumentError(f"{what}: expected dtype {dtype.name}, got {got_dtype.name}")
    if tuple(iface["shape"]) != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {tuple(iface['shape'])}")
    strides = iface.get("strides")
    if strides is not None and tuple(strides) != tuple(np.empty(shape, dtype).strides):
        raise ValueError(f"{what}: expected a C-contiguous GPU array, got strides {tuple(strides)}")
    ptr = int(iface["data"][0])
    if ptr % 16:
        raise ValueError(f"{what}: the GPU array starts at an address that is not 16-byte aligned; "
                         "pass an array that owns its allocation (float4 accesses need the alignment)")
    return ptr


class CudaFunction:
    """`f(*arrays)` launches the kernel on arrays in the order of the function's params and waits."""

    def __init__(self, signature: dict[str, Any], cubin: bytes) -> None:
        from .cuda_device import device_info, driver

        check_cuda_signature(signature, cubin)
        self._drv = drv = driver()
        here = device_info()["arch"]
        if signature["arch"] != here:
            raise ValueError(f"cuda kernel {signature['name']} was compiled for {signature['arch']}, "
                             f"this GPU is {here}")
        self.name = signature["name"]
        self._signature = dict(signature)
        self._params = [(p["name"], tuple(p["shape"]), np.dtype(dtype_info(p["dtype"]).numpy))
                        for p in signature["params"]]
        self._outputs = frozenset(signature["outputs"])
        self._module = drv.module_from_buffer(cubin)
        self._kernel = self._module.get_function(signature["entry"])
        self._kernel.prepare("P" * len(self._params))
        self._grid, self._block = tuple(signature["launch"]["grid"]), tuple(signature["launch"]["block"])

    @classmethod
    def build(cls, func: PrimFunc, arch: str) -> CudaFunction:
        return cls(*compile_kernel(func, arch))

    def signature(self) -> dict[str, Any]:
        return dict(self._signature)

    def _pointers(self, arrays: tuple, copy_outputs: bool = False
                  ) -> tuple[list[int], list[tuple[int, np.ndarray, Any]]]:
        """Device pointers for every argument; host arrays get a temporary device copy (of their
        contents too for outputs when `copy_outputs`: a kernel that skips elements then shows
        the host's sentinel values, not whatever the allocation held before)."""
        check_count(self.name, [p[0] for p in self._params], arrays)
        pointers, host = [], []
        for pos, (a, (pname, shape, dtype)) in enumerate(zip(arrays, self._params)):
            what = f"argument {pos} ({pname})"
            ptr = _device_pointer(a, what, shape, dtype)
            if ptr is None:
                check_host_array(a, what, dtype, shape, pos in self._outputs, self.name)
                mem = self._drv.mem_alloc(max(a.nbytes, 1))
                if copy_outputs or pos not in self._outputs:
                    self._drv.memcpy_htod(mem, np.ascontiguousarray(a))
                host.append((pos, a, mem))
                ptr = int(mem)
            pointers.append(ptr)
        written = [p for p in range(len(arrays)) if p in self._outputs]
        for i, p in enumerate(pointers):
            for o in written:
                if o != i and pointers[o] == p:
                    raise ValueError(f"argument {i} and argument {o} ({self._params[o][0]}) are the same GPU "
                                     "memory; pass distinct arrays")
        return pointers, host

    def __call__(self, *arrays: Any) -> None:
        pointers, host = self._pointers(arrays)
        try:
            self._kernel.prepared_call(self._grid, self._block, *pointers)
            self._drv.Context.synchronize()
            for pos, a, mem in host:
                if pos in self._outputs:
                    out = a if a.flags.c_contiguous else np.empty(a.shape, a.dtype)
                    self._drv.memcpy_dtoh(out, mem)
                    if out is not a:
                        a[...] = out
        finally:
            for _, _, mem in host:
                mem.free()

    def bind(self, *arrays: Any) -> Callable[[], None]:
        """A no-argument launch on `arrays` (asynchronous: time it with CUDA events). Host arrays
        are copied to the GPU once; `fetch()` on the result copies the outputs back."""
        pointers, host = self._pointers(arrays, copy_outputs=True)
        kernel, grid, block, drv = self._kernel, self._grid, self._block, self._drv

        def run(_keep: tuple = (arrays, host)) -> None:
            kernel.prepared_call(grid, block, *pointers)

        def fetch() -> None:
            drv.Context.synchronize()
            for pos, a, mem in host:
                if pos in self._outputs:
                    drv.memcpy_dtoh(a, mem)
        run.fetch = fetch  # type: ignore[attr-defined]
        return run

    def get_source(self, fmt: str = "cuda") -> str:
        """"cuda": the generated CUDA C; "ptx": nvcc's PTX for this kernel's arch."""
        if fmt == "cuda":
            return self._signature["source"]
        if fmt == "ptx":
            return compile_cuda(self._signature["source"], self._signature["arch"], "ptx").decode()
        raise ValueError(f"get_source: unknown format {fmt!r}; expected 'cuda' or 'ptx'")

    def __repr__(self) -> str:
        return f"CudaFunction({self.name}, params=({', '.join(p[0] for p in self._params)}))"


def check_cuda_signature(signature: dict[str, Any], cubin: bytes) -> None:
    """ValueError naming what does not fit, before the driver sees the bytes."""
    if not isinstance(signature, dict) or signature.get("version") != SIGNATURE_VERSION:
        got = signature.get("version") if isinstance(signature, dict) else type(signature).__name__
        raise ValueError(f"cuda kernel signature: expected version {SIGNATURE_VERSION}, got {got!r}")
    digest = hashlib.sha256(bytes(cubin)).hexdigest()
    if digest != signature.get("cubin_sha256"):
        raise ValueError(f"cubin of {signature.get('name')}: sha256 {digest[:12]}... does not match its "
                         "signature; the bytes are damaged")
