"""The undefined symbols of an ELF64 relocatable object: what the loader must find elsewhere.

LLVM lowers some operations to runtime-library calls (a double -> half truncation, for one, to
`__truncdfhf2`); MCJIT links a symbol the process lacks to address 0, and the kernel crashes
when it reaches the call. Reading the object's symbol table first turns that into a BuildError
naming the symbol. Only what this needs is parsed: the section headers, the symbol table and
its string table (little-endian ELF64, what every x86-64 and AArch64 Linux host emits).
"""
from __future__ import annotations

import struct

_ELF_MAGIC = b"\x7fELF"
_SHT_SYMTAB = 2
_STB_GLOBAL = 1


def undefined_symbols(obj: bytes) -> list[str] | None:
    """Names of the global symbols `obj` uses but does not define (weak ones left out: they may
    stay 0); None when `obj` is not little-endian ELF64 (nothing to check)."""
    if obj[:4] != _ELF_MAGIC or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]
    names: list[str] = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB or not entsize:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, at)
            if shndx == 0 and name and info >> 4 == _STB_GLOBAL:
                end = obj.index(b"\0", strings + name)
                names.append(obj[strings + name:end].decode())
    return names
