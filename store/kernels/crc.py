"""CRC-32 for the kernels: zlib's (reflected polynomial 0xEDB88320), as RocketMQ's ``UtilAll.crc32``.

The kernels call one external function, ``rocketlake_crc32(crc, pointer, length)``, with the
signature of libdeflate's ``libdeflate_crc32``. At import the symbol is bound to libdeflate's
(PCLMUL / AVX folding where the CPU has them: 4-10x the table CRC on 100 B - 4 KiB records;
Debian's ``libdeflate0``, which the Makefile installs) when that library loads, else to this
module's slicing-by-8 table CRC compiled as a C callback. The kernels' machine code is the same
either way, so their cache holds one entry each whichever is bound. ``ROCKETLAKE_CRC32=table``
in the environment binds the table CRC (to compare or test the two).
"""
from __future__ import annotations

import ctypes
import os
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from llvmlite import binding
from numba import types
from numba.core.ccallback import CFunc

from rocketlake.store.kernels import callback, kernel

_SYMBOL = "rocketlake_crc32"
#: the C signature: uint32_t (uint32_t crc, const void *data, size_t length)
_SIGNATURE = types.uint32(types.uint32, types.voidptr, types.uintp)
_native: Any = types.ExternalFunction(_SYMBOL, _SIGNATURE)
#: shared libraries tried for ``libdeflate_crc32``, in order
LIBRARIES = ("libdeflate.so.0", "libdeflate.0.dylib", "libdeflate.dylib")


def _crc_tables() -> npt.NDArray[np.uint32]:
    """Slicing-by-8 tables of the CRC-32 zlib computes (reflected polynomial 0xEDB88320)."""
    t = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[0, i] = c
    for k in range(1, 8):
        for i in range(256):
            t[k, i] = (int(t[k - 1, i]) >> 8) ^ int(t[0, int(t[k - 1, i]) & 0xFF])
    return t


_CRC = _crc_tables()


def table_crc32(crc: int, data: npt.NDArray[np.uint8], length: int) -> np.uint32:
    """``libdeflate_crc32`` by slicing-by-8 tables: the CRC-32 ``crc`` continued over ``length``
    bytes at ``data`` (0 starts one). Compiled as a C callback only where libdeflate is absent."""
    t = _CRC
    c = np.uint32(crc) ^ np.uint32(0xFFFFFFFF)
    p = 0
    while p + 8 <= length:
        lo = c ^ (np.uint32(data[p]) | (np.uint32(data[p + 1]) << 8) | (np.uint32(data[p + 2]) << 16)
                  | (np.uint32(data[p + 3]) << 24))
        c = (t[7, lo & 0xFF] ^ t[6, (lo >> 8) & 0xFF] ^ t[5, (lo >> 16) & 0xFF] ^ t[4, lo >> 24]
             ^ t[3, data[p + 4]] ^ t[2, data[p + 5]] ^ t[1, data[p + 6]] ^ t[0, data[p + 7]])
        p += 8
    while p < length:
        c = t[0, (c ^ data[p]) & 0xFF] ^ (c >> 8)
        p += 1
    return c ^ np.uint32(0xFFFFFFFF)


def _bind() -> tuple[str, object]:
    """Bind ``rocketlake_crc32``: (what it is bound to, the object that keeps it loaded)."""
    if os.environ.get("ROCKETLAKE_CRC32") != "table":
        for name in LIBRARIES:
            try:
                lib = ctypes.CDLL(name)
                address = ctypes.cast(lib.libdeflate_crc32, ctypes.c_void_p).value
            except (OSError, AttributeError):
                continue
            binding.add_symbol(_SYMBOL, address)
            return name, lib
    compiled = table_callback()
    binding.add_symbol(_SYMBOL, compiled.address)
    return "table", compiled


@cache
def table_callback() -> CFunc:
    """``table_crc32`` compiled as a C callback (from the kernel cache when it is there: the
    warm-up compiles it, so that a machine without libdeflate does not)."""
    pointer = types.CPointer(types.uint8)  # type: ignore[no-untyped-call]
    return callback(types.uint32(types.uint32, pointer, types.uintp))(table_crc32)


#: what ``crc32`` runs: the libdeflate library's name, or "table"
BOUND, _KEEP = _bind()


@kernel
def crc32(buf: npt.NDArray[np.uint8], start: int, length: int) -> int:
    """zlib's CRC-32 of ``buf[start:start+length]`` (unsigned; ``buf`` contiguous, the range
    inside it)."""
    return int(_native(np.uint32(0), buf.ctypes.data + np.uintp(start), np.uintp(length)))
