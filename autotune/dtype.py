"""One table of dtypes: name <-> numpy <-> LLVM type name <-> CUDA C type <-> bytes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class DType:
    name: str
    numpy: type
    llvm: str       # llvmlite.ir type spelling: "float", "double", "i32", ...
    cuda: str       # CUDA C spelling
    bytes: int
    kind: str       # "float", "int", "uint" or "bool"


_TABLE = {
    d.name: d
    for d in (
        DType("float16", np.float16, "half", "half", 2, "float"),
        DType("float32", np.float32, "float", "float", 4, "float"),
        DType("float64", np.float64, "double", "double", 8, "float"),
        DType("int8", np.int8, "i8", "signed char", 1, "int"),
        DType("int16", np.int16, "i16", "short", 2, "int"),
        DType("int32", np.int32, "i32", "int", 4, "int"),
        DType("int64", np.int64, "i64", "long long", 8, "int"),
        DType("uint8", np.uint8, "i8", "unsigned char", 1, "uint"),
        DType("uint16", np.uint16, "i16", "unsigned short", 2, "uint"),
        DType("uint32", np.uint32, "i32", "unsigned int", 4, "uint"),
        DType("uint64", np.uint64, "i64", "unsigned long long", 8, "uint"),
        DType("bool", np.bool_, "i1", "bool", 1, "bool"),
    )
}


def dtype_info(name: str) -> DType:
    """The table row for `name`; a clear TypeError for anything unknown."""
    row = _TABLE.get(str(name))
    if row is None:
        raise TypeError(f"unknown dtype {name!r}; expected one of {sorted(_TABLE)}")
    return row


def is_float(name: str) -> bool:
    return dtype_info(name).kind == "float"


def is_int(name: str) -> bool:
    return dtype_info(name).kind in ("int", "uint")


def from_numpy(dt: np.dtype) -> str:
    """The dtype name of a numpy dtype (TypeError for unsupported ones)."""
    name = np.dtype(dt).name
    dtype_info(name)
    return name
