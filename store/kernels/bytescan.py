"""Finding a byte in a buffer eight bytes at a time (SWAR: SIMD within a register), for the
kernels' scans of short strings (properties' separators).

A word is loaded unaligned, little-endian (x86-64 and AArch64, the platforms numba runs on), and
XORed with the byte repeated eight times: the wanted byte's places become zero bytes, found by
``(v - 0x01..01) & ~v & 0x80..80``, whose lowest set bit always marks the first zero byte (a
borrow only marks bytes above a real zero ones).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

from rocketlake.store.kernels import kernel

assert sys.byteorder == "little", "find_byte reads words little-endian"

_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)


def _load_word_typing(typingctx: Any, buf: Any, at: Any) -> Any:
    """The eight bytes at ``buf[at:at + 8]`` as a little-endian uint64 (any alignment)."""
    sig = types.uint64(buf, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(array.data, [args[1]])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
    return sig, codegen


def _byte_index_typing(typingctx: Any, zeros: Any) -> Any:
    """The index (int64) of the lowest byte whose high bit is set in a non-zero uint64."""
    sig = types.int64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        bits = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.lshr(bits, ir.Constant(ir.IntType(64), 3))
    return sig, codegen


_load_word: Any = intrinsic(_load_word_typing)  # numba calls them without typingctx
_byte_index: Callable[[Any], int] = cast(Any, intrinsic(_byte_index_typing))


@kernel
def find_byte(buf: npt.NDArray[np.uint8], p: int, end: int, b: int) -> int:
    """The first position in ``[p, end)`` holding byte ``b``, ``end`` when none does (never
    reads at or past ``end``)."""
    pattern = _ONES * np.uint64(b)
    while p + 8 <= end:
        v = _load_word(buf, p) ^ pattern
        zeros = (v - _ONES) & ~v & _HIGHS
        if zeros:
            return p + _byte_index(zeros)
        p += 8
    while p < end and buf[p] != b:
        p += 1
    return p
