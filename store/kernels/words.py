"""Machine words in a byte buffer: big-endian integers read in one load (and a byte swap)
instead of a shift per byte, and written (``put_be32``, ``put_be64``); eight bytes at a time
(SWAR: SIMD within a register) a byte found (properties' separators) or bytes checked for ASCII
(UTF-8 checks).

Loads are unaligned and read the host's little-endian words (x86-64 and AArch64, the platforms
numba runs on). ``find_byte`` XORs a word with the wanted byte repeated eight times: the byte's
places become zero bytes, found by ``(v - 0x01..01) & ~v & 0x80..80``, whose lowest set bit
always marks the first zero byte (a borrow only marks bytes above a real zero).
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

assert sys.byteorder == "little", "the kernels read words little-endian"

_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)


def _loader(bits: int, big_endian: bool, signed: bool) -> Any:
    """An intrinsic ``(buf, at) ->`` the ``bits``-bit integer at ``buf[at:]`` (any alignment),
    widened to 64 bits."""
    def typing(typingctx: Any, buf: Any, at: Any) -> Any:
        if not isinstance(buf, types.Array):
            return None  # not a buffer: numba's typing error
        sig = (types.int64 if signed else types.uint64)(buf, types.intp)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(bits).as_pointer())
            v = builder.load(ptr, align=1)
            if big_endian:
                v = builder.bswap(v)
            return v if bits == 64 else (builder.sext if signed else builder.zext)(v, ir.IntType(64))
        return sig, codegen
    return intrinsic(typing)


#: ``(buf, at) ->`` the signed big-endian 64- / 32-bit integer at ``buf[at:]``
load_be64: Callable[[npt.NDArray[np.uint8], int], int] = _loader(64, True, True)
load_be32: Callable[[npt.NDArray[np.uint8], int], int] = _loader(32, True, True)
_load_word: Any = _loader(64, False, False)


def _byte_index_typing(typingctx: Any, marks: Any) -> Any:
    """``(uint64) ->`` the index (int64) of the lowest byte with a set bit in a non-zero word."""
    sig = types.int64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        bits = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.lshr(bits, ir.Constant(ir.IntType(64), 3))
    return sig, codegen


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


@kernel
def is_ascii_word(buf: npt.NDArray[np.uint8], p: int) -> bool:
    """Whether the eight bytes at ``buf[p:p + 8]`` are all below 0x80."""
    highs: int = _load_word(buf, p) & _HIGHS
    return highs == 0


@kernel
def put_be32(buf: npt.NDArray[np.uint8], p: int, v: int) -> None:
    """Write the low 32 bits of ``v`` big-endian at ``buf[p:p + 4]``."""
    buf[p] = (v >> 24) & 0xFF
    buf[p + 1] = (v >> 16) & 0xFF
    buf[p + 2] = (v >> 8) & 0xFF
    buf[p + 3] = v & 0xFF


@kernel
def put_be64(buf: npt.NDArray[np.uint8], p: int, v: int) -> None:
    """Write ``v`` big-endian at ``buf[p:p + 8]``."""
    put_be32(buf, p, v >> 32)
    put_be32(buf, p + 4, v)
